"""Hidden activations by name, so configs stay plain strings.

"gelu" is the exact erf form, x * Phi(x) (Hendrycks & Gimpel 2016); Hugging Face BERT
checkpoints use it under that name. "gelu_approximate" is the tanh form
0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), which google-research/bert `modeling.py` calls
"gelu". The two differ by up to about 5e-4 per element (PITFALLS.md, Checkpoints).

Both GELUs keep only their input for the backward pass. Differentiated op by op, the composite
(`tf.nn.gelu`: a scale, erf or tanh, an add, two products) keeps three (erf) or four (tanh)
tensors of the feed-forward width per block until the backward pass: in a MiniLM-L6 SQuAD step
(batch 32 x 384) about 0.7 GB of the peak (docs/results/memory.md, "Where a fine-tuning step's
memory goes"). Here the derivative is computed from the kept input in the backward pass, after the
incoming gradient (a control dependency, so TensorFlow's executor cannot run it early and keep
its result through the forward pass).
"""

import math

import keras
import tensorflow as tf

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_SCALE = math.sqrt(2.0 / math.pi)  # tf.nn.gelu's 0.7978845608028654
_TANH_CUBIC = 0.044715


def _exact_derivative(x):
    """d/dx x Phi(x) = Phi(x) + x phi(x), in x's dtype."""
    cdf = 0.5 * (1.0 + tf.math.erf(x * _SQRT_HALF))
    return cdf + x * (tf.exp(-0.5 * tf.square(x)) * _INV_SQRT_2PI)


def _tanh_derivative(x):
    """d/dx 0.5 x (1 + tanh(u)), u = c (x + a x^3): 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2)."""
    t = tf.tanh(_TANH_SCALE * (x + _TANH_CUBIC * x * tf.square(x)))
    du = _TANH_SCALE * (1.0 + 3.0 * _TANH_CUBIC * tf.square(x))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - tf.square(t)) * du


_UPCAST = (tf.bfloat16, tf.float16)


def _lean_gelu(approximate: bool, derivative):
    """GELU whose gradient keeps only the input `x`; bfloat16 / float16 inputs are computed in
    float32 and the result cast back, float32 and float64 in their own dtype."""

    @tf.custom_gradient
    def fn(x):
        compute = tf.float32 if x.dtype in _UPCAST else x.dtype
        y = tf.nn.gelu(tf.cast(x, compute), approximate=approximate)

        def grad(dy):
            with tf.control_dependencies([dy]):  # computed in the backward pass, not before
                slope = derivative(tf.cast(x, compute))
            return tf.cast(tf.cast(dy, compute) * slope, x.dtype)

        return tf.cast(y, x.dtype), grad

    return fn


_gelu_exact = _lean_gelu(False, _exact_derivative)
_gelu_tanh = _lean_gelu(True, _tanh_derivative)


def gelu(x):
    """Exact erf GELU; bfloat16/float16 inputs are computed in float32 and cast back.

    TensorFlow's CPU kernel of erf in bfloat16 is not vectorised: on [32, 128, 1536] it took
    74 ms against 15 ms in float32 (docs/results/targets.md), more than the bfloat16 matmul that
    feeds it. Upcasting is also the more accurate result. The gradient keeps only `x` (module
    docstring).
    """
    return _gelu_exact(tf.convert_to_tensor(x))


def gelu_approximate(x):
    """The tanh form of GELU (google-research/bert's "gelu"), computed as `gelu`."""
    return _gelu_tanh(tf.convert_to_tensor(x))


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_approximate": gelu_approximate,
    "relu": keras.activations.relu,
    "silu": keras.activations.silu,
    "tanh": keras.activations.tanh,
}


def get_activation(name: str):
    """Returns the activation function for `name`.

    Raises:
        ValueError: if `name` is not one of "gelu", "gelu_approximate", "relu", "silu", "tanh".
    """
    if name not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; expected one of {sorted(_ACTIVATIONS)}")
    return _ACTIVATIONS[name]
