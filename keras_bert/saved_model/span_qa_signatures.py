"""Serving signatures of a `SpanQuestionAnswerer`: raw (question, context) in, answers out.

=================  ===================================  ========================================
signature key      inputs                               outputs
=================  ===================================  ========================================
serving_default    question, context: tf.string [B]     answer_text [B] string, start [B] int32,
                                                        end [B] int32, score [B] float32
encoded            input_word_ids, input_mask,          start_logits, end_logits [B, T] float32
                   input_type_ids: int32 [B, T]         (one window per row; padding -10000)
=================  ===================================  ========================================

`serving_default` does in the graph, with core TensorFlow ops only, what the Python path does
(`keras_bert.data.squad` + `keras_bert.evaluation.squad_postprocess`), with the task's settings:
1. tokenize the question (cut to max_query_length) and the context WITH character offsets
   (`tokenize_with_offsets`: the core tokenizer's normalization, each character carrying its
   code-point index; characters that vanish belong to the character before them);
2. cut each context into windows (`doc_windows`' rule), flag each piece's max-context window,
   pack `[CLS] question [SEP] window [SEP]`; all windows of the batch go through the encoder
   in one call ([W, T], T = the longest window);
3. best span: per window the n_best valid starts and ends, pairs with end >= start and at most
   max_answer_length pieces; the best pair over all windows of a question (ties: first window,
   start rank, end rank); v2.0: empty when null score - best > threshold; no valid pair: empty.
`start`/`end` are code-point offsets into the context (`answer_text == context[start:end]` in
Python); 0, 0 for an empty answer, whose score is the null score (min over windows of
start[CLS] + end[CLS]). Offsets count code points of valid UTF-8 input.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from keras_bert.saved_model import warmup
from keras_bert.saved_model.serving_module import INPUT_NAMES, ServingModule, id_specs
from keras_bert.tokenization import core_tokenizer as ct

QUESTION, CONTEXT = "question", "context"
WARMUP_PAIRS = (("who wrote it ?", "It was written by Ada Lovelace in 1843 ."),
                ("where is it ?", "Paris is the capital of France ."))


def _with_offsets(tok, texts):
    """Normalized characters with their origin [start, end) (code points within their text).

    Returns (cps int32 [N], rows int64 [N], props int32 [N], is_cjk bool [N], start, end int64
    [N]) after control deletion and (uncased) lower-casing/accent stripping, as
    `CoreBertTokenizer.normalize_and_split` computes them.
    """
    decoded = tf.strings.unicode_decode(texts, "UTF-8", errors="ignore")
    cps, rows = decoded.flat_values, decoded.value_rowids()
    n = tf.shape(cps, out_type=tf.int64)[0]
    flat = tf.range(n)
    row_start = tf.gather(decoded.row_starts(), rows)
    props = tok._props(cps)
    src = tf.bitwise.bitwise_and(props, 3)
    drop = tf.equal(src, ct.SRC_DROP)
    map_id = tf.bitwise.right_shift(props, ct._MAP_SHIFT)
    vanish = drop
    if tok.do_lower_case:
        vanish = drop | ((map_id > 0) & tf.equal(tf.gather(tok._map_lengths, map_id), 0))
    kept = tf.concat([tf.boolean_mask(flat, tf.logical_not(vanish)), [n]], 0)
    next_kept = tf.gather(kept, tf.searchsorted(kept[:-1], flat, side="right"))
    end = tf.minimum(next_kept, tf.gather(decoded.row_limits(), rows)) - row_start
    start = flat - row_start
    keep = tf.where(tf.logical_not(drop))[:, 0]
    cps, rows, props, src, start, end, map_id = [
        tf.gather(t, keep) for t in (cps, rows, props, src, start, end, map_id)]
    is_cjk = tf.equal(src, ct.SRC_CJK)
    if not tok.do_lower_case:
        return cps, rows, props, is_cjk, start, end
    is_sigma = tf.equal(cps, ct.CAPITAL_SIGMA)
    final = tf.cond(tf.reduce_any(is_sigma),
                    lambda: tok._final_sigma(is_sigma, props, src, rows),
                    lambda: tf.zeros_like(is_sigma))
    cps = tf.where(final, ct.FINAL_SIGMA, cps)
    map_id = tf.where(final, 0, map_id)
    n_map = tf.shape(tok._map_values, out_type=tf.int32)[0]
    is_id = tf.equal(map_id, 0)
    starts = tf.where(is_id, n_map + tf.range(tf.shape(cps)[0]), tf.gather(tok._map_starts, map_id))
    lens = tf.where(is_id, 1, tf.gather(tok._map_lengths, map_id))
    source = tf.ragged.range(starts, starts + lens)  # [N, (out chars)]
    of_out = source.value_rowids()
    cps = tf.gather(tf.concat([tok._map_values, cps], 0), source.flat_values)
    return (cps, tf.gather(rows, of_out), tok._props(cps), tf.gather(is_cjk, of_out),
            tf.gather(start, of_out), tf.gather(end, of_out))


def tokenize_with_offsets(tok, first_len, rest_len, texts):
    """Word pieces of `texts` with character offsets, in graph (== `ContextTokenizer`).

    Args:
        tok: the `CoreBertTokenizer`.
        first_len, rest_len: int32 [V]: code points a vocabulary token covers as a word's first
            piece / as a later piece (without "##").
        texts: tf.string [B].

    Returns:
        (ids, starts, ends): int32 RaggedTensors [B, (pieces)]; `texts[b][starts:ends]` (code
        points) is what a piece covers.
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    cps, rows, props, is_cjk, start, end = _with_offsets(tok, texts)
    out = tf.bitwise.bitwise_and(tf.bitwise.right_shift(props, 4), 3)
    sep = tf.equal(out, ct.OUT_SPACE)
    iso = tf.logical_or(tf.equal(out, ct.OUT_PUNCT), is_cjk)
    prev_brk = tf.concat([[True], tf.logical_or(sep, iso)[:-1]], 0)
    new_row = tf.concat([[True], tf.not_equal(rows[1:], rows[:-1])], 0)
    first = tf.logical_and(tf.logical_not(sep), prev_brk | new_row | iso)
    word_id = tf.cumsum(tf.cast(first, tf.int64)) - 1
    keep = tf.logical_not(sep)
    nwords = tf.reduce_sum(tf.cast(first, tf.int64))

    def words_of(values):
        return tf.RaggedTensor.from_value_rowids(tf.boolean_mask(values, keep),
                                                 tf.boolean_mask(word_id, keep), nrows=nwords,
                                                 validate=False)

    words, word_start, word_end = words_of(cps), words_of(start), words_of(end)
    pieces = tok.wordpiece(words)  # int32 [W, (pieces)]
    ids = pieces.flat_values
    piece_word = pieces.value_rowids()
    index_in_word = tf.range(tf.size(ids, out_type=tf.int64)) - tf.gather(pieces.row_starts(),
                                                                          piece_word)
    length = tf.where(tf.equal(ids, tok.unk_id),
                      tf.cast(tf.gather(words.row_lengths(), piece_word), tf.int32),
                      tf.where(index_in_word == 0, tf.gather(first_len, ids),
                               tf.gather(rest_len, ids)))
    before = tf.cumsum(length, exclusive=True)
    word_before = tf.gather(tf.concat([before, [tf.reduce_sum(length)]], 0), pieces.row_starts())
    at = before - tf.gather(word_before, piece_word)  # code points before the piece in its word
    char = tf.gather(words.row_starts(), piece_word) + tf.cast(at, tf.int64)
    starts = tf.gather(word_start.flat_values, char)
    ends = tf.gather(word_end.flat_values, char + tf.cast(length, tf.int64) - 1)
    word_rows = tf.boolean_mask(rows, first)
    batch = tf.shape(texts, out_type=tf.int64)[0]

    def regroup(values):
        nested = tf.RaggedTensor.from_value_rowids(pieces.with_flat_values(values), word_rows,
                                                   nrows=batch, validate=False)
        return nested.merge_dims(1, 2)

    return regroup(ids), regroup(tf.cast(starts, tf.int32)), regroup(tf.cast(ends, tf.int32))


def doc_windows(q_len, d_len, max_seq_length: int, doc_stride: int):
    """Windows of each context ([B] int32 lengths in pieces), as `keras_bert.data.squad`.

    Returns:
        dict: `question` int32 [W] (row of each window), `index` int32 [W] (window number in its
        question), `start`, `length` int32 [W] (pieces), and per question `max_tokens`,
        `stride`, `count` int32 [B].
    """
    max_tokens = max_seq_length - q_len - 3
    stride = tf.minimum(max_tokens, doc_stride)
    count = tf.where(d_len <= max_tokens, 1, 1 + (d_len - max_tokens + stride - 1) // stride)
    question = tf.repeat(tf.range(tf.size(count)), count)
    index = tf.ragged.range(count).flat_values
    start = index * tf.gather(stride, question)
    length = tf.minimum(tf.gather(max_tokens, question), tf.gather(d_len, question) - start)
    return {"question": question, "index": index, "start": start, "length": length,
            "max_tokens": max_tokens, "stride": stride, "count": count}


def max_context_flags(w: dict, d_len, positions, token_window):
    """bool [N]: whether each window token's window is its max-context window.

    Args:
        w: `doc_windows` output. d_len: int32 [B].
        positions: int32 [N] context piece index of each window token; token_window: int32 [N].
    """
    q = tf.gather(w["question"], token_window)  # [N]
    j = tf.range(tf.maximum(tf.reduce_max(w["count"]), 1))[tf.newaxis, :]  # [1, J]
    s = j * tf.gather(w["stride"], q)[:, tf.newaxis]  # [N, J]
    n = tf.minimum(tf.gather(w["max_tokens"], q)[:, tf.newaxis],
                   tf.gather(d_len, q)[:, tf.newaxis] - s)  # [N, J] window lengths
    p = positions[:, tf.newaxis]
    inside = (j < tf.gather(w["count"], q)[:, tf.newaxis]) & (s <= p) & (p < s + n)
    score = tf.where(inside, 100 * tf.minimum(p - s, s + n - 1 - p) + n, -1)  # [N, J]
    best = tf.reduce_min(tf.where(score == tf.reduce_max(score, 1, keepdims=True), j,
                                  tf.shape(j)[1]), axis=1)
    return tf.equal(best, tf.gather(w["index"], token_window))


class SpanQAServingModule(ServingModule):
    """The signatures above for a `SpanQuestionAnswerer` task."""

    def __init__(self, task, preprocessor):
        super().__init__(task, preprocessor)
        self.settings = task.squad_settings()
        self.max_seq_length = int(preprocessor.max_seq_length)
        vocabulary = preprocessor.vocabulary
        self._first_len = tf.constant([len(t) for t in vocabulary], tf.int32)
        self._rest_len = tf.constant([len(t) - 2 if t.startswith("##") and len(t) > 2
                                      else len(t) for t in vocabulary], tf.int32)

    def windows(self, question, context) -> tuple[dict, dict]:
        """(packed int32 model inputs [W, T], window metadata) for a batch of pairs."""
        p, s = self.preprocessor, self.settings
        tok = p.core_tokenizer
        q_ids = tok.tokenize(question)[:, :s["max_query_length"]]
        d_ids, d_start, d_end = tokenize_with_offsets(tok, self._first_len, self._rest_len, context)
        d_len = tf.cast(d_ids.row_lengths(), tf.int32)
        w = doc_windows(tf.cast(q_ids.row_lengths(), tf.int32), d_len, self.max_seq_length,
                        s["doc_stride"])
        pos = tf.ragged.range(w["start"], w["start"] + w["length"])  # [W, (n)] piece indices
        token_window = tf.cast(pos.value_rowids(), tf.int32)
        first_piece = tf.gather(tf.cast(d_ids.row_starts(), tf.int32), w["question"])  # [W]
        # [N] index of each window token into the flat context pieces of the batch
        flat = tf.gather(first_piece, token_window) + pos.flat_values
        query = tf.gather(q_ids, w["question"])  # [W, (q)]
        n = tf.size(w["question"])

        def pack(doc_values, query_part, first, middle, last):
            """[first] query [middle] doc-window [last], ragged [W, (t)]."""
            doc = pos.with_flat_values(doc_values)
            if not isinstance(query_part, tf.RaggedTensor):  # a fill value
                query_part = tf.ragged.map_flat_values(
                    lambda x: tf.fill(tf.shape(x), tf.cast(query_part, doc.dtype)), query)
            col = [tf.fill([n, 1], tf.cast(v, doc.dtype)) for v in (first, middle, last)]
            return tf.concat([col[0], query_part, col[1], doc, col[2]], axis=1)

        word_ids = pack(tf.gather(d_ids.flat_values, flat), query, p.cls_id, p.sep_id, p.sep_id)
        types = pack(tf.ones_like(flat), 0, 0, 0, 1)
        flags = max_context_flags(w, d_len, pos.flat_values, token_window)
        inputs = {"input_word_ids": word_ids.to_tensor(p.pad_id),
                  "input_mask": tf.ones_like(word_ids).to_tensor(0),
                  "input_type_ids": types.to_tensor(0)}
        meta = {"start": pack(tf.gather(d_start.flat_values, flat), -1, -1, -1, -1).to_tensor(-1),
                "end": pack(tf.gather(d_end.flat_values, flat), -1, -1, -1, -1).to_tensor(-1),
                "max_context": pack(flags, False, False, False, False).to_tensor(False),
                "question": w["question"]}
        return inputs, meta

    def best_answers(self, logits: dict, meta: dict, context):
        """Per question answer_text, start, end, score from the window logits [W, T]."""
        s = self.settings
        start_logits, end_logits = logits["start_logits"], logits["end_logits"]  # [W, T]
        is_doc = meta["start"] >= 0
        neg = tf.constant(-np.inf, tf.float32)
        k = tf.minimum(s["n_best_size"], tf.shape(start_logits)[1])
        sv, si = tf.math.top_k(tf.where(is_doc & meta["max_context"], start_logits, neg), k)
        ev, ei = tf.math.top_k(tf.where(is_doc, end_logits, neg), k)  # [W, k]
        pair = sv[:, :, None] + ev[:, None, :]  # [W, k, k], start rank major
        length = ei[:, None, :] - si[:, :, None]
        ok = ((sv[:, :, None] > neg) & (ev[:, None, :] > neg) & (length >= 0)
              & (length < s["max_answer_length"]))
        lowest = tf.constant(np.finfo(np.float32).min, tf.float32)  # segment max's empty value
        pair = tf.reshape(tf.where(ok, pair, lowest), [tf.shape(pair)[0], -1])  # [W, k*k]
        best_in_window = tf.argmax(pair, axis=1, output_type=tf.int32)
        window_best = tf.reduce_max(pair, axis=1)  # [W]
        batch = tf.shape(context)[0]
        question = meta["question"]
        best = tf.math.unsorted_segment_max(window_best, question, batch)  # [B]
        windows = tf.range(tf.size(question))
        chosen = tf.math.unsorted_segment_min(
            tf.where(window_best == tf.gather(best, question), windows, tf.size(question)),
            question, batch)  # first window holding the best pair
        chosen = tf.minimum(chosen, tf.maximum(tf.size(question) - 1, 0))
        flat = tf.gather(best_in_window, chosen)
        start_tok = tf.gather(tf.gather(si, chosen), flat // k, batch_dims=1)
        end_tok = tf.gather(tf.gather(ei, chosen), flat % k, batch_dims=1)
        cls = tf.reduce_sum(start_logits[:, :1] + end_logits[:, :1], axis=1)  # [W]; T may be 0
        null = tf.math.unsorted_segment_min(cls, question, batch)
        answered = tf.math.unsorted_segment_max(
            tf.cast(tf.reduce_any(ok, axis=[1, 2]), tf.int32), question, batch) > 0
        if s["version_2_with_negative"]:
            answered &= tf.logical_not(null - best > s["null_score_diff_threshold"])
        start = tf.where(answered, tf.gather(tf.gather(meta["start"], chosen), start_tok,
                                             batch_dims=1), 0)
        end = tf.where(answered, tf.gather(tf.gather(meta["end"], chosen), end_tok,
                                           batch_dims=1), 0)
        return {"answer_text": tf.strings.substr(context, start, end - start, unit="UTF8_CHAR"),
                "start": start, "end": end, "score": tf.where(answered, best, null)}

    @tf.function
    def serving_default(self, question, context):
        inputs, meta = self.windows(question, context)
        logits = self.task(inputs, training=False)
        logits = {k: tf.cast(v, tf.float32) for k, v in logits.items()}
        return self.best_answers(logits, meta, context)

    @tf.function
    def encoded(self, input_word_ids, input_mask, input_type_ids):
        out = self.task(self.checked_ids(input_word_ids, input_mask, input_type_ids),
                        training=False)
        return {k: tf.cast(v, tf.float32) for k, v in out.items()}

    def signatures(self) -> dict:
        """Signature key -> concrete function; `encoded` is also traced for int64 ids."""
        default = self.serving_default.get_concrete_function(
            tf.TensorSpec([None], tf.string, name=QUESTION),
            tf.TensorSpec([None], tf.string, name=CONTEXT))
        self.encoded.get_concrete_function(*id_specs(tf.int64))
        return {"serving_default": default,
                "encoded": self.encoded.get_concrete_function(*id_specs(tf.int32))}

    def signature_summary(self) -> dict:
        return {"serving_default": f"{QUESTION}, {CONTEXT}", "encoded": ", ".join(INPUT_NAMES)}

    def warmup_logs(self, model_name: str, texts) -> list:
        """Predict on serving_default (batch 1 and 2, own question/context pairs; `texts` are not
        questions) and on encoded (ids of the first windows)."""
        del texts
        questions = [q for q, _ in WARMUP_PAIRS]
        contexts = [c for _, c in WARMUP_PAIRS]
        logs = [warmup.predict_log(model_name, "serving_default",
                                   {QUESTION: questions[:n], CONTEXT: contexts[:n]})
                for n in (1, len(questions))]
        inputs, _ = self.windows(tf.constant(questions), tf.constant(contexts))
        logs.append(warmup.predict_log(model_name, "encoded", {
            name: np.asarray(inputs[name], np.int32) for name in INPUT_NAMES}))
        return logs
