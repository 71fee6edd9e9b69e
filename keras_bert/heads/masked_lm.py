"""Masked-LM head (BERT §3.1 task 1; google-research/bert run_pretraining.py get_masked_lm_output)."""

import keras
import tensorflow as tf

from keras_bert.layers.arguments import ConfigFromArguments
from keras_bert.layers.activations import get_activation
from keras_bert.layers.initializers import truncated_normal


@keras.saving.register_keras_serializable(package="keras_bert")
class MaskedLMHead(ConfigFromArguments, keras.layers.Layer):
    """Gathers masked positions, Dense + activation + LayerNorm, then logits over the vocabulary.

    The output projection is tied to the word embedding table (passed at call time, so the head
    owns no copy of it) and has its own bias, as `cls/predictions/output_bias` in the reference.

    Args:
        vocab_size: int. Number of output logits V.
        hidden_size: int. Width H of the encoder's sequence_output.
        hidden_activation: str. Activation name of the transform (the encoder's).
        initializer_range: float. Stddev of the truncated-normal initializer.
        layer_norm_epsilon: float. LayerNorm epsilon.

    Call args:
        sequence_output: float Tensor [batch_size, seq_length, hidden_size].
        masked_lm_positions: int32 Tensor [batch_size, num_predictions], token indices.
        embedding_table: float Variable [vocab_size, hidden_size].

    Returns:
        float32 Tensor [batch_size, num_predictions, vocab_size] of logits.
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        hidden_activation="gelu",
        initializer_range=0.02,
        layer_norm_epsilon=1e-12,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.keep_arguments(locals())

    def build(self, input_shape=None):
        self.transform = keras.layers.Dense(
            self.hidden_size,
            activation=get_activation(self.hidden_activation),
            kernel_initializer=truncated_normal(self.initializer_range),
            dtype=self.dtype_policy,
            name="transform",
        )
        self.transform.build((None, None, self.hidden_size))
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype="float32", name="layer_norm"
        )
        self.layer_norm.build((None, None, self.hidden_size))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocab_size,), initializer="zeros"
        )
        self.built = True

    def call(self, sequence_output, masked_lm_positions, embedding_table):
        positions = tf.cast(masked_lm_positions, tf.int32)
        gathered = tf.gather(sequence_output, positions, batch_dims=1)  # [B, P, H]
        x = self.layer_norm(self.transform(gathered))  # float32
        logits = tf.matmul(x, tf.cast(embedding_table, tf.float32), transpose_b=True)
        return logits + tf.cast(self.output_bias, tf.float32)
