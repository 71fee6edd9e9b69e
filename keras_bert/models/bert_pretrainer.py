"""`BertPretrainer`: encoder + masked-LM and next-sentence heads, with the pretraining losses.

Losses follow google-research/bert `run_pretraining.py`: the masked-LM loss is the cross-entropy
over predicted positions weighted by `masked_lm_weights`, sum(w * ce) / (sum(w) + 1e-5); the
next-sentence loss is the mean cross-entropy over the batch; the training loss is their sum
(BERT §3.1, appendix A.2). `use_nsp=False` drops the NSP head and loss (the "No NSP" ablation,
BERT §5.1, table 5).
"""

import keras
import tensorflow as tf

from keras_bert.layers.arguments import BuildsFromArguments
from keras_bert.config import INPUT_NAMES
from keras_bert.heads.masked_lm import MaskedLMHead
from keras_bert.heads.next_sentence import NextSentenceHead

_MLM_EPSILON = 1e-5  # run_pretraining.py: denominator = sum(weights) + 1e-5


def masked_lm_loss(logits, masked_lm_ids, masked_lm_weights):
    """Weighted masked-LM cross-entropy.

    Args:
        logits: float Tensor [batch_size, num_predictions, vocab_size].
        masked_lm_ids: int Tensor [batch_size, num_predictions], the original token ids.
        masked_lm_weights: float Tensor [batch_size, num_predictions]; 1.0 real, 0.0 padding.

    Returns:
        float32 scalar: sum(w * ce) / (sum(w) + 1e-5), in nats per predicted token.
    """
    weights = tf.cast(masked_lm_weights, tf.float32)
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(masked_lm_ids, tf.int32), logits=tf.cast(logits, tf.float32)
    )
    return tf.reduce_sum(ce * weights) / (tf.reduce_sum(weights) + _MLM_EPSILON)


def next_sentence_loss(logits, next_sentence_labels):
    """Mean NSP cross-entropy. logits float [batch_size, 2]; labels int [batch_size] or [B, 1]."""
    labels = tf.reshape(tf.cast(next_sentence_labels, tf.int32), [-1])
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=tf.cast(logits, tf.float32)
        )
    )


@keras.saving.register_keras_serializable(package="keras_bert")
class BertPretrainer(BuildsFromArguments, keras.Model):
    """BERT with its two pretraining heads; `fit` trains on dicts of pretraining features.

    Args:
        encoder: `BertEncoder`. Its word embedding table is tied to the MLM output layer.
        use_nsp: bool. False removes the next-sentence head and loss.

    Call args:
        features: dict with `input_word_ids`, `input_mask`, `input_type_ids` int32
            [batch_size, seq_length] and `masked_lm_positions` int32 [batch_size,
            num_predictions]; for training also `masked_lm_ids` int32 and `masked_lm_weights`
            float32 [batch_size, num_predictions], and `next_sentence_labels` int32
            [batch_size] or [batch_size, 1] (1 = random next segment) when use_nsp.
        training: bool.

    Returns:
        dict: `mlm_logits` float32 [batch_size, num_predictions, vocab_size] and, when
        use_nsp, `nsp_logits` float32 [batch_size, 2].

    Metrics reported by fit/evaluate: loss, mlm_loss, mlm_accuracy (weighted by
    masked_lm_weights), and nsp_loss, nsp_accuracy when use_nsp.

    Raises:
        KeyError: naming a required feature missing from the batch.
    """

    def __init__(self, encoder, use_nsp=True, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.use_nsp = bool(use_nsp)
        cfg = encoder.bert_config
        self.masked_lm = MaskedLMHead.from_bert_config(
            cfg, dtype=self.dtype_policy, name="masked_lm"
        )
        self.next_sentence = (
            NextSentenceHead.from_bert_config(cfg, dtype=self.dtype_policy, name="next_sentence")
            if self.use_nsp
            else None
        )
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.mlm_accuracy_tracker = keras.metrics.Mean(name="mlm_accuracy")
        if self.use_nsp:
            self.nsp_loss_tracker = keras.metrics.Mean(name="nsp_loss")
            self.nsp_accuracy_tracker = keras.metrics.Mean(name="nsp_accuracy")

    def build(self, input_shape=None):
        for layer in (self.encoder, self.masked_lm, self.next_sentence):
            if layer is not None and not layer.built:
                layer.build()
        self.built = True

    def call(self, features, training=None):
        _require(features, ("input_word_ids", "masked_lm_positions"))
        outputs = self.encoder(
            {k: features[k] for k in INPUT_NAMES if k in features}, training=training
        )
        result = {
            "mlm_logits": self.masked_lm(
                outputs["sequence_output"],
                features["masked_lm_positions"],
                self.encoder.word_embeddings,
            )
        }
        if self.next_sentence is not None:
            result["nsp_logits"] = self.next_sentence(outputs["pooled_output"])
        return result

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        del y, sample_weight, training
        _require(
            x,
            ("masked_lm_ids", "masked_lm_weights")
            + (("next_sentence_labels",) if self.use_nsp else ()),
        )
        weights = tf.cast(x["masked_lm_weights"], tf.float32)
        mlm_ids = tf.cast(x["masked_lm_ids"], tf.int32)
        mlm_loss = masked_lm_loss(y_pred["mlm_logits"], mlm_ids, weights)
        correct = tf.cast(
            tf.equal(tf.argmax(y_pred["mlm_logits"], -1, output_type=tf.int32), mlm_ids), tf.float32
        )
        self.mlm_loss_tracker.update_state(mlm_loss)
        self.mlm_accuracy_tracker.update_state(correct, sample_weight=weights)
        loss = mlm_loss
        if self.use_nsp:
            labels = tf.reshape(tf.cast(x["next_sentence_labels"], tf.int32), [-1])
            nsp_loss = next_sentence_loss(y_pred["nsp_logits"], labels)
            nsp_correct = tf.cast(
                tf.equal(tf.argmax(y_pred["nsp_logits"], -1, output_type=tf.int32), labels),
                tf.float32,
            )
            self.nsp_loss_tracker.update_state(nsp_loss)
            self.nsp_accuracy_tracker.update_state(nsp_correct)
            loss = loss + nsp_loss
        loss = loss + tf.add_n(self.losses) if self.losses else loss
        # Gradients are summed across replicas: scale each replica's loss by 1 / replicas.
        return keras.src.losses.loss.scale_loss_for_distribution(loss)

    def get_config(self):
        config = super().get_config()
        config.update(
            encoder=keras.saving.serialize_keras_object(self.encoder), use_nsp=self.use_nsp
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)


def _require(features, keys):
    missing = [k for k in keys if k not in features]
    if missing:
        raise KeyError(f"pretraining batch lacks features {missing}; got {sorted(features)}")
