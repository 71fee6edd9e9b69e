"""Dense over the last axis as one 2-D product, the form TensorFlow's CPU graph rewriter fuses."""

import keras
import tensorflow as tf

from keras_bert.layers.activations import get_activation


class FlatDense(keras.layers.Dense):
    """`keras.layers.Dense` computed as `[N, in] @ [in, units]`, BiasAdd, activation.

    Inputs `[..., in]` are flattened to `[N, in]` (N = product of the leading axes) and the result
    is reshaped back to `[..., units]`. `keras.layers.Dense` on a 3-D input runs a batched matmul
    and a broadcast add; the 2-D `MatMul` + `BiasAdd` (+ GELU) chain here is the pattern
    TensorFlow's oneDNN remapper rewrites into a single `_FusedMatMul` with bias and activation as
    post-ops, so the `[B, T, units]` result is written once instead of two or three times (see
    docs/results/encoder.md, "bfloat16 encoder"). Weights (`kernel` [in, units], `bias` [units]),
    their names and checkpoints are Dense's.

    Args:
        units: int, output width.
        activation_name: None or a name for `layers.activations.get_activation`.
        **kwargs: `keras.layers.Dense` arguments (kernel_initializer, dtype, name, ...).

    Call args:
        inputs: float tensor [..., in], compute dtype.
        training: bool. With a reduced-precision compute dtype (bfloat16 / float16), inference
            applies GELU in that dtype so the rewriter can fuse it into the product (oneDNN computes
            the post-op in float32 and rounds once); training keeps the float32 GELU of
            `activations.gelu`, whose gradient TensorFlow has no fast bfloat16 kernel for.

    Raises:
        ValueError: unknown activation name.
    """

    def __init__(self, units, activation_name=None, **kwargs):
        kwargs.pop("activation", None)
        super().__init__(units, **kwargs)
        self.activation_name = activation_name
        self._act = get_activation(activation_name) if activation_name else None

    def call(self, inputs, training=None):
        in_dim = inputs.shape[-1]
        flat = inputs.shape.rank == 2  # the encoder's rows layout: no reshapes at all
        x = inputs if flat else tf.reshape(inputs, [-1, in_dim])
        y = tf.matmul(x, tf.cast(self.kernel, x.dtype))
        if self.use_bias:
            y = tf.nn.bias_add(y, tf.cast(self.bias, y.dtype))
        if self._act is not None:
            fused = self.activation_name in ("gelu", "gelu_approximate") and not training
            y = (
                tf.nn.gelu(y, approximate=self.activation_name == "gelu_approximate")
                if fused
                else self._act(y)
            )
        if flat:
            return y
        return tf.reshape(y, tf.concat([tf.shape(inputs)[:-1], [self.units]], axis=0))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self):
        config = super().get_config()
        config.pop("activation", None)
        config["activation_name"] = self.activation_name
        return config
