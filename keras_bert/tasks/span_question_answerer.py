"""`SpanQuestionAnswerer`: SQuAD v1.1 / v2.0 extractive question answering (BERT §4.2, §4.3).

One dense layer maps each `sequence_output` vector to a start and an end logit
(google-research/bert `run_squad.py::create_model`: `cls/squad/output_weights` [2, H],
truncated-normal(0.02)). The task carries its preprocessor and its SQuAD settings (doc_stride,
max_query_length, n-best size, max answer length, v2.0 and its null threshold), so `predict`
takes raw (question, context) strings and `export` needs nothing else:

    answers = task.predict((["Who wrote it?"], ["It was written by Ada Lovelace in 1843."]))
    # [{"answer_text": "Ada Lovelace", "start": 18, "end": 30, "score": 7.1}]

Long contexts are split into windows (`keras_bert.data.squad`); answers are chosen over all
windows (`keras_bert.data.squad_answers`) and cut from the original context by
character offsets.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_bert.data import squad, squad_answers
from keras_bert.data.dynamic_padding import trim_to_longest
from keras_bert.layers.initializers import truncated_normal
from keras_bert.saved_model.span_question_answerer_signatures import (
    SpanQuestionAnswererServingModule,
)
from keras_bert.tasks.task import Task
from keras_bert.tokenization.full_tokenizer import FullTokenizer

# Added to the logits of padding positions: never chosen, no effect on the loss (float32).
PADDING_LOGIT = -10000.0


@keras.saving.register_keras_serializable(package="keras_bert")
class SpanQuestionAnswerer(Task):
    """Start/end logits over the tokens of `[CLS] question [SEP] context-window [SEP]`.

    Args:
        encoder: a `BertEncoder`.
        preprocessor: the `BertPreprocessor` it is trained and served with (its vocabulary,
            casing and `max_seq_length`, the window length in tokens).
        version_2_with_negative: bool; SQuAD v2.0 (questions may have no answer: [CLS]).
        doc_stride: int >= 1, pieces between window starts (128).
        max_query_length: int >= 1, question pieces kept (64).
        n_best_size: int >= 1, start and end positions tried per window (20).
        max_answer_length: int >= 1, longest answer in pieces (30).
        null_score_diff_threshold: float; v2.0 predicts "" when null score - best span score
            exceeds it.
        initializer_range: float, stddev of the truncated-normal kernel initializer.

    Call args:
        inputs: dict of `input_word_ids`, `input_mask`, `input_type_ids`, int32 [B, T].

    Returns:
        dict of float32 [B, T]: `start_logits`, `end_logits` (padding positions get -10000).

    Raises:
        ValueError: bad lengths (a window with no room for context, `check_lengths`), or
            non-positive n_best_size / max_answer_length.
    """

    task_type = "span_question_answering"

    def __init__(
        self,
        encoder,
        preprocessor=None,
        version_2_with_negative=False,
        doc_stride=squad.DOC_STRIDE,
        max_query_length=squad.MAX_QUERY_LENGTH,
        n_best_size=squad_answers.N_BEST_SIZE,
        max_answer_length=squad_answers.MAX_ANSWER_LENGTH,
        null_score_diff_threshold=0.0,
        initializer_range=0.02,
        label_names=None,
        is_pair=True,
        **kwargs,
    ):
        del label_names, is_pair  # always a (question, context) pair, no labels
        super().__init__(encoder, preprocessor=preprocessor, is_pair=True, **kwargs)
        if preprocessor is not None:
            squad.check_lengths(
                preprocessor.max_seq_length,
                int(doc_stride),
                int(max_query_length),
                encoder.bert_config.max_sequence_length,
            )
        if int(n_best_size) < 1 or int(max_answer_length) < 1:
            raise ValueError(
                f"n_best_size and max_answer_length must be >= 1, got "
                f"{n_best_size}, {max_answer_length}"
            )
        self.version_2_with_negative = bool(version_2_with_negative)
        self.doc_stride = int(doc_stride)
        self.max_query_length = int(max_query_length)
        self.n_best_size = int(n_best_size)
        self.max_answer_length = int(max_answer_length)
        self.null_score_diff_threshold = float(null_score_diff_threshold)
        self.initializer_range = float(initializer_range)
        self.span_logits = keras.layers.Dense(
            2,
            kernel_initializer=truncated_normal(initializer_range),
            dtype="float32",
            name="span_logits",
        )  # logits and losses in float32
        self._context_tokenizer = None
        if not encoder.built:
            encoder.build()  # variables first: `trainable` only reaches existing ones
        encoder.pooler.trainable = False  # spans never read the pooled [CLS] (no gradient)

    def build(self, input_shape=None):
        if not self.encoder.built:
            self.encoder.build(input_shape)
        self.span_logits.build((None, None, self.encoder.bert_config.hidden_size))
        self.built = True

    def default_loss(self):
        """Softmax cross-entropy of the start and of the end position, weighted 0.5 each
        (google-research/bert `run_squad.py`)."""
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        return {"start_logits": loss, "end_logits": loss}

    def default_loss_weights(self):
        return {"start_logits": 0.5, "end_logits": 0.5}

    def call(self, inputs, training=None):
        sequence = self.encoder(inputs, training=training)["sequence_output"]  # [B, T, H]
        logits = self.span_logits(tf.cast(sequence, tf.float32))  # [B, T, 2]
        padding = 1.0 - tf.cast(inputs["input_mask"], tf.float32)  # [B, T]
        return {
            "start_logits": logits[:, :, 0] + PADDING_LOGIT * padding,
            "end_logits": logits[:, :, 1] + PADDING_LOGIT * padding,
        }

    # ---- SQuAD pieces ----------------------------------------------------------------------

    @property
    def context_tokenizer(self) -> FullTokenizer:
        """The Python tokenizer (with `tokenize_with_offsets`) on the preprocessor's vocabulary
        and casing."""
        if self._context_tokenizer is None:
            p = self.require_preprocessor("SQuAD features")
            self._context_tokenizer = FullTokenizer(p.vocabulary, p.do_lower_case)
        return self._context_tokenizer

    def features(self, examples, is_training=False, progress=False) -> list:
        """`SquadExample`s -> windowed `SquadFeature`s with the task's settings."""
        return squad.convert_examples(
            examples,
            self.context_tokenizer,
            self.require_preprocessor("SQuAD features").max_seq_length,
            self.doc_stride,
            self.max_query_length,
            is_training,
            progress,
        )

    def window_logits(self, features, batch_size=32) -> list:
        """Per feature, (start_logits, end_logits) float32 numpy [T_batch] (T trimmed to the
        longest window of its batch)."""
        step = tf.function(
            lambda x: self(trim_to_longest(x, minimum=2, model_inputs=True), training=False),
            reduce_retracing=True,
        )
        out = []
        for at in range(0, len(features), batch_size):
            batch = squad.stack_features(features[at : at + batch_size])
            logits = step({k: tf.constant(v) for k, v in batch.items()})
            out.extend(zip(logits["start_logits"].numpy(), logits["end_logits"].numpy()))
        return out

    def answer(self, examples, features, results) -> dict:
        """qas_id -> `squad_answers.predict_example` dict, with the task's settings."""
        return squad_answers.predict_examples(
            examples,
            features,
            results,
            n_best_size=self.n_best_size,
            max_answer_length=self.max_answer_length,
            version_2_with_negative=self.version_2_with_negative,
            null_score_diff_threshold=self.null_score_diff_threshold,
        )

    def predict_texts(self, texts, texts_b=None, batch_size=32):
        """(questions, contexts) -> one dict per question, in input order.

        Returns:
            list of dicts: `answer_text` (str, "" for no answer), `start`, `end` (int character
            offsets in Python code points, `answer_text == context[start:end]`), `score`
            (float, start + end logit of the answer; the null score when empty).
        """
        examples = [
            squad.SquadExample(str(i), q, c) for i, (q, c) in enumerate(zip(texts, texts_b))
        ]
        features = self.features(examples)
        answers = self.answer(examples, features, self.window_logits(features, batch_size))
        return [
            {"answer_text": a["text"], "start": a["start"], "end": a["end"], "score": a["score"]}
            for a in (answers[e.qas_id] for e in examples)
        ]

    # ---- export / config -------------------------------------------------------------------

    def serving_module(self, preprocessor):
        return SpanQuestionAnswererServingModule(self, preprocessor)

    def squad_settings(self) -> dict:
        return {
            "version_2_with_negative": self.version_2_with_negative,
            "doc_stride": self.doc_stride,
            "max_query_length": self.max_query_length,
            "n_best_size": self.n_best_size,
            "max_answer_length": self.max_answer_length,
            "null_score_diff_threshold": self.null_score_diff_threshold,
        }

    def export_metadata(self) -> dict:
        return super().export_metadata() | self.squad_settings()

    def get_config(self):
        config = super().get_config()
        config.update(self.squad_settings() | {"initializer_range": self.initializer_range})
        return config


__all__ = ["PADDING_LOGIT", "SpanQuestionAnswerer"]
