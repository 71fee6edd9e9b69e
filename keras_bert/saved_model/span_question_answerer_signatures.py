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
(`keras_bert.data.squad` + `keras_bert.data.squad_answers`), with the task's settings:
1. tokenize the question (cut to max_query_length) and the context WITH character offsets
   (`CoreBertTokenizer.tokenize_with_offsets`, the twin of the Python path's
   `FullTokenizer.tokenize_with_offsets`);
2. cut each context into windows and flag each piece's max-context window (the rules of
   `keras_bert.data.windows`, shared with NER: `graph_window_spans`, `graph_max_context`),
   pack `[CLS] question [SEP] window [SEP]`; all windows of the batch go through the encoder
   in one call ([W, T], T = the longest window);
3. best span: per window the n_best valid starts and ends, pairs with end >= start and at most
   max_answer_length pieces; the best pair over all windows of a question (ties: first window,
   start rank, end rank); v2.0: empty when null score - best > threshold (float32, as
   `squad_answers.predicts_null`); no valid pair: empty.
`start`/`end` are code-point offsets into the context (`answer_text == context[start:end]` in
Python); 0, 0 for an empty answer, whose score is the null score (min over windows of
start[CLS] + end[CLS]). Offsets count code points of valid UTF-8 input.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from keras_bert.data import windows as windows_lib
from keras_bert.saved_model import warmup
from keras_bert.saved_model.serving_module import INPUT_NAMES, ServingModule, id_specs

QUESTION, CONTEXT = "question", "context"
WARMUP_PAIRS = (
    ("who wrote it ?", "It was written by Ada Lovelace in 1843 ."),
    ("where is it ?", "Paris is the capital of France ."),
)


class SpanQuestionAnswererServingModule(ServingModule):
    """The signatures above for a `SpanQuestionAnswerer` task."""

    def __init__(self, task, preprocessor):
        super().__init__(task, preprocessor)
        self.settings = task.squad_settings()
        self.max_seq_length = int(preprocessor.max_seq_length)

    def windows(self, question, context) -> tuple[dict, dict]:
        """(packed int32 model inputs [W, T], window metadata) for a batch of pairs."""
        p, s = self.preprocessor, self.settings
        tok = p.core_tokenizer
        q_ids = tok.tokenize(question)[:, : s["max_query_length"]]
        d_ids, d_start, d_end = tok.tokenize_with_offsets(context)
        d_len = tf.cast(d_ids.row_lengths(), tf.int32)
        w = windows_lib.graph_window_spans(
            d_len, self.max_seq_length - tf.cast(q_ids.row_lengths(), tf.int32) - 3, s["doc_stride"]
        )
        first_piece = tf.gather(tf.cast(d_ids.row_starts(), tf.int32), w["sequence"])  # [W]
        # [W, (n)] index of each window token into the flat context pieces of the batch
        pieces, flags = windows_lib.graph_max_context(
            first_piece + w["start"], w["length"], tf.size(d_ids.flat_values)
        )
        query = tf.gather(q_ids, w["sequence"])  # [W, (q)]
        n = tf.size(w["sequence"])

        def pack(doc_values, query_part, first, middle, last):
            """[first] query [middle] doc-window [last], ragged [W, (t)]."""
            doc = pieces.with_flat_values(doc_values)
            if not isinstance(query_part, tf.RaggedTensor):  # a fill value
                query_part = tf.ragged.map_flat_values(
                    lambda x: tf.fill(tf.shape(x), tf.cast(query_part, doc.dtype)), query
                )
            col = [tf.fill([n, 1], tf.cast(v, doc.dtype)) for v in (first, middle, last)]
            return tf.concat([col[0], query_part, col[1], doc, col[2]], axis=1)

        flat = pieces.flat_values
        word_ids = pack(tf.gather(d_ids.flat_values, flat), query, p.cls_id, p.sep_id, p.sep_id)
        types = pack(tf.ones_like(flat, tf.int32), 0, 0, 0, 1)
        inputs = {
            "input_word_ids": word_ids.to_tensor(p.pad_id),
            "input_mask": tf.ones_like(word_ids).to_tensor(0),
            "input_type_ids": types.to_tensor(0),
        }
        meta = {
            "start": pack(tf.gather(d_start.flat_values, flat), -1, -1, -1, -1).to_tensor(-1),
            "end": pack(tf.gather(d_end.flat_values, flat), -1, -1, -1, -1).to_tensor(-1),
            "max_context": pack(flags.flat_values, False, False, False, False).to_tensor(False),
            "question": w["sequence"],
        }
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
        ok = (
            (sv[:, :, None] > neg)
            & (ev[:, None, :] > neg)
            & (length >= 0)
            & (length < s["max_answer_length"])
        )
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
            question,
            batch,
        )  # first window holding the best pair
        chosen = tf.minimum(chosen, tf.maximum(tf.size(question) - 1, 0))
        flat = tf.gather(best_in_window, chosen)
        start_tok = tf.gather(tf.gather(si, chosen), flat // k, batch_dims=1)
        end_tok = tf.gather(tf.gather(ei, chosen), flat % k, batch_dims=1)
        cls = tf.reduce_sum(start_logits[:, :1] + end_logits[:, :1], axis=1)  # [W]; T may be 0
        null = tf.math.unsorted_segment_min(cls, question, batch)
        answered = (
            tf.math.unsorted_segment_max(
                tf.cast(tf.reduce_any(ok, axis=[1, 2]), tf.int32), question, batch
            )
            > 0
        )
        if s["version_2_with_negative"]:  # squad_answers.predicts_null: float32 on both sides
            threshold = tf.constant(s["null_score_diff_threshold"], tf.float32)
            answered &= tf.logical_not(null - best > threshold)
        start = tf.where(
            answered, tf.gather(tf.gather(meta["start"], chosen), start_tok, batch_dims=1), 0
        )
        end = tf.where(
            answered, tf.gather(tf.gather(meta["end"], chosen), end_tok, batch_dims=1), 0
        )
        return {
            "answer_text": tf.strings.substr(context, start, end - start, unit="UTF8_CHAR"),
            "start": start,
            "end": end,
            "score": tf.where(answered, best, null),
        }

    @tf.function
    def serving_default(self, question, context):
        inputs, meta = self.windows(question, context)
        logits = self.task(inputs, training=False)
        logits = {k: tf.cast(v, tf.float32) for k, v in logits.items()}
        return self.best_answers(logits, meta, context)

    @tf.function
    def encoded(self, input_word_ids, input_mask, input_type_ids):
        out = self.task(
            self.checked_ids(input_word_ids, input_mask, input_type_ids), training=False
        )
        return {k: tf.cast(v, tf.float32) for k, v in out.items()}

    def signatures(self) -> dict:
        """Signature key -> concrete function; `encoded` is also traced for int64 ids."""
        default = self.serving_default.get_concrete_function(
            tf.TensorSpec([None], tf.string, name=QUESTION),
            tf.TensorSpec([None], tf.string, name=CONTEXT),
        )
        self.encoded.get_concrete_function(*id_specs(tf.int64))
        return {
            "serving_default": default,
            "encoded": self.encoded.get_concrete_function(*id_specs(tf.int32)),
        }

    def signature_summary(self) -> dict:
        return {"serving_default": f"{QUESTION}, {CONTEXT}", "encoded": ", ".join(INPUT_NAMES)}

    def warmup_logs(self, model_name: str, texts) -> list:
        """Predict on serving_default (batch 1 and 2, own question/context pairs; `texts` are not
        questions) and on encoded (ids of the first windows)."""
        del texts
        questions = [q for q, _ in WARMUP_PAIRS]
        contexts = [c for _, c in WARMUP_PAIRS]
        logs = [
            warmup.predict_log(
                model_name, "serving_default", {QUESTION: questions[:n], CONTEXT: contexts[:n]}
            )
            for n in (1, len(questions))
        ]
        inputs, _ = self.windows(tf.constant(questions), tf.constant(contexts))
        logs.append(warmup.encoded_log(model_name, inputs))
        return logs
