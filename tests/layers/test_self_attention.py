"""swap_axes_1_2 (the head split/merge) against tf.transpose: values, gradients, XLA, dtypes."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.layers.dropout import dropout_16bit
from keras_bert.layers.self_attention import (
    attention_probs,
    attention_with_dropout,
    swap_axes_1_2,
)
from tests.memory import backward_reads, stacked_step, tensor_bytes
from tests.tolerance import assert_close_across_paths


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


SEED = tf.constant([7, 11], tf.int32)


def _qkv_bias(shape=(2, 3, 9, 4), dtype=tf.float32):
    q, k, v = (tf.cast(tf.random.stateless_normal(shape, seed=[i, 1]), dtype) for i in range(3))
    valid = tf.sequence_mask([9, 6], shape[2], tf.int32)[:, None, None, :]  # second row padded
    return q, k, v, (1.0 - tf.cast(valid, tf.float32)) * -10000.0


def _op_by_op(q, k, v, bias, rate=0.1):
    probs = tf.cast(attention_probs(q, k, bias, 0.5), q.dtype)
    return tf.matmul(dropout_16bit(probs, rate, SEED), v)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_attention_with_dropout_gives_the_op_by_op_values_and_gradients(dtype, jit_compile):
    q, k, v, bias = _qkv_bias(dtype=dtype)
    w = tf.cast(tf.random.stateless_normal(q.shape, seed=[9, 9]), dtype)

    @tf.function(jit_compile=jit_compile)
    def run(q, k, v):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([q, k, v])
            ours = attention_with_dropout(q, k, v, bias, 0.5, 0.1, SEED)
            ref = _op_by_op(q, k, v, bias)
            loss_ours, loss_ref = tf.reduce_sum(ours * w), tf.reduce_sum(ref * w)
        return ours, ref, tape.gradient(loss_ours, [q, k, v]), tape.gradient(loss_ref, [q, k, v])

    ours, ref, g_ours, g_ref = run(q, k, v)
    assert ours.dtype == dtype and ours.shape == (2, 3, 9, 4)
    np.testing.assert_array_equal(tf.cast(ours, tf.float32), tf.cast(ref, tf.float32))
    for got, want in zip(g_ours, g_ref):
        assert got.dtype == dtype
        if dtype == tf.float32:
            assert_close_across_paths(got.numpy(), want.numpy())
        else:  # one bfloat16 rounding of the same float32 values, in another order
            np.testing.assert_allclose(
                tf.cast(got, tf.float32), tf.cast(want, tf.float32), rtol=2e-2, atol=2e-2
            )


def test_attention_with_dropout_keeps_the_probabilities_and_the_mask_only():
    # Three attention layers, each one's output the next one's query, key and value. Op by op the
    # backward pass reads, per layer, the float32 probabilities (softmax), the bool mask (the
    # dropout's select) and the dropped probabilities (the product): 2.25 float32 [B, N, T, T]
    # tensors; ours reads the probabilities and the mask: 1.25.
    _, _, v, _ = _qkv_bias(shape=(2, 3, 16, 4))
    bias = tf.zeros([2, 1, 1, 16])
    unit = 2 * 3 * 16 * 16 * 4

    def reads(attend):
        step = stacked_step(lambda h: attend(h, h, h), 3)
        square = [r for r in backward_reads(step, v) if r[2] == (2, 3, 16, 16)]
        return tensor_bytes(square) / unit

    ours = reads(lambda q, k, v: attention_with_dropout(q, k, v, bias, 0.5, 0.1, SEED))
    assert ours == 3 * 1.25
    assert reads(lambda q, k, v: _op_by_op(q, k, v, bias)) == 3 * 2.25
