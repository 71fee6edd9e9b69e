"""Post-LN Transformer encoder block (Vaswani et al. 2017, §3.1; BERT §3)."""

import keras
import tensorflow as tf

from keras_bert.layers.arguments import ConfigFromArguments
from keras_bert.layers.activations import get_activation
from keras_bert.layers.dense import FlatDense
from keras_bert.layers.dropout import BertDropout
from keras_bert.layers.initializers import truncated_normal
from keras_bert.layers.self_attention import BertSelfAttention, on_rows


@keras.saving.register_keras_serializable(package="keras_bert")
class TransformerEncoderBlock(ConfigFromArguments, keras.layers.Layer):
    """x = LN(x + Dropout(Dense(SelfAttention(x)))); x = LN(x + Dropout(FFN(x))).

    Sublayer names follow google-research/bert `modeling.py` (`attention/self`,
    `attention/output`, `intermediate`, `output`), so converters map one to one.

    Args:
        hidden_size: int. Model width H.
        num_heads: int. Attention heads; hidden_size must be divisible by it.
        intermediate_size: int. Width of the feed-forward inner layer.
        hidden_activation: str. Activation name (see `layers.activations`).
        dropout_rate: float in [0, 1). Probability of *dropping* a unit of the hidden states.
        attention_dropout_rate: float in [0, 1). Dropout on attention probabilities.
        initializer_range: float. Stddev of the truncated-normal initializer.
        layer_norm_epsilon: float. LayerNorm epsilon.

    Call args:
        inputs, attention_mask, training: as `BertSelfAttention`'s.

    Returns:
        Tensor [batch_size, seq_length, hidden_size] in the layer's compute dtype.

    Raises:
        ValueError: if hidden_size is not divisible by num_heads, or the activation is unknown.
    """

    def __init__(
        self,
        hidden_size,
        num_heads,
        intermediate_size,
        hidden_activation="gelu",
        dropout_rate=0.1,
        attention_dropout_rate=0.1,
        initializer_range=0.02,
        layer_norm_epsilon=1e-12,
        **kwargs,
    ):
        super().__init__(**kwargs)
        get_activation(hidden_activation)  # fail early on an unknown name
        self.keep_arguments(locals())
        self.self_attention = BertSelfAttention(
            hidden_size,
            num_heads,
            attention_dropout_rate,
            initializer_range,
            dtype=self.dtype_policy,
            name="self_attention",
        )

    def build(self, input_shape=None):
        h = self.hidden_size
        self.self_attention.build((None, None, h))

        def dense(units, name, in_dim, activation=None):
            layer = FlatDense(
                units,
                activation_name=activation,
                kernel_initializer=truncated_normal(self.initializer_range),
                dtype=self.dtype_policy,
                name=name,
            )
            layer.build((None, None, in_dim))
            return layer

        def layer_norm(name):
            layer = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon, dtype="float32", name=name
            )
            layer.build((None, None, h))
            return layer

        self.attention_output = dense(h, "attention_output", h)
        self.attention_dropout = BertDropout(
            self.dropout_rate, dtype=self.dtype_policy, name="attention_dropout"
        )
        self.attention_layer_norm = layer_norm("attention_layer_norm")
        self.intermediate = dense(
            self.intermediate_size, "intermediate", h, activation=self.hidden_activation
        )
        self.output_dense = dense(h, "output_dense", self.intermediate_size)
        self.output_dropout = BertDropout(
            self.dropout_rate, dtype=self.dtype_policy, name="output_dropout"
        )
        self.output_layer_norm = layer_norm("output_layer_norm")
        self.built = True

    def call(self, inputs, attention_mask, training=None):
        return on_rows(self.call_rows, inputs, attention_mask, training=training)

    def call_rows(self, rows, batch_size, seq_length, bias, training=None):
        """The block on the rows layout: [B*T, H] in, [B*T, H] out, compute dtype.

        `BertEncoder` flattens the embeddings once and runs every block here, with B, T and the
        float32 logit bias (`self_attention.attention_bias`) computed once; see
        `BertSelfAttention.attend_rows` for the arguments.
        """
        attention = self.self_attention.attend_rows(
            rows, batch_size, seq_length, bias, training=training
        )
        attention = self.attention_dropout(self.attention_output(attention), training=training)
        x = tf.cast(self.attention_layer_norm(rows + attention), self.compute_dtype)
        ffn = self.output_dense(self.intermediate(x, training=training))
        ffn = self.output_dropout(ffn, training=training)
        return tf.cast(self.output_layer_norm(x + ffn), self.compute_dtype)
