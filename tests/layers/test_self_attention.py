"""swap_axes_1_2 (the head split/merge) against tf.transpose: values, gradients, XLA, dtypes."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.layers.self_attention import swap_axes_1_2


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16, tf.float16, tf.float64, tf.int32])
def test_swap_equals_transpose_bit_for_bit(dtype):
    x = tf.cast(tf.random.stateless_normal([2, 5, 3, 4], seed=[1, 2]) * 100, dtype)
    want = tf.transpose(x, [0, 2, 1, 3])
    got = swap_axes_1_2(x)
    assert got.dtype == dtype and got.shape == (2, 3, 5, 4)
    np.testing.assert_array_equal(
        tf.bitcast(got, tf.uint8).numpy() if dtype.size > 1 else got,
        tf.bitcast(want, tf.uint8).numpy() if dtype.size > 1 else want,
    )


def test_special_values_pass_through_unchanged():
    x = tf.constant([[[[np.nan, -0.0, np.inf, -np.inf]]]], tf.float32)
    got = swap_axes_1_2(x).numpy().reshape(-1)
    assert np.isnan(got[0]) and np.signbit(got[1]) and got[2] == np.inf and got[3] == -np.inf


@pytest.mark.parametrize("jit_compile", [False, True])
def test_gradient_equals_the_transpose_gradient(jit_compile):
    x = tf.random.stateless_normal([2, 6, 3, 5], seed=[3, 4])
    w = tf.random.stateless_normal([2, 3, 6, 5], seed=[5, 6])

    @tf.function(jit_compile=jit_compile)
    def grads(x):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            ours = tf.reduce_sum(swap_axes_1_2(x) * w)
            ref = tf.reduce_sum(tf.transpose(x, [0, 2, 1, 3]) * w)
        return tape.gradient(ours, x), tape.gradient(ref, x), ours, ref

    g_ours, g_ref, ours, ref = grads(x)
    np.testing.assert_array_equal(g_ours.numpy(), g_ref.numpy())
    assert float(ours) == float(ref)
