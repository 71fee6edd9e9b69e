"""Python reference WordPiece tokenizer with google-research/bert's exact rules.

A line-for-line port of `google-research/bert/tokenization.py` (`FullTokenizer`,
`BasicTokenizer`, `WordpieceTokenizer`), kept as the ground truth that the in-graph
tokenizers (`BertPreprocessor` with `tokenizer="core"` or `"tf_text"`) are tested against.

Rules (BasicTokenizer, then WordpieceTokenizer):
  1. Bytes are decoded as UTF-8 with invalid bytes dropped (`errors="ignore"`).
  2. NUL, U+FFFD and control/format characters (categories Cc, Cf, except tab, newline and
     carriage return) are deleted; the characters on either side join.
  3. Whitespace (space, tab, newline, CR, category Zs) becomes a space; CJK ideographs get
     spaces on both sides; the text is split with Python's `str.split()`.
  4. Uncased only: each word is lower-cased with `str.lower()` (full Unicode mapping with the
     final-sigma rule), then NFD-decomposed, and combining marks (category Mn) are dropped.
  5. Each word is split around punctuation (ASCII non-alphanumeric printables and category P*).
  6. WordPiece: greedy longest-match-first with the `##` continuation prefix; a word longer
     than `MAX_INPUT_CHARS_PER_WORD` code points, or one with any unmatched remainder, is one
     `[UNK]` (never the pieces found so far).

Offsets (`FullTokenizer.tokenize_with_offsets`): the same pieces, each with the `[start, end)`
code points of the ORIGINAL text it covers (SQuAD cuts answers from the context with them).
"""

from __future__ import annotations

import collections
import os
import unicodedata

import numpy as np

from keras_bert import fileio

from keras_bert.tokenization import packing

# The reference's `max_input_chars_per_word`: a word of more code points than this is [UNK].
MAX_INPUT_CHARS_PER_WORD = 200

UNK_TOKEN = "[UNK]"
CLS_TOKEN = packing.CLS_TOKEN
SEP_TOKEN = packing.SEP_TOKEN
PAD_TOKEN = packing.PAD_TOKEN
MASK_TOKEN = "[MASK]"

# CJK Unified Ideographs blocks of the reference `_is_chinese_char` (inclusive ranges).
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
CJK_LOWEST = min(lo for lo, _ in CJK_RANGES)


def convert_to_unicode(text) -> str:
    """Returns `text` as `str`; bytes are decoded as UTF-8, dropping invalid bytes.

    Raises:
        TypeError: if `text` is neither `str` nor `bytes`.
    """
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray, np.bytes_)):
        return bytes(text).decode("utf-8", "ignore")
    raise TypeError(f"text must be str or bytes, got {type(text).__name__}")


def load_vocab(vocab_file) -> "collections.OrderedDict[str, int]":
    """Reads a BERT `vocab.txt` (one token per line, id = line number) into an ordered dict.

    Lines end at "\n" only (`keras_bert.fileio.text_lines`), as the reference's `readline`; each
    line is stripped of surrounding whitespace, as in the reference. The file is decoded by
    `fileio.read_user_text` (UTF-8, a byte-order mark dropped).

    Raises:
        FileNotFoundError: if `vocab_file` does not exist.
        ValueError: if the file holds no tokens, or is not UTF-8 (`fileio.UserFileError`, naming
            the file, byte offset and line).
    """
    vocab_file = os.fspath(vocab_file)
    if not fileio.isfile(vocab_file):
        raise FileNotFoundError(f"vocab_file not found: {vocab_file}")
    vocab = collections.OrderedDict()
    for index, line in enumerate(fileio.text_lines(fileio.read_user_text(vocab_file))):
        vocab[line.strip()] = index
    if not vocab:
        raise ValueError(f"vocab_file {vocab_file} holds no tokens")
    return vocab


def whitespace_tokenize(text: str) -> list[str]:
    """Splits on Python whitespace (`str.split()`), as the reference does."""
    text = text.strip()
    return text.split() if text else []


def is_whitespace(char: str) -> bool:
    """Space, tab, newline, CR, or category Zs (reference `_is_whitespace`)."""
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def is_control(char: str) -> bool:
    """Category Cc or Cf, except tab, newline and CR (reference `_is_control`)."""
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char: str) -> bool:
    """ASCII non-alphanumeric printables and category P* (reference `_is_punctuation`)."""
    cp = ord(char)
    if (33 <= cp <= 47) or (58 <= cp <= 64) or (91 <= cp <= 96) or (123 <= cp <= 126):
        return True
    return unicodedata.category(char).startswith("P")


def is_cjk_ideograph(cp: int) -> bool:
    """Whether code point `cp` is in a CJK Unified Ideographs block (reference `_is_chinese_char`)."""
    if cp < CJK_LOWEST:  # most text: one comparison
        return False
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def strip_accents(text: str) -> str:
    """NFD-decomposes `text` and drops combining marks (category Mn): "Café" -> "Cafe".

    The reference `BasicTokenizer._run_strip_accents`, applied after `str.lower()` for uncased
    vocabularies. The result may be shorter than `text` ("e" + U+0301 -> "e") or longer than a
    character-by-character view suggests (U+0130 lower-cases to "i" + U+0307 -> "i").

    Args:
        text: str.

    Returns:
        str.
    """
    text = unicodedata.normalize("NFD", text)
    return "".join(c for c in text if unicodedata.category(c) != "Mn")


def _vanishes(char: str, do_lower_case: bool) -> bool:
    """Whether BasicTokenizer deletes `char` without a trace: NUL, U+FFFD and control/format
    characters always; uncased, also a character that lower-cases and strips to nothing (a
    combining mark). Never true for whitespace."""
    cp = ord(char)
    if cp == 0 or cp == 0xFFFD or is_control(char):
        return True
    if is_whitespace(char) or char.isspace():
        return False
    return do_lower_case and not strip_accents(char.lower())


class BasicTokenizer:
    """Cleaning, CJK spacing, optional lower-casing + accent stripping, punctuation split.

    Args:
        do_lower_case: bool. Lower-case and strip accents (uncased vocabularies).
        split_on_punc: bool. Start a new word at each punctuation character (BERT's rule);
            False keeps "hello!how" one word (Model Garden `tokenization.py`'s option).
    """

    def __init__(self, do_lower_case: bool = True, split_on_punc: bool = True):
        self.do_lower_case = bool(do_lower_case)
        self.split_on_punc = bool(split_on_punc)

    def tokenize(self, text) -> list[str]:
        text = self._clean_text(convert_to_unicode(text))
        text = self._tokenize_chinese_chars(text)
        split_tokens = []
        for token in whitespace_tokenize(text):
            if self.do_lower_case:
                token = strip_accents(token.lower())
            if self.split_on_punc:
                split_tokens.extend(self._run_split_on_punc(token))
            else:
                split_tokens.append(token)
        return whitespace_tokenize(" ".join(split_tokens))

    def words_with_offsets(self, text: str) -> list[list[tuple[str, int, int]]]:
        """The words of `tokenize(text)`, each a list of (character, start, end).

        `"".join(c for c, _, _ in word)` is the word `tokenize` returns; `[start, end)` are the
        code points of the ORIGINAL `text` that character came from:
        - a normalized character keeps the index of the character it came from (lower-casing
          and accent stripping are applied per character, so a character that becomes two,
          such as U+0130, gives both the same origin);
        - characters that vanish (deleted controls, combining marks stripped by
          uncased normalization) belong to the character before them, so "cafe" + U+0301
          ends after its accent.

        Args:
            text: str (not bytes: offsets index this very string).

        Returns:
            list of words, each a non-empty list of (str of one code point, int, int).
        """
        words = []
        for chunk in self._chunks_with_offsets(text):
            word = []
            for item in chunk:
                if item[0].isspace() or is_punctuation(item[0]):
                    if word:
                        words.append(word)
                    word = []
                    if not item[0].isspace():
                        words.append([item])
                else:
                    word.append(item)
            if word:
                words.append(word)
        return words

    def _chunks_with_offsets(self, text: str) -> list[list[tuple[str, int, int]]]:
        """Text -> normalized whitespace/CJK chunks of (char, origin start, origin end)."""
        n = len(text)
        ext_end = [0] * n  # end of character i including the vanishing characters after it
        nxt = n
        for i in range(n - 1, -1, -1):
            ext_end[i] = nxt
            if not _vanishes(text[i], self.do_lower_case):
                nxt = i
        chunks, current = [], []
        for i, c in enumerate(text):
            cp = ord(c)
            if cp == 0 or cp == 0xFFFD or is_control(c):
                continue
            if is_whitespace(c) or c.isspace():
                if current:
                    chunks.append(current)
                current = []
                continue
            if is_cjk_ideograph(cp):
                if current:
                    chunks.append(current)
                chunks.append([(c, i, ext_end[i])])
                current = []
                continue
            current.append((c, i, ext_end[i]))
        if current:
            chunks.append(current)
        return [self._normalize_with_offsets(chunk) for chunk in chunks]

    def _normalize_with_offsets(self, chunk):
        """Uncased: lower-case and strip accents per character, keeping each one's origin."""
        if not self.do_lower_case:
            return chunk
        per_char = [(m, i, e) for c, i, e in chunk for m in strip_accents(c.lower())]
        # Word-level lower-casing differs only by the final-sigma rule (same length): take its
        # characters, keep the per-character origins.
        word = strip_accents("".join(c for c, _, _ in chunk).lower())
        if len(word) != len(per_char):
            return per_char
        return [(m, i, e) for m, (_, i, e) in zip(word, per_char)]

    @staticmethod
    def _run_split_on_punc(text: str) -> list[str]:
        output = []
        start_new_word = True
        for char in text:
            if is_punctuation(char):
                output.append([char])
                start_new_word = True
            else:
                if start_new_word:
                    output.append([])
                start_new_word = False
                output[-1].append(char)
        return ["".join(x) for x in output]

    @staticmethod
    def _tokenize_chinese_chars(text: str) -> str:
        if text.isascii():  # no ideograph to space out
            return text
        output = []
        for char in text:
            if is_cjk_ideograph(ord(char)):
                output.extend((" ", char, " "))
            else:
                output.append(char)
        return "".join(output)

    @staticmethod
    def _clean_text(text: str) -> str:
        output = []
        for char in text:
            cp = ord(char)
            if cp == 0 or cp == 0xFFFD or is_control(char):
                continue
            output.append(" " if is_whitespace(char) else char)
        return "".join(output)


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece (reference `WordpieceTokenizer`)."""

    def __init__(
        self,
        vocab,
        unk_token: str = UNK_TOKEN,
        max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD,
    ):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text) -> list[str]:
        output_tokens = []
        for token in whitespace_tokenize(convert_to_unicode(text)):
            chars = list(token)
            if len(chars) > self.max_input_chars_per_word:
                output_tokens.append(self.unk_token)
                continue
            is_bad = False
            start = 0
            sub_tokens = []
            while start < len(chars):
                end = len(chars)
                cur_substr = None
                while start < end:
                    substr = "".join(chars[start:end])
                    if start > 0:
                        substr = "##" + substr
                    if substr in self.vocab:
                        cur_substr = substr
                        break
                    end -= 1
                if cur_substr is None:
                    is_bad = True
                    break
                sub_tokens.append(cur_substr)
                start = end
            if is_bad:
                output_tokens.append(self.unk_token)
            else:
                output_tokens.extend(sub_tokens)
        return output_tokens


class FullTokenizer:
    """End-to-end reference tokenizer: BasicTokenizer then WordpieceTokenizer.

    Like the reference, it accepts any vocabulary: constructing it and tokenizing need no
    special token (a word WordPiece cannot split becomes the string "[UNK]" whether or not the
    vocabulary holds it; only converting that string to an id needs it). Packing (`encode`,
    `cls_id`, `sep_id`, `pad_id`) needs `[CLS]`, `[SEP]` and `[PAD]` and says which are missing.

    Args:
        vocab_file: path to a BERT `vocab.txt` (id = line number), or a list/tuple of str tokens
            (id = index; a later duplicate wins, as in `load_vocab`), e.g.
            `BertPreprocessor.vocabulary`.
        do_lower_case: bool. True for uncased vocabularies (lower-case + strip accents).
        split_on_punc: bool, default True (BERT); see `BasicTokenizer`.

    Attributes:
        vocab: dict token -> id. inv_vocab: dict id -> token. vocab_file: the path, or
            "<token list>" when built from a list (used in error messages).

    Raises:
        FileNotFoundError: if `vocab_file` does not exist.
        ValueError: if the file (or list) holds no tokens.

    Source: google-research/bert `tokenization.py`.
    """

    def __init__(self, vocab_file, do_lower_case: bool = True, split_on_punc: bool = True):
        self.do_lower_case = bool(do_lower_case)
        if isinstance(vocab_file, (list, tuple)):
            self.vocab_file = "<token list>"
            self.vocab = collections.OrderedDict()
            for index, token in enumerate(vocab_file):
                self.vocab[token] = index
            if not self.vocab:
                raise ValueError("the vocabulary list holds no tokens")
        else:
            self.vocab_file = os.fspath(vocab_file)
            self.vocab = load_vocab(self.vocab_file)
        self.inv_vocab = {v: k for k, v in self.vocab.items()}
        self.basic_tokenizer = BasicTokenizer(
            do_lower_case=self.do_lower_case, split_on_punc=split_on_punc
        )
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

    def packing_ids(self) -> tuple[int, int, int]:
        """(cls_id, sep_id, pad_id); ValueError naming the missing ones (`packing_token_ids`)."""
        return packing.packing_token_ids(self.vocab, f"vocab_file {self.vocab_file}")

    @property
    def cls_id(self) -> int:
        return self.packing_ids()[0]

    @property
    def sep_id(self) -> int:
        return self.packing_ids()[1]

    @property
    def pad_id(self) -> int:
        return self.packing_ids()[2]

    @property
    def unk_id(self) -> int:
        """Id of `[UNK]`. Raises ValueError if the vocabulary has none."""
        if UNK_TOKEN not in self.vocab:
            raise ValueError(f"vocab_file {self.vocab_file} has no {UNK_TOKEN} token")
        return self.vocab[UNK_TOKEN]

    def tokenize(self, text) -> list[str]:
        """Text (str, or UTF-8 bytes) -> list of WordPiece tokens (no [CLS]/[SEP])."""
        split_tokens = []
        for token in self.basic_tokenizer.tokenize(text):
            split_tokens.extend(self.wordpiece_tokenizer.tokenize(token))
        return split_tokens

    def tokenize_with_offsets(self, text: str) -> tuple[list[str], list[int], list[int]]:
        """Text -> (pieces, starts, ends): `text[starts[k]:ends[k]]` is what piece k covers.

        `pieces == self.tokenize(text)`. A piece spans from its first character's origin to the
        end of its last one (`BasicTokenizer.words_with_offsets`: vanished characters count with
        the character before them); an [UNK] word spans the whole word. The in-graph twin is
        `CoreBertTokenizer.tokenize_with_offsets`.

        Args:
            text: str.

        Returns:
            three lists of equal length: str pieces, int starts, int ends; offsets are Python
            code-point indices into `text`.
        """
        pieces, starts, ends = [], [], []
        for word in self.basic_tokenizer.words_with_offsets(text):
            at = 0
            for k, piece in enumerate(
                self.wordpiece_tokenizer.tokenize("".join(c for c, _, _ in word))
            ):
                if piece == UNK_TOKEN:
                    length = len(word) - at
                else:
                    length = len(piece) - 2 if k > 0 and piece.startswith("##") else len(piece)
                pieces.append(piece)
                starts.append(word[at][1])
                ends.append(word[at + length - 1][2])
                at += length
        return pieces, starts, ends

    def convert_tokens_to_ids(self, tokens) -> list[int]:
        """Raises KeyError naming the token if one is not in the vocabulary."""
        out = []
        for t in tokens:
            try:
                out.append(self.vocab[t])
            except KeyError:
                raise KeyError(f"token {t!r} is not in the vocabulary {self.vocab_file}") from None
        return out

    def convert_ids_to_tokens(self, ids) -> list[str]:
        """Raises KeyError naming the id if it is outside the vocabulary."""
        out = []
        for i in ids:
            try:
                out.append(self.inv_vocab[int(i)])
            except KeyError:
                raise KeyError(
                    f"id {i} is outside the vocabulary (size {len(self.vocab)})"
                ) from None
        return out

    def tokenize_to_ids(self, text) -> list[int]:
        return self.convert_tokens_to_ids(self.tokenize(text))

    def encode(self, text, text_b=None, max_seq_length: int = 128) -> dict:
        """Tokenizes and packs one example as `[CLS] A [SEP] (B [SEP])`, padded.

        Returns:
            dict of `input_word_ids`, `input_mask`, `input_type_ids`: numpy int32
            `[max_seq_length]` (tokens counted include [CLS]/[SEP]).

        Raises:
            ValueError: if the vocabulary lacks `[CLS]`, `[SEP]` or `[PAD]` (named), checked
                before tokenizing.
        """
        cls_id, sep_id, pad_id = self.packing_ids()
        ids_a = self.tokenize_to_ids(text)
        ids_b = None if text_b is None else self.tokenize_to_ids(text_b)
        packed = packing.pack_inputs(
            ids_a, ids_b, max_seq_length=max_seq_length, cls_id=cls_id, sep_id=sep_id, pad_id=pad_id
        )
        return {k: np.asarray(v, dtype=np.int32) for k, v in packed.items()}
