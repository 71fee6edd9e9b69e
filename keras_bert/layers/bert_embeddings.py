"""BERT input embeddings: word + position + token type, then LayerNorm and dropout (BERT §3)."""

import keras
import tensorflow as tf

from keras_bert.layers.arguments import ConfigFromArguments
from keras_bert.layers.dropout import BertDropout
from keras_bert.layers.initializers import truncated_normal


@keras.saving.register_keras_serializable(package="keras_bert")
class BertEmbeddings(ConfigFromArguments, keras.layers.Layer):
    """Sums word, learned absolute position and token-type embeddings (BERT §3, figure 2).

    Args:
        vocab_size: int. Rows of the word embedding table.
        hidden_size: int. Embedding width H.
        max_sequence_length: int. Rows of the position table, in tokens.
        type_vocab_size: int. Rows of the token-type table.
        initializer_range: float. Stddev of the truncated-normal initializer.
        layer_norm_epsilon: float. LayerNorm epsilon (1e-12 in google-research/bert).
        dropout_rate: float in [0, 1). Dropout after the LayerNorm.

    Call args:
        input_word_ids: int32 Tensor [batch_size, seq_length].
        input_type_ids: int32 Tensor [batch_size, seq_length].
        training: bool. Dropout acts only when True.

    Returns:
        Tensor [batch_size, seq_length, hidden_size] in the layer's compute dtype. The
        LayerNorm is computed in float32 under mixed precision.

    Raises:
        InvalidArgumentError: at run time if seq_length > max_sequence_length.
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        max_sequence_length,
        type_vocab_size=2,
        initializer_range=0.02,
        layer_norm_epsilon=1e-12,
        dropout_rate=0.1,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.keep_arguments(locals())

    def build(self, input_shape=None):
        self.word_embeddings = self._table(self.vocab_size, "word_embeddings")
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_sequence_length, self.hidden_size),
            initializer=truncated_normal(self.initializer_range),
        )
        self.type_embeddings = self._table(self.type_vocab_size, "type_embeddings")
        # LayerNorm statistics in float32 whatever the policy (mixed precision safety).
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype="float32", name="layer_norm"
        )
        self.layer_norm.build((None, None, self.hidden_size))
        self.dropout = BertDropout(self.dropout_rate, dtype=self.dtype_policy, name="dropout")
        self.built = True

    def _table(self, rows, name):
        """A built [rows, hidden_size] Embedding layer in the layer's dtype policy."""
        table = keras.layers.Embedding(
            rows,
            self.hidden_size,
            embeddings_initializer=truncated_normal(self.initializer_range),
            dtype=self.dtype_policy,
            name=name,
        )
        table.build((None, None))
        return table

    def call(self, input_word_ids, input_type_ids, training=None):
        seq_length = tf.shape(input_word_ids)[1]
        static_length = input_word_ids.shape[1]
        if static_length is not None and static_length > self.max_sequence_length:
            raise ValueError(
                f"sequence length {static_length} exceeds max_sequence_length="
                f"{self.max_sequence_length} (the size of the position table)"
            )
        check = tf.debugging.assert_less_equal(
            seq_length,
            self.max_sequence_length,
            message=f"sequence length exceeds max_sequence_length={self.max_sequence_length}",
        )
        # The check must run before the sum, or a graph may first fail on the [T, H] + [P, H]
        # shape mismatch with a message that does not name the cause.
        with tf.control_dependencies([check] if check is not None else []):
            positions = tf.cast(self.position_embeddings[:seq_length], self.compute_dtype)
            positions = tf.identity(positions)
        x = (
            self.word_embeddings(input_word_ids)
            + positions[tf.newaxis]
            + self.type_embeddings(input_type_ids)
        )
        x = tf.cast(self.layer_norm(x), self.compute_dtype)
        return self.dropout(x, training=training)
