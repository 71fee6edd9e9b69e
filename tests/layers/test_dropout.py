"""BertDropout: the 16-bit mask against the Philox words it is defined from, rate, scale, grads."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.layers.dropout import (
    BertDropout,
    apply_keep_mask,
    dropout_16bit,
    keep_mask_16bit,
)
from tests.memory import allocator_bytes

SEED = tf.constant([7, 11], tf.int32)


def reference_mask(n, rate, seed):
    """The definition, in numpy: uint16 halves (low first) of the Philox words, >= k."""
    words = tf.random.stateless_uniform(
        [(n + 1) // 2], seed=seed, minval=None, maxval=None, dtype=tf.uint32
    ).numpy()
    halves = np.stack([words & 0xFFFF, words >> 16], axis=-1).reshape(-1)[:n]
    return halves >= round(rate * 65536)


@pytest.mark.parametrize("shape", [(3, 5, 7), (4, 6), (1,)])  # odd and even element counts
def test_mask_and_scale_follow_the_definition_exactly(shape):
    x = tf.constant(np.arange(1, np.prod(shape) + 1, dtype=np.float32).reshape(shape))
    y = dropout_16bit(x, 0.1, SEED).numpy()
    keep = reference_mask(int(np.prod(shape)), 0.1, SEED).reshape(shape)
    # k = round(0.1 * 65536) = 6554; kept values scaled by 65536 / (65536 - 6554).
    np.testing.assert_array_equal(y, np.where(keep, x.numpy() * np.float32(65536 / 58982), 0))


def test_rate_and_expectation_on_a_large_tensor():
    x = tf.ones([1000, 1000])
    y = dropout_16bit(x, 0.1, SEED).numpy()
    kept = (y != 0).mean()
    # 1e6 Bernoulli draws: std 3e-4; 0.1 is realised as 6554 / 65536 = 0.10000610.
    assert abs(kept - (1 - 6554 / 65536)) < 1.5e-3
    assert abs(y.mean() - 1.0) < 2e-3


def test_bfloat16_keeps_the_requested_rate():
    y = dropout_16bit(tf.ones([1000, 1000], tf.bfloat16), 0.1, SEED)
    kept = float(tf.reduce_mean(tf.cast(y != 0, tf.float32)))
    assert abs(kept - 0.9) < 1.5e-3  # Keras's bfloat16 mask keeps ~0.8985 (rate rounded)


def test_xla_gives_the_same_mask():
    x = tf.random.stateless_normal([5, 9, 3], seed=[1, 2])
    eager = tf.function(lambda x: dropout_16bit(x, 0.25, SEED))(x)
    xla = tf.function(lambda x: dropout_16bit(x, 0.25, SEED), jit_compile=True)(x)
    np.testing.assert_array_equal(eager.numpy(), xla.numpy())


def test_gradient_is_the_mask_times_the_scale():
    x = tf.random.stateless_normal([64, 33], seed=[3, 4])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = dropout_16bit(x, 0.1, SEED)
    grad = tape.gradient(y, x).numpy()
    keep = reference_mask(64 * 33, 0.1, SEED).reshape(64, 33)
    np.testing.assert_array_equal(grad, np.where(keep, np.float32(65536 / 58982), 0))


def test_layer_is_identity_at_inference_and_fresh_each_training_call():
    layer = BertDropout(0.1, seed=5)
    x = tf.ones([200, 50])
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())
    a, b = layer(x, training=True).numpy(), layer(x, training=True).numpy()
    assert (a == 0).any() and not np.array_equal(a == 0, b == 0)
    again = BertDropout(0.1, seed=5)
    np.testing.assert_array_equal(again(x, training=True).numpy(), a)  # same seed, same masks


def test_noise_shape_and_extreme_rates_fall_back_to_keras():
    x = tf.ones([8, 16])
    shared = BertDropout(0.5, noise_shape=(8, 1), seed=1)(x, training=True).numpy()
    assert all(len(set(row)) == 1 for row in shared)  # one decision per row
    np.testing.assert_array_equal(BertDropout(0.0)(x, training=True).numpy(), x.numpy())
    # Keras's path: every element kept (P(any drop) ~ 1e-5) and scaled by 1 / (1 - 1e-7).
    np.testing.assert_allclose(
        BertDropout(1e-7, seed=1)(x, training=True).numpy(),
        np.full((8, 16), 1 / (1 - 1e-7), np.float32),
        rtol=1e-7,
    )


@pytest.mark.parametrize("rate", [0.0, 1e-6, 1 - 1e-6, 1.0])
def test_dropout_16bit_refuses_rates_it_cannot_represent(rate):
    with pytest.raises(ValueError, match="rounds to"):
        dropout_16bit(tf.ones([4]), rate, SEED)


def test_config_round_trip():
    layer = BertDropout(0.2, seed=3, name="d")
    clone = BertDropout.from_config(layer.get_config())
    assert isinstance(clone, BertDropout) and clone.rate == 0.2 and clone.name == "d"
    assert keras.saving.get_registered_object("keras_bert>BertDropout") is BertDropout


def test_keep_mask_and_apply_are_dropout_16bit():
    x = tf.random.stateless_normal([3, 4, 5], seed=[1, 2])
    keep = keep_mask_16bit(tf.shape(x), 0.1, SEED)
    np.testing.assert_array_equal(keep.numpy(), reference_mask(60, 0.1, SEED).reshape(3, 4, 5))
    np.testing.assert_array_equal(
        apply_keep_mask(x, keep, 0.1).numpy(), dropout_16bit(x, 0.1, SEED).numpy()
    )


def test_a_static_shape_leaves_no_tensor_behind():
    # tf.where(keep, x, zeros_like(x)) of a static shape was folded into a constant the size of x
    # that the function kept from its first call on: 8 MiB for this 6 MiB input.
    x = tf.ones([1536, 1024])
    dropped = tf.function(lambda x: tf.reduce_sum(dropout_16bit(x, 0.1, SEED)))
    before = allocator_bytes()
    for _ in range(3):
        dropped(x)
    assert allocator_bytes() - before < 64 * 1024
