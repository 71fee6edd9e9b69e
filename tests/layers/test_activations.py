"""The GELUs: the values of `tf.nn.gelu`, its gradient, and a backward pass that keeps only x."""

import numpy as np
import pytest
import scipy.special
import tensorflow as tf

from keras_bert.layers.activations import gelu, gelu_approximate
from tests.memory import backward_reads, stacked_step

FORMS = [(gelu, False), (gelu_approximate, True)]


@pytest.mark.parametrize("fn, approximate", FORMS)
@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_values_are_tf_nn_gelu_in_float32(fn, approximate, dtype):
    x = tf.cast(tf.linspace(-8.0, 8.0, 20001), dtype)
    want = tf.cast(tf.nn.gelu(tf.cast(x, tf.float32), approximate=approximate), dtype)
    got = fn(x)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("fn, approximate", FORMS)
@pytest.mark.parametrize("jit_compile", [False, True])
def test_gradient_is_the_derivative_of_tf_nn_gelu(fn, approximate, jit_compile):
    x = tf.linspace(-8.0, 8.0, 20001)

    @tf.function(jit_compile=jit_compile)
    def grads(x):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            ours = fn(x)
            ref = tf.nn.gelu(x, approximate=approximate)
        return tape.gradient(ours, x), tape.gradient(ref, x)

    got, want = grads(x)
    # The slope is in [-0.17, 1.13]; the analytic form and autodiff's chain agree to float32
    # rounding of the intermediate terms.
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=5e-6)


def _derivative_in_numpy(x, approximate):
    if not approximate:
        return 0.5 * (1 + scipy.special.erf(x / np.sqrt(2))) + x * np.exp(-(x**2) / 2) / np.sqrt(
            2 * np.pi
        )
    c, a = np.sqrt(2 / np.pi), 0.044715
    t = np.tanh(c * (x + a * x**3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * c * (1 + 3 * a * x**2)


@pytest.mark.parametrize("fn, approximate", FORMS)
def test_float64_stays_float64(fn, approximate):
    x = tf.constant(np.linspace(-6.0, 6.0, 1001), tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(x)
        ours = fn(x)
    assert ours.dtype == tf.float64
    np.testing.assert_array_equal(ours.numpy(), tf.nn.gelu(x, approximate=approximate).numpy())
    # Against the derivative in numpy float64 (TensorFlow's own erf gradient is 5.7e-9 off here).
    np.testing.assert_allclose(
        tape.gradient(ours, x).numpy(), _derivative_in_numpy(x.numpy(), approximate), atol=1e-13
    )


def test_bfloat16_gradient_is_the_float32_one_rounded():
    x = tf.cast(tf.linspace(-6.0, 6.0, 4001), tf.bfloat16)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = gelu(x)
    got = tape.gradient(y, x)
    xf = tf.cast(x, tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(xf)
        yf = tf.nn.gelu(xf, approximate=False)
    want = tf.cast(tape.gradient(yf, xf), tf.bfloat16)
    assert got.dtype == tf.bfloat16
    np.testing.assert_allclose(
        tf.cast(got, tf.float32).numpy(), tf.cast(want, tf.float32).numpy(), rtol=0, atol=1e-2
    )


@pytest.mark.parametrize("approximate, op_by_op_reads", [(False, 3), (True, 4)])
def test_the_backward_pass_reads_only_the_input(approximate, op_by_op_reads):
    # Three layers h = gelu(h @ w) (w constant): the lean GELU's gradient reads its input, one
    # [64, 32] tensor a layer; tf.nn.gelu differentiated op by op reads three (erf: x / sqrt 2,
    # 0.5 x and 1 + erf) or four (tanh).
    lean = gelu_approximate if approximate else gelu
    x = tf.random.stateless_normal([64, 32], seed=[1, 2])
    w = tf.random.stateless_normal([32, 32], seed=[1, 3])

    def reads(activation):
        step = stacked_step(lambda h: activation(h @ w), 3)
        return len([r for r in backward_reads(step, x) if r[2] == (64, 32)])

    assert reads(lean) == 3
    assert reads(lambda v: tf.nn.gelu(v, approximate=approximate)) == 3 * op_by_op_reads
