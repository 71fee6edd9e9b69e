"""In-graph BERT tokenizer built from core TensorFlow ops only (no tensorflow-text).

`CoreBertTokenizer` reproduces `full_tokenizer.FullTokenizer` (google-research/bert rules)
exactly, inside a graph, so a SavedModel that uses it loads with plain
`tf.saved_model.load` in a process that never imports tensorflow_text.

The Unicode facts core TF lacks are computed once, at construction, from Python's
`unicodedata` (Unicode version `unicodedata.unidata_version`) and stored in the graph as
constants, so results never depend on the serving machine:

* a two-level table (256-code-point blocks, identical blocks shared) giving each code point
  a packed int32 property word (see `_PROP_*` below): its class in the raw text (deleted
  control/format character, whitespace, CJK ideograph, other), its class for the final-sigma
  rule (cased, case-ignorable, other), its class as an output of normalisation (punctuation,
  whitespace, other) and, when uncased, the id of its replacement sequence;
* a ragged table of replacement sequences: for uncased vocabularies each code point `c` maps
  to `strip_Mn(NFD(c.lower()))`, computed per code point. Two facts make this exact:
  `str.lower()` is per code point except for the final-sigma rule (U+03A3 becomes U+03C2 at
  the end of a word), which is applied in the graph from the cased/case-ignorable classes
  exactly as CPython does; and NFD of a string equals the per-code-point NFD except for
  canonical reordering of combining characters, which, once Mn marks are dropped, can only
  swap the 25 spacing combining marks (Mc with non-zero combining class, e.g. U+302E,
  U+1D165). No token of the BERT vocabularies contains one, so a word holding one is [UNK]
  in either order (`CoreBertTokenizer` warns if a vocabulary does contain one).

Invalid UTF-8: `tf.strings.unicode_decode(errors="ignore")` drops invalid bytes, the same
rule as the reference's `bytes.decode("utf-8", "ignore")`.

WordPiece: words found whole in the vocabulary are looked up once (most words); the rest run
a `tf.while_loop` that, at each step and for all such words at once, looks up the prefixes of
1..K code points of the remainder (K = longest vocabulary piece) and takes the longest hit.
"""

from __future__ import annotations

import functools
import logging
import unicodedata

import numpy as np
import tensorflow as tf

from keras_bert.tokenization import full_tokenizer as ft

MAX_CODE_POINT = 0x10FFFF
_BLOCK_BITS = 8
_BLOCK = 1 << _BLOCK_BITS

# Packed property word, per code point.
# bits 0-1: class in the raw text.
SRC_OTHER, SRC_DROP, SRC_SPACE, SRC_CJK = 0, 1, 2, 3
# bits 2-3: class for the final-sigma context (CPython's _PyUnicode_IsCased / IsCaseIgnorable).
SIG_OTHER, SIG_CASED, SIG_IGNORABLE = 0, 1, 2
# bits 4-5: class as an output character of normalisation.
OUT_OTHER, OUT_PUNCT, OUT_SPACE = 0, 1, 2
# bits 6-31: replacement-sequence id (0 = the code point itself).
_MAP_SHIFT = 6

CAPITAL_SIGMA = 0x03A3
FINAL_SIGMA = 0x03C2


@functools.lru_cache(maxsize=None)
def _reorderable_marks() -> frozenset:
    """Non-Mn characters with a non-zero canonical combining class (NFD may reorder them)."""
    out = set()
    for cp in range(MAX_CODE_POINT + 1):
        c = chr(cp)
        if unicodedata.combining(c) and unicodedata.category(c) != "Mn":
            out.add(cp)
    return frozenset(out)


@functools.lru_cache(maxsize=None)
def unicode_tables(do_lower_case: bool):
    """Builds the property tables from `unicodedata` (about 2 s; cached per process).

    Returns:
        (block_index int32 [0x110000 >> 8], block_values int32 [num_blocks * 256],
         map_values int32 [M], map_starts int32 [num_maps + 1], map_lengths int32 [num_maps + 1])
        where map id 0 is unused (identity).
    """
    props = np.zeros(MAX_CODE_POINT + 1, dtype=np.int64)
    map_values: list[int] = []
    map_starts = [0]
    map_lengths = [0]
    for cp in range(MAX_CODE_POINT + 1):
        if 0xD800 <= cp <= 0xDFFF:  # surrogates never come out of UTF-8 decoding
            continue
        c = chr(cp)
        cat = unicodedata.category(c)
        if cat == "Cn":  # unassigned: kept as an ordinary letter-like character
            continue
        if cp == 0 or cp == 0xFFFD or ft.is_control(c):
            src = SRC_DROP
        elif ft.is_whitespace(c) or c.isspace():
            # _clean_text turns _is_whitespace into " "; whitespace_tokenize's str.split()
            # also splits on the other Python whitespace that survives cleaning (U+2028/9).
            src = SRC_SPACE
        elif ft.is_cjk_ideograph(cp):
            src = SRC_CJK
        else:
            src = SRC_OTHER
        if ft.is_punctuation(c):
            out = OUT_PUNCT
        elif c.isspace():
            out = OUT_SPACE
        else:
            out = OUT_OTHER
        sig = SIG_OTHER
        map_id = 0
        if do_lower_case and src in (SRC_OTHER,):
            # Probe CPython's final-sigma context classes.
            if (c + "\u03a3").lower()[-1] == "\u03c2":
                sig = SIG_CASED
            elif ("A" + c + "\u03a3").lower()[-1] == "\u03c2":
                sig = SIG_IGNORABLE
            mapped = ft.strip_accents(c.lower())
            if mapped != c:
                map_id = len(map_starts)
                map_starts.append(len(map_values))
                map_lengths.append(len(mapped))
                map_values.extend(ord(m) for m in mapped)
        elif do_lower_case and src == SRC_CJK:
            mapped = ft.strip_accents(c.lower())
            if mapped != c:  # CJK compatibility ideographs -> unified ideographs
                map_id = len(map_starts)
                map_starts.append(len(map_values))
                map_lengths.append(len(mapped))
                map_values.extend(ord(m) for m in mapped)
        props[cp] = src | (sig << 2) | (out << 4) | (map_id << _MAP_SHIFT)
    # Unassigned code points: class other (0) everywhere, identity mapping; str.split() and
    # the predicates agree (category Cn is neither control, whitespace nor punctuation).
    blocks = props.reshape(-1, _BLOCK)
    unique, inverse = np.unique(blocks, axis=0, return_inverse=True)
    return (
        inverse.reshape(-1).astype(np.int32),
        unique.reshape(-1).astype(np.int32),
        np.asarray(map_values or [0], dtype=np.int32),
        np.asarray(map_starts, np.int32),
        np.asarray(map_lengths, np.int32),
    )


class CoreBertTokenizer(tf.Module):
    """BERT tokenizer from core TF ops; the same ids as `FullTokenizer`, in graph.

    Args:
        vocab: a vocab file path, or a list of tokens (id = index), or a dict token -> id.
        do_lower_case: bool. True for uncased vocabularies.
        max_input_chars_per_word: a word of more code points is [UNK] (reference: 200).

    Call `tokenize(texts)`: tf.string [B] -> int32 RaggedTensor [B, (pieces)] of ids
    (no [CLS]/[SEP]); `tokenize_with_offsets(texts)` adds each piece's character offsets.
    Both work eagerly, in `tf.function` (any batch size, [None] signatures) and in
    `tf.data.Dataset.map`.

    Raises:
        ValueError: if the vocabulary lacks [UNK].
    """

    def __init__(
        self,
        vocab,
        do_lower_case: bool = True,
        max_input_chars_per_word: int = ft.MAX_INPUT_CHARS_PER_WORD,
        name=None,
    ):
        super().__init__(name=name)
        if isinstance(vocab, dict):
            token_to_id = dict(vocab)
        elif isinstance(vocab, (list, tuple)):
            token_to_id = {}
            for i, t in enumerate(vocab):
                token_to_id[t] = i  # later duplicates win, as in the reference load_vocab
        else:
            token_to_id = dict(ft.load_vocab(vocab))
        if ft.UNK_TOKEN not in token_to_id:
            raise ValueError("vocabulary lacks the [UNK] token")
        self.do_lower_case = bool(do_lower_case)
        self.unk_id = int(token_to_id[ft.UNK_TOKEN])
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        lengths = [len(t[2:]) if t.startswith("##") else len(t) for t in token_to_id]
        self.max_piece_chars = max(1, max(lengths))
        reorderable = _reorderable_marks() if self.do_lower_case else frozenset()
        if any(ord(ch) in reorderable for t in token_to_id for ch in t):
            logging.warning(
                "vocabulary holds a spacing combining mark that NFD may reorder; "
                "CoreBertTokenizer may differ from the reference on such words"
            )
        block_index, block_values, map_values, map_starts, map_lengths = unicode_tables(
            self.do_lower_case
        )
        self._block_index = tf.constant(block_index)
        self._block_values = tf.constant(block_values)
        self._map_values = tf.constant(map_values)
        self._map_starts = tf.constant(map_starts)
        self._map_lengths = tf.constant(map_lengths)
        # Code points a token covers as a word's first piece / as a later piece ("##" dropped),
        # indexed by id (`tokenize_with_offsets`).
        first_len = np.zeros(max(token_to_id.values()) + 1, np.int32)
        rest_len = np.zeros_like(first_len)
        for t, i in token_to_id.items():
            first_len[i] = len(t)
            rest_len[i] = len(t) - 2 if t.startswith("##") and len(t) > 2 else len(t)
        self._first_len = tf.constant(first_len)
        self._rest_len = tf.constant(rest_len)
        keys = list(token_to_id.keys())
        values = [int(token_to_id[k]) for k in keys]
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys, tf.string), tf.constant(values, tf.int64)
            ),
            default_value=-1,
        )

    # ----------------------------------------------------------------------------------
    def _props(self, cps):
        """int32 [N] code points -> int32 [N] packed property words."""
        cps = tf.clip_by_value(cps, 0, MAX_CODE_POINT)
        block = tf.gather(self._block_index, tf.bitwise.right_shift(cps, _BLOCK_BITS))
        return tf.gather(
            self._block_values, block * _BLOCK + tf.bitwise.bitwise_and(cps, _BLOCK - 1)
        )

    def normalize_and_split(self, texts):
        """tf.string [B] -> (words int32 RaggedTensor [W, (chars)], word_rows int64 [W], B int64).

        Words are the BasicTokenizer output (after cleaning, CJK split, optional
        lower-casing + accent stripping and punctuation split), as code points; `word_rows`
        is the text each word comes from.
        """
        texts = tf.convert_to_tensor(texts, tf.string)
        cps, rows, props, is_cjk = self._normalize(texts)
        word_rows, (words,) = self._split_words(rows, props, is_cjk, (cps,))
        return words, word_rows, tf.shape(texts, out_type=tf.int64)[0]

    def _normalize(self, texts, with_offsets: bool = False):
        """tf.string [B] -> the normalized characters of the batch, flat.

        Returns:
            (cps int32 [N], rows int64 [N] (text of each), props int32 [N] (of the normalized
            character), is_cjk bool [N] (of the character it came from)); with_offsets adds
            (start, end) int64 [N]: the code points [start, end) of its text each character
            came from, vanished characters (deleted, or stripped to nothing) counted with the
            character before them.
        """
        decoded = tf.strings.unicode_decode(texts, "UTF-8", errors="ignore")
        cps, rows = decoded.flat_values, decoded.value_rowids()
        props = self._props(cps)
        src = tf.bitwise.bitwise_and(props, 3)
        drop = tf.equal(src, SRC_DROP)
        origin = self._origins(decoded, props, drop) if with_offsets else ()

        def filtered():  # delete control/format characters (rare: skipped when none)
            idx = tf.where(tf.logical_not(drop))[:, 0]
            return tuple(tf.gather(t, idx) for t in (cps, rows, props, src) + origin)

        cps, rows, props, src, *origin = tf.cond(
            tf.reduce_any(drop), filtered, lambda: (cps, rows, props, src) + origin
        )
        is_cjk = tf.equal(src, SRC_CJK)
        if not self.do_lower_case:
            return (cps, rows, props, is_cjk, *origin)
        map_id = tf.bitwise.right_shift(props, _MAP_SHIFT)
        is_sigma = tf.equal(cps, CAPITAL_SIGMA)
        final = tf.cond(
            tf.reduce_any(is_sigma),
            lambda: self._final_sigma(is_sigma, props, src, rows),
            lambda: tf.zeros_like(is_sigma),
        )
        cps = tf.where(final, FINAL_SIGMA, cps)
        map_id = tf.where(final, 0, map_id)
        # Replacement sequences: identity chars read themselves from an appended copy.
        n_map = tf.shape(self._map_values, out_type=tf.int32)[0]
        n = tf.shape(cps, out_type=tf.int32)[0]
        is_id = tf.equal(map_id, 0)
        starts = tf.where(is_id, n_map + tf.range(n), tf.gather(self._map_starts, map_id))
        lens = tf.where(is_id, 1, tf.gather(self._map_lengths, map_id))
        table = tf.concat([self._map_values, cps], 0)
        carried = (rows, is_cjk, *origin)  # follow each output character's source

        def one_to_one():  # the usual case: every character maps to exactly one
            return (tf.gather(table, starts),) + carried

        def general():  # some map to none (Mn marks) or to several (ligatures, İ)
            idx = tf.ragged.range(starts, starts + lens)
            src_of_out = idx.value_rowids()
            return (tf.gather(table, idx.flat_values),) + tuple(
                tf.gather(t, src_of_out) for t in carried
            )

        cps, rows, is_cjk, *origin = tf.cond(tf.reduce_all(tf.equal(lens, 1)), one_to_one, general)
        return (cps, rows, self._props(cps), is_cjk, *origin)

    def _origins(self, decoded, props, drop):
        """(start, end) int64 [N] in its text of each decoded character, extended over the
        vanishing characters after it (see `_normalize`)."""
        rows = decoded.value_rowids()
        flat = tf.range(tf.shape(rows, out_type=tf.int64)[0])
        row_start = tf.gather(decoded.row_starts(), rows)
        vanish = drop
        if self.do_lower_case:
            map_id = tf.bitwise.right_shift(props, _MAP_SHIFT)
            vanish |= (map_id > 0) & tf.equal(tf.gather(self._map_lengths, map_id), 0)
        kept = tf.concat(
            [tf.boolean_mask(flat, tf.logical_not(vanish)), tf.shape(flat, out_type=tf.int64)], 0
        )
        next_kept = tf.gather(kept, tf.searchsorted(kept[:-1], flat, side="right"))
        end = tf.minimum(next_kept, tf.gather(decoded.row_limits(), rows)) - row_start
        return flat - row_start, end

    @staticmethod
    def _split_words(rows, props, is_cjk, values):
        """Splits normalized characters into words: at whitespace (dropped), and around each
        punctuation character and CJK ideograph (own words).

        Returns:
            (word_rows int64 [W], tuple of RaggedTensors [W, (chars)], one per `values` [N]).
        """
        out = tf.bitwise.bitwise_and(tf.bitwise.right_shift(props, 4), 3)
        sep = tf.equal(out, OUT_SPACE)
        iso = tf.logical_or(tf.equal(out, OUT_PUNCT), is_cjk)
        prev_brk = tf.concat([[True], tf.logical_or(sep, iso)[:-1]], 0)
        new_row = tf.concat([[True], tf.not_equal(rows[1:], rows[:-1])], 0)
        start = tf.logical_and(
            tf.logical_not(sep), tf.logical_or(tf.logical_or(prev_brk, new_row), iso)
        )
        word_id = tf.cumsum(tf.cast(start, tf.int64)) - 1
        keep = tf.logical_not(sep)
        nwords = tf.reduce_sum(tf.cast(start, tf.int64))
        words = tuple(
            tf.RaggedTensor.from_value_rowids(
                tf.boolean_mask(v, keep),
                tf.boolean_mask(word_id, keep),
                nrows=nwords,
                validate=False,
            )
            for v in values
        )
        return tf.boolean_mask(rows, start), words

    def _final_sigma(self, is_sigma, props, src, rows):
        """bool [N]: which U+03A3 lower-case to final sigma (CPython handle_capital_sigma).

        Context: the whitespace/CJK-delimited word of the cleaned text; skip
        case-ignorable characters on each side; final iff a cased character precedes and
        no cased character follows.
        """
        sig = tf.bitwise.bitwise_and(tf.bitwise.right_shift(props, 2), 3)
        boundary = tf.logical_or(tf.equal(src, SRC_SPACE), tf.equal(src, SRC_CJK))
        stopper = tf.logical_or(tf.not_equal(sig, SIG_IGNORABLE), boundary)
        cased = tf.logical_and(tf.equal(sig, SIG_CASED), tf.logical_not(boundary))
        n = tf.shape(props, out_type=tf.int64)[0]
        pos = tf.range(n)
        stop_pos = tf.boolean_mask(pos, stopper)
        stop_cased = tf.boolean_mask(cased, stopper)
        stop_rows = tf.boolean_mask(rows, stopper)
        m = tf.shape(stop_pos, out_type=tf.int64)[0]
        # Previous stopper strictly before each position.
        prev = tf.searchsorted(stop_pos, pos, side="left", out_type=tf.int64) - 1
        prev_c = tf.clip_by_value(prev, 0, tf.maximum(m - 1, 0))
        before_cased = tf.logical_and(
            prev >= 0,
            tf.logical_and(
                tf.gather(stop_cased, prev_c), tf.equal(tf.gather(stop_rows, prev_c), rows)
            ),
        )
        # Next stopper strictly after each position.
        nxt = tf.searchsorted(stop_pos, pos, side="right", out_type=tf.int64)
        nxt_c = tf.clip_by_value(nxt, 0, tf.maximum(m - 1, 0))
        after_cased = tf.logical_and(
            nxt < m,
            tf.logical_and(
                tf.gather(stop_cased, nxt_c), tf.equal(tf.gather(stop_rows, nxt_c), rows)
            ),
        )
        return tf.logical_and(is_sigma, tf.logical_and(before_cased, tf.logical_not(after_cased)))

    def wordpiece(self, words):
        """int32 RaggedTensor [W, (chars)] -> int32 RaggedTensor [W, (pieces)] of ids."""
        num_words = words.nrows(out_type=tf.int64)
        lens = tf.cast(words.row_lengths(), tf.int32)
        strings = tf.strings.unicode_encode(words, "UTF-8")
        whole = self._table.lookup(strings)
        too_long = lens > self.max_input_chars_per_word
        found = tf.logical_and(whole >= 0, tf.logical_not(too_long))
        single = tf.where(found, whole, self.unk_id)
        slow = tf.logical_and(tf.logical_not(found), tf.logical_not(too_long))
        slow_idx = tf.where(slow)[:, 0]
        slow_strings = tf.gather(strings, slow_idx)
        slow_lens = tf.gather(lens, slow_idx)
        # Most batches of real text hold few such words; skip the loop when there are none.
        slow_pieces = tf.cond(
            tf.size(slow_idx) > 0,
            lambda: self._greedy(slow_strings, slow_lens),
            lambda: tf.RaggedTensor.from_row_lengths(
                tf.zeros([0], tf.int64), tf.zeros([0], tf.int64), validate=False
            ),
        )
        single_rt = tf.RaggedTensor.from_uniform_row_length(single, 1, validate=False)
        combined = tf.concat([single_rt, slow_pieces], axis=0)
        slow_pos = tf.cumsum(tf.cast(slow, tf.int64)) - 1
        select = tf.where(slow, num_words + slow_pos, tf.range(num_words))
        return tf.cast(tf.gather(combined, select), tf.int32)

    def _greedy(self, strings, lens):
        """Greedy longest-match-first over words not in the vocab whole.

        strings: tf.string [S] (UTF-8), lens: int32 [S] code points.
        Returns int64 RaggedTensor [S, (pieces)]; a word with an unmatched remainder is [UNK].
        """
        # K = candidate prefix lengths: the longest vocabulary piece, or the longest word.
        k = tf.minimum(self.max_piece_chars, tf.reduce_max(lens))
        cand = tf.range(1, k + 1, dtype=tf.int32)  # [K]
        s = tf.shape(strings)[0]
        tiled = tf.tile(strings[:, None], [1, k])  # [S, K]

        def cond(t, pos, bad, ta):
            return tf.reduce_any(tf.logical_and(pos < lens, tf.logical_not(bad)))

        def body(t, pos, bad, ta):
            active = tf.logical_and(pos < lens, tf.logical_not(bad))  # [S]
            rem = lens - pos
            sub = tf.strings.substr(
                tiled,
                tf.tile(pos[:, None], [1, k]),
                tf.tile(cand[None, :], [s, 1]),
                unit="UTF8_CHAR",
            )
            prefix = tf.where(pos > 0, "##", "")
            sub = tf.strings.join([tf.tile(prefix[:, None], [1, k]), sub])
            ids = self._table.lookup(sub)  # [S, K]
            valid = tf.logical_and(ids >= 0, cand[None, :] <= rem[:, None])
            best = tf.reduce_max(tf.where(valid, cand[None, :], 0), axis=1)  # [S]
            best_id = tf.gather(ids, tf.maximum(best - 1, 0), batch_dims=1)
            new_bad = tf.logical_and(active, best == 0)
            emit = tf.logical_and(active, best > 0)
            ta = ta.write(t, tf.where(emit, best_id, -1))
            pos = tf.where(emit, pos + best, pos)
            return t + 1, pos, tf.logical_or(bad, new_bad), ta

        ta = tf.TensorArray(tf.int64, size=0, dynamic_size=True, element_shape=[None])
        _, _, bad, ta = tf.while_loop(
            cond,
            body,
            (tf.constant(0), tf.zeros_like(lens), tf.zeros([s], tf.bool), ta),
            maximum_iterations=self.max_input_chars_per_word,
        )
        steps = ta.size()
        mat = tf.cond(
            steps > 0, lambda: tf.transpose(ta.stack()), lambda: tf.zeros([s, 0], tf.int64)
        )  # [S, T]
        mat = tf.where(bad[:, None], tf.constant(-1, tf.int64), mat)
        # A bad word becomes one [UNK]: put it in column 0.
        first = tf.concat([tf.where(bad, tf.constant(self.unk_id, tf.int64), -1)[:, None], mat], 1)
        return tf.ragged.boolean_mask(first, first >= 0)

    def tokenize(self, texts):
        """tf.string [B] -> int32 RaggedTensor [B, (pieces)] of WordPiece ids."""
        words, word_rows, batch = self.normalize_and_split(texts)
        pieces = self.wordpiece(words)  # [W, (p)]
        nested = tf.RaggedTensor.from_value_rowids(pieces, word_rows, nrows=batch, validate=False)
        return nested.merge_dims(1, 2)

    def tokenize_with_offsets(self, texts):
        """`tokenize` plus the characters each piece covers; in-graph twin of
        `FullTokenizer.tokenize_with_offsets` (same pieces, same offsets).

        Args:
            texts: tf.string [B] (valid UTF-8 for the offsets to count code points).

        Returns:
            (ids, starts, ends): int32 RaggedTensors [B, (pieces)]; piece k of text b covers code
            points `[starts[b][k], ends[b][k])` of `texts[b]` (an [UNK] word: the whole word;
            vanished characters count with the character before them).
        """
        texts = tf.convert_to_tensor(texts, tf.string)
        cps, rows, props, is_cjk, start, end = self._normalize(texts, with_offsets=True)
        word_rows, (words, word_start, word_end) = self._split_words(
            rows, props, is_cjk, (cps, start, end)
        )
        pieces = self.wordpiece(words)  # int32 [W, (pieces)]
        ids = pieces.flat_values
        piece_word = pieces.value_rowids()
        index_in_word = tf.range(tf.size(ids, out_type=tf.int64)) - tf.gather(
            pieces.row_starts(), piece_word
        )
        # code points each piece covers: the whole word for [UNK], else its token's length
        length = tf.where(
            tf.equal(ids, self.unk_id),
            tf.cast(tf.gather(words.row_lengths(), piece_word), tf.int32),
            tf.where(
                index_in_word == 0, tf.gather(self._first_len, ids), tf.gather(self._rest_len, ids)
            ),
        )
        before = tf.cumsum(length, exclusive=True)
        word_before = tf.gather(
            tf.concat([before, [tf.reduce_sum(length)]], 0), pieces.row_starts()
        )
        at = before - tf.gather(word_before, piece_word)  # code points before it in its word
        char = tf.gather(words.row_starts(), piece_word) + tf.cast(at, tf.int64)
        starts = tf.gather(word_start.flat_values, char)
        ends = tf.gather(word_end.flat_values, char + tf.cast(length, tf.int64) - 1)
        batch = tf.shape(texts, out_type=tf.int64)[0]

        def regroup(values):  # [pieces of all words] -> [B, (pieces)]
            nested = tf.RaggedTensor.from_value_rowids(
                pieces.with_flat_values(values), word_rows, nrows=batch, validate=False
            )
            return nested.merge_dims(1, 2)

        return regroup(ids), regroup(tf.cast(starts, tf.int32)), regroup(tf.cast(ends, tf.int32))

    def clean_text(self, texts):
        """tf.string [B] -> tf.string [B]: reference `_clean_text` (controls deleted,
        whitespace -> " "). Used before tensorflow-text's tokenizers."""
        texts = tf.convert_to_tensor(texts, tf.string)
        cps = tf.strings.unicode_decode(texts, "UTF-8", errors="ignore")
        src = tf.ragged.map_flat_values(lambda c: tf.bitwise.bitwise_and(self._props(c), 3), cps)
        cps = tf.ragged.boolean_mask(cps, tf.not_equal(src, SRC_DROP))
        src = tf.ragged.boolean_mask(src, tf.not_equal(src, SRC_DROP))
        cps = tf.ragged.map_flat_values(
            lambda c, s: tf.where(tf.equal(s, SRC_SPACE), 32, c), cps, src
        )
        return tf.strings.unicode_encode(cps, "UTF-8")
