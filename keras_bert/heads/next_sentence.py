"""Next-sentence prediction head (BERT §3.1 task 2; run_pretraining.py get_next_sentence_output)."""

import keras
import tensorflow as tf

from keras_bert.layers.arguments import ConfigFromArguments
from keras_bert.layers.initializers import truncated_normal


@keras.saving.register_keras_serializable(package="keras_bert")
class NextSentenceHead(ConfigFromArguments, keras.layers.Layer):
    """Dense(2) on the pooled [CLS] output. Label 1 = segment B is random (PITFALLS.md).

    Args:
        hidden_size: int. Width H of pooled_output.
        initializer_range: float. Stddev of the truncated-normal initializer.

    Call args:
        pooled_output: float Tensor [batch_size, hidden_size].

    Returns:
        float32 Tensor [batch_size, 2] of logits.
    """

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.keep_arguments(locals())

    def build(self, input_shape=None):
        self.dense = keras.layers.Dense(
            2,
            kernel_initializer=truncated_normal(self.initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )
        self.dense.build((None, self.hidden_size))
        self.built = True

    def call(self, pooled_output):
        return tf.cast(self.dense(pooled_output), tf.float32)
