"""`BertPreprocessor`: raw text to BERT model inputs, inside the graph.

tf.string `[B]` (or a pair of them) -> `input_word_ids`, `input_mask`, `input_type_ids`,
int32 `[B, max_seq_length]`, with google-research/bert's tokenization and packing
(`[CLS] A [SEP] (B [SEP])`, pair truncation on flattened word pieces, longer segment first,
ties from B; see `packing.py`). Usable eagerly, in `tf.data.Dataset.map`, inside a
`tf.function` with a `[None]` string signature, and in exported SavedModels.

Two tokenizer back ends:
* `"core"` (default): `CoreBertTokenizer`, core TF ops only; ids identical to the Python
  reference `FullTokenizer`; a SavedModel using it needs no tensorflow_text import.
* `"tf_text"`: tensorflow-text's `FastBertTokenizer`, after the reference's text cleaning
  (controls deleted, whitespace -> space) done with core ops. It normalises with NFKC-style
  case folding and counts the word-length limit in bytes, so it differs from the reference
  on a few characters (listed in docs/tokenization.md). Needs `import tensorflow_text`
  wherever the graph is loaded.

The vocabulary is stored in the layer (`self.vocabulary`, a list of tokens, id = index)
and in `get_config()`, so the layer and its SavedModels work after the vocab file is gone;
`vocab_file` (the original path, may be None) is kept for exporters that copy it to assets.
"""

from __future__ import annotations

import os

import keras
import tensorflow as tf

from keras_bert.config import INPUT_NAMES
from keras_bert.tokenization import core_tokenizer
from keras_bert.tokenization import full_tokenizer as ft

TOKENIZERS = ("core", "tf_text")


def _vocab_list_from_file(vocab_file) -> list[str]:
    vocab = ft.load_vocab(vocab_file)
    tokens = [None] * (max(vocab.values()) + 1)
    for t, i in vocab.items():
        tokens[i] = t
    # Ids shadowed by a later duplicate line keep a placeholder that can never match a word.
    return [t if t is not None else f"[duplicate{i}]" for i, t in enumerate(tokens)]


def pack_ragged(ids_a, ids_b, max_seq_length: int, cls_id: int, sep_id: int, pad_id: int):
    """Packs ragged id tensors into dense BERT inputs (in-graph `packing.pack_inputs`).

    Args:
        ids_a: int32 RaggedTensor [B, (n_a)]; ids_b: int32 RaggedTensor [B, (n_b)] or None.
        max_seq_length: int, tokens per row including [CLS]/[SEP] and padding.

    Returns:
        dict of int32 Tensors [B, max_seq_length]: input_word_ids, input_mask, input_type_ids.
    """
    ids_a = tf.cast(ids_a, tf.int32)
    batch = ids_a.nrows(out_type=tf.int64)
    len_a = tf.cast(ids_a.row_lengths(), tf.int32)
    if ids_b is None:
        keep_a = tf.minimum(len_a, max_seq_length - 2)
    else:
        ids_b = tf.cast(ids_b, tf.int32)
        len_b = tf.cast(ids_b.row_lengths(), tf.int32)
        # Closed form of _truncate_seq_pair (see packing.truncated_lengths).
        excess = len_a + len_b - (max_seq_length - 3)
        diff = tf.abs(len_a - len_b)
        low = tf.minimum(len_a, len_b)
        r = excess - diff
        a_gt = len_a > len_b
        keep_a = tf.where(
            excess <= 0,
            len_a,
            tf.where(excess <= diff, tf.where(a_gt, len_a - excess, len_a), low - r // 2),
        )
        keep_b = tf.where(
            excess <= 0,
            len_b,
            tf.where(excess <= diff, tf.where(a_gt, len_b, len_b - excess), low - (r + 1) // 2),
        )
    ones = tf.ones([batch, 1], tf.int32)
    a = tf.ragged.boolean_mask(ids_a, tf.ragged.range(len_a) < keep_a[:, None])
    parts = [ones * cls_id, a, ones * sep_id]
    types = [tf.zeros_like(ones), tf.zeros_like(a), tf.zeros_like(ones)]
    if ids_b is not None:
        b = tf.ragged.boolean_mask(ids_b, tf.ragged.range(len_b) < keep_b[:, None])
        parts += [b, ones * sep_id]
        types += [tf.ones_like(b), ones]
    word_ids = tf.concat(parts, axis=1)
    type_ids = tf.concat(types, axis=1)
    shape = [None, max_seq_length]
    return {
        "input_word_ids": word_ids.to_tensor(default_value=pad_id, shape=shape),
        "input_mask": tf.ones_like(word_ids).to_tensor(default_value=0, shape=shape),
        "input_type_ids": type_ids.to_tensor(default_value=0, shape=shape),
    }


@keras.saving.register_keras_serializable(package="keras_bert")
class BertPreprocessor(keras.layers.Layer):
    """Raw text -> BERT inputs, in graph (google-research/bert tokenization and packing).

    Args:
        vocab_file: path to a BERT `vocab.txt`, or None when `vocabulary` is given.
        do_lower_case: bool; True for uncased vocabularies.
        max_seq_length: int >= 3, tokens per row including [CLS]/[SEP] and padding.
        tokenizer: "core" (core TF ops, reference-exact, default) or "tf_text"
            (tensorflow-text FastBertTokenizer; see module docstring for its differences).
        vocabulary: optional list of tokens (id = index); wins over reading `vocab_file`.

    Call args:
        inputs: tf.string [B] (or a Python list of str, read as a batch); or a pair as a
            tuple/list of two tf.string [B] tensors, or a dict with keys "text" and optional
            "text_b".

    Returns:
        dict of int32 [B, max_seq_length]: `input_word_ids`, `input_mask` (1 = real token),
        `input_type_ids` (0 = segment A incl. [CLS] and its [SEP], 1 = segment B).

    Raises:
        ValueError: unknown `tokenizer`, `max_seq_length < 3`, no vocabulary, a vocabulary
            without [UNK]/[CLS]/[SEP]/[PAD], or inputs of another structure.
        FileNotFoundError: `vocab_file` given, `vocabulary` not, and the file is missing.
    """

    def __init__(
        self,
        vocab_file=None,
        do_lower_case: bool = True,
        max_seq_length: int = 128,
        tokenizer: str = "core",
        vocabulary=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {TOKENIZERS}, got {tokenizer!r}")
        if int(max_seq_length) < 3:
            raise ValueError(f"max_seq_length must be >= 3, got {max_seq_length}")
        if vocabulary is None:
            if vocab_file is None:
                raise ValueError("BertPreprocessor needs vocab_file or vocabulary")
            vocabulary = _vocab_list_from_file(vocab_file)
        self.vocab_file = None if vocab_file is None else os.fspath(vocab_file)
        self.vocabulary = [str(t) for t in vocabulary]
        self.do_lower_case = bool(do_lower_case)
        self.max_seq_length = int(max_seq_length)
        self.tokenizer = tokenizer
        index = {t: i for i, t in enumerate(self.vocabulary)}
        missing = [
            t for t in (ft.UNK_TOKEN, ft.CLS_TOKEN, ft.SEP_TOKEN, ft.PAD_TOKEN) if t not in index
        ]
        if missing:
            raise ValueError(f"vocabulary lacks special tokens {missing}")
        self.cls_id, self.sep_id = index[ft.CLS_TOKEN], index[ft.SEP_TOKEN]
        self.pad_id, self.unk_id = index[ft.PAD_TOKEN], index[ft.UNK_TOKEN]
        # Strings are not tensors Keras should convert or autocast.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.core_tokenizer = core_tokenizer.CoreBertTokenizer(
            self.vocabulary, do_lower_case=self.do_lower_case
        )
        self.fast_tokenizer = None
        if tokenizer == "tf_text":
            import tensorflow_text

            self.fast_tokenizer = tensorflow_text.FastBertTokenizer(
                self.vocabulary,
                token_out_type=tf.int64,
                unknown_token=ft.UNK_TOKEN,
                lower_case_nfd_strip_accents=self.do_lower_case,
                max_bytes_per_word=ft.MAX_INPUT_CHARS_PER_WORD,
            )
        self.built = True

    def tokenize(self, texts):
        """tf.string [B] -> int32 RaggedTensor [B, (pieces)] of WordPiece ids."""
        texts = tf.convert_to_tensor(texts, tf.string)
        if self.tokenizer == "core":
            return self.core_tokenizer.tokenize(texts)
        cleaned = self.core_tokenizer.clean_text(texts)
        return tf.cast(self.fast_tokenizer.tokenize(cleaned), tf.int32)

    def call(self, inputs):
        text_b = None
        if isinstance(inputs, dict):
            unknown = set(inputs) - {"text", "text_b"}
            if "text" not in inputs or unknown:
                raise ValueError(
                    f"dict inputs need key 'text' and optional 'text_b'; got keys {sorted(inputs)}"
                )
            text, text_b = inputs["text"], inputs.get("text_b")
        elif isinstance(inputs, (tuple, list)) and all(isinstance(t, (str, bytes)) for t in inputs):
            text = list(inputs)  # a Python batch of strings, never a pair
        elif isinstance(inputs, (tuple, list)):
            if len(inputs) not in (1, 2):
                raise ValueError(f"expected 1 or 2 text tensors, got {len(inputs)}")
            text = inputs[0]
            text_b = inputs[1] if len(inputs) == 2 else None
        else:
            text = inputs
        text = tf.convert_to_tensor(text)
        if text.dtype != tf.string:
            raise ValueError(f"text must be tf.string, got {text.dtype.name}")
        squeeze = text.shape.rank == 0
        if squeeze:
            text = text[None]
        ids_a = self.tokenize(text)
        ids_b = None
        if text_b is not None:
            text_b = tf.convert_to_tensor(text_b)
            if text_b.dtype != tf.string:
                raise ValueError(f"text_b must be tf.string, got {text_b.dtype.name}")
            if squeeze:
                text_b = text_b[None]
            ids_b = self.tokenize(text_b)
        out = pack_ragged(ids_a, ids_b, self.max_seq_length, self.cls_id, self.sep_id, self.pad_id)
        if squeeze:
            out = {k: v[0] for k, v in out.items()}
        return out

    def compute_output_spec(self, inputs):
        return {
            k: keras.KerasTensor([None, self.max_seq_length], dtype="int32") for k in INPUT_NAMES
        }

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_file": self.vocab_file,
                "do_lower_case": self.do_lower_case,
                "max_seq_length": self.max_seq_length,
                "tokenizer": self.tokenizer,
                "vocabulary": list(self.vocabulary),
            }
        )
        return config
