"""`Task`: a fine-tuned model that knows what it is (STYLE.md section 8; keras-hub's `Task`).

A task holds three things and nothing outside it repeats them:
- `encoder`: the `BertEncoder` (dict of int32 [B, T] ids -> dict of outputs);
- `preprocessor`: the `BertPreprocessor` it was trained with (vocabulary, `do_lower_case`,
  `max_seq_length`); its vocabulary is part of `get_config()`, so a saved task works after the
  vocabulary file is deleted or the `.keras` file is moved;
- task metadata: `task_type` (a class attribute, e.g. "classification"), `label_names`
  (id order), `is_pair` (two text segments per example).

`call()` takes the three int32 model inputs, so `fit`/`evaluate` work on packed batches; `predict`
takes raw strings; `export` writes a versioned SavedModel with the signatures of the task type
(`serving_module`, defined by each subclass).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from keras_bert.config import INPUT_NAMES, check_max_seq_length
from keras_bert.data.dynamic_padding import trim_to_longest
from keras_bert.models.bert_encoder import BertEncoder
from keras_bert.saved_model import exporter
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor


@keras.saving.register_keras_serializable(package="keras_bert")
class Task(keras.Model):
    """Base class of the task models (`TextClassifier`, `SpanQuestionAnswerer`, ...).

    Args:
        encoder: a `BertEncoder`.
        preprocessor: the `BertPreprocessor` the task is trained and served with, or None (a
            task without one trains and predicts on ids, but `predict` on strings and `export`
            raise). Its `max_seq_length` is checked against the encoder (`check_max_seq_length`).
        label_names: optional list of str, the label of each class id, in id order.
        is_pair: bool; True when each example is two texts (text, text_b).

    Subclasses set `task_type` and implement `call`, `predict_texts` (raw strings -> numpy) and
    `serving_module` (the tf.Module whose functions are the exported signatures).

    Raises:
        TypeError: encoder is not a BertEncoder, preprocessor is not a BertPreprocessor.
        ValueError: the preprocessor's max_seq_length does not fit the encoder.
    """

    task_type = None

    def __init__(self, encoder, preprocessor=None, label_names=None, is_pair=False, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(encoder, BertEncoder):
            raise TypeError(
                f"encoder must be a keras_bert BertEncoder, got {type(encoder).__name__}"
            )
        self.encoder = encoder
        self.is_pair = bool(is_pair)
        self._preprocessor_holder = _Holder(None)
        self.preprocessor = preprocessor
        self.label_names = None if label_names is None else [str(x) for x in label_names]

    def __setattr__(self, name, value):
        if name == "preprocessor":  # the property below, past Keras's tracker (see there)
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    @property
    def preprocessor(self):
        """The `BertPreprocessor` (no weights; kept out of Keras layer tracking so it can be
        replaced after the task is built, e.g. by an export with another max_seq_length)."""
        return self._preprocessor_holder.value

    @preprocessor.setter
    def preprocessor(self, preprocessor):
        if preprocessor is not None:
            if not isinstance(preprocessor, BertPreprocessor):
                raise TypeError(
                    "preprocessor must be a keras_bert BertPreprocessor, got "
                    f"{type(preprocessor).__name__}"
                )
            check_max_seq_length(
                preprocessor.max_seq_length,
                self.encoder.bert_config.max_sequence_length,
                is_pair=self.is_pair,
            )
        self._preprocessor_holder.value = preprocessor

    # ---- raw strings -----------------------------------------------------------------------

    def require_preprocessor(self, what: str) -> BertPreprocessor:
        """The preprocessor; ValueError naming `what` needs it when the task has none."""
        if self.preprocessor is None:
            raise ValueError(
                f"{what} needs the task's preprocessor, and this "
                f"{type(self).__name__} has none: build it with "
                "preprocessor=BertPreprocessor(vocab_file, do_lower_case, max_seq_length)"
            )
        return self.preprocessor

    def split_texts(self, x) -> tuple[list[str], list[str] | None]:
        """Raw input -> (texts [B], texts_b [B] or None), checking it fits `is_pair`.

        Accepts a list of str (single-text tasks) or a tuple (texts_a, texts_b) of equal-length
        lists (pair tasks); numpy arrays of str too.

        Raises:
            ValueError: a pair given to a single-text task or the reverse, lists of different
                lengths, or items that are not str.
        """
        if isinstance(x, str):
            raise ValueError(
                "predict takes a batch: a list of texts, not one str (wrap it: [text])"
            )
        if self.is_pair:
            if not (isinstance(x, tuple) and len(x) == 2):
                raise ValueError(
                    f"{type(self).__name__} is a pair task: pass (texts_a, texts_b), "
                    "a tuple of two equal-length lists of str"
                )
            a, b = [_as_texts(t, name) for t, name in zip(x, ("texts_a", "texts_b"))]
            if len(a) != len(b):
                raise ValueError(f"texts_a has {len(a)} items but texts_b has {len(b)}")
            return a, b
        if isinstance(x, tuple):
            raise ValueError(
                f"{type(self).__name__} is a single-text task: pass a list of str, not a tuple"
            )
        return _as_texts(x, "texts"), None

    def encode_texts(self, texts, texts_b=None) -> dict:
        """Raw strings -> int32 model inputs [B, max_seq_length] through the task's preprocessor."""
        preprocessor = self.require_preprocessor("encoding text")
        inputs = (
            tf.constant(texts, tf.string)
            if texts_b is None
            else {"text": tf.constant(texts, tf.string), "text_b": tf.constant(texts_b, tf.string)}
        )
        return preprocessor(inputs)

    def predict(self, x, batch_size=32, verbose=0, **kwargs):
        """Raw strings in, numpy out (see the subclass's `predict_texts` for shapes and dtypes).

        `x` may also be a dict of int model inputs (or a tf.data.Dataset of them), which goes
        to `keras.Model.predict` unchanged.
        """
        if isinstance(x, (dict, tf.data.Dataset)):
            return super().predict(x, batch_size=batch_size, verbose=verbose, **kwargs)
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        texts, texts_b = self.split_texts(x)
        return self.predict_texts(texts, texts_b, batch_size=int(batch_size))

    def predict_texts(self, texts, texts_b=None, batch_size=32):
        raise NotImplementedError(f"{type(self).__name__} does not define predict_texts")

    def batched_outputs(self, texts, texts_b, batch_size, fn) -> list:
        """`fn(trimmed int32 inputs)` on consecutive batches of raw texts; list of numpy results."""
        step = tf.function(
            lambda features: fn(trim_to_longest(features, minimum=2, model_inputs=True)),
            reduce_retracing=True,
        )
        results = []
        for start in range(0, len(texts), batch_size):
            stop = start + batch_size
            encoded = self.encode_texts(
                texts[start:stop], None if texts_b is None else texts_b[start:stop]
            )
            results.append(tf.nest.map_structure(lambda t: t.numpy(), step(encoded)))
        return results

    # ---- training --------------------------------------------------------------------------

    def compile(self, optimizer="rmsprop", loss="auto", metrics="auto", **kwargs):
        """`keras.Model.compile` with the task's own loss and metrics by default (keras-hub's
        `Task.compile`): `loss="auto"` takes `default_loss()` (and its `loss_weights`),
        `metrics="auto"` takes `default_metrics()`."""
        if isinstance(loss, str) and loss == "auto":
            loss = self.default_loss()
            kwargs.setdefault("loss_weights", self.default_loss_weights())
        if isinstance(metrics, str) and metrics == "auto":
            metrics = self.default_metrics()
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def default_loss(self):
        """The loss the task fine-tunes with (subclasses define it)."""
        raise NotImplementedError(f"{type(self).__name__} does not define default_loss")

    def default_loss_weights(self):
        """Weights of the outputs' losses (None: one output)."""
        return None

    def default_metrics(self) -> list:
        """Training metrics shown in the progress bar (none by default)."""
        return []

    # ---- export ----------------------------------------------------------------------------

    def dummy_inputs(self, length: int = 8) -> dict:
        """int32 ones [1, length] per model input: builds the task (subclasses of other input
        ranks override it)."""
        length = min(length, self.encoder.bert_config.max_sequence_length)
        return {name: tf.ones((1, length), tf.int32) for name in INPUT_NAMES}

    def build_for_export(self) -> None:
        """Creates every variable by one call on `dummy_inputs()`."""
        self(self.dummy_inputs(), training=False)

    def serving_module(self, preprocessor):
        """The tf.Module whose `signatures()` are exported (subclasses define it)."""
        raise NotImplementedError(f"{type(self).__name__} does not define serving_module")

    # Writes `export_base/<model_name>/<version>/` (SPEC section 7), atomically: the one
    # implementation, documented there.
    export = exporter.export_task

    def export_metadata(self) -> dict:
        """What the task is, as written to assets/export_config.json (subclasses add fields)."""
        p = self.preprocessor
        return {
            "task_type": self.task_type,
            "is_pair": self.is_pair,
            "label_names": list(self.label_names or []),
            "max_seq_length": p.max_seq_length,
            "do_lower_case": p.do_lower_case,
        }

    # ---- serialization ---------------------------------------------------------------------

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "encoder": keras.saving.serialize_keras_object(self.encoder),
                "preprocessor": None
                if self.preprocessor is None
                else keras.saving.serialize_keras_object(self.preprocessor),
                "label_names": self.label_names,
                "is_pair": self.is_pair,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        if config.get("preprocessor") is not None:
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(**config)


class _Holder:
    """A value out of Keras's attribute tracking."""

    def __init__(self, value):
        self.value = value


def _as_texts(values, name) -> list[str]:
    if isinstance(values, np.ndarray):
        values = values.tolist()
    values = list(values)
    bad = [type(v).__name__ for v in values if not isinstance(v, str)]
    if bad:
        raise ValueError(f"{name} must be str items; got {bad[0]}")
    return values
