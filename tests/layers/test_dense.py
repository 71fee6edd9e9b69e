"""FlatDense: the same function and weights as keras.layers.Dense, as one 2-D product."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.layers.activations import gelu
from keras_bert.layers.dense import FlatDense


def _pair(activation_name, dtype="float32"):
    keras.utils.set_random_seed(0)
    flat = FlatDense(24, activation_name=activation_name, dtype=dtype, name="intermediate")
    flat.build((None, None, 16))
    ref = keras.layers.Dense(24, dtype=dtype, name="intermediate")
    ref.build((None, None, 16))
    ref.set_weights(
        [
            np.random.default_rng(1).standard_normal(w.shape).astype("float32")
            for w in flat.get_weights()
        ]
    )
    flat.set_weights(ref.get_weights())
    return flat, ref


@pytest.mark.parametrize("activation_name", [None, "gelu", "gelu_approximate"])
def test_matches_keras_dense_on_3d_inputs(activation_name):
    flat, ref = _pair(activation_name)
    x = np.random.default_rng(2).standard_normal((3, 5, 16)).astype("float32")
    act = {
        None: lambda y: y,
        "gelu": gelu,
        "gelu_approximate": lambda y: keras.activations.gelu(y, approximate=True),
    }[activation_name]
    want = act(ref(x)).numpy()
    for training in (False, True):
        got = flat(x, training=training).numpy()
        assert got.shape == (3, 5, 24)
        np.testing.assert_allclose(got, want, atol=1e-5)
    assert [w.path for w in flat.weights] == ["intermediate/kernel", "intermediate/bias"]


def test_bfloat16_inference_and_training_gelu_agree_to_bfloat16_precision():
    flat, _ = _pair("gelu", dtype="mixed_bfloat16")
    x = tf.constant(np.random.default_rng(3).standard_normal((2, 7, 16)), tf.bfloat16)
    infer = tf.cast(flat(x, training=False), tf.float32).numpy()
    train = tf.cast(flat(x, training=True), tf.float32).numpy()
    assert flat(x).dtype == tf.bfloat16
    np.testing.assert_allclose(infer, train, rtol=2**-7, atol=2**-7)


def test_symbolic_shapes_and_unknown_activation():
    flat = FlatDense(8)
    assert flat.compute_output_shape((None, None, 4)) == (None, None, 8)
    with pytest.raises(ValueError, match="unknown activation 'swish2'"):
        FlatDense(8, activation_name="swish2")
