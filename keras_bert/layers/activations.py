"""Hidden activations by name, so configs stay plain strings.

"gelu" is the exact erf form, x * Phi(x) (Hendrycks & Gimpel 2016); Hugging Face BERT
checkpoints use it under that name. "gelu_approximate" is the tanh form
0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), which google-research/bert `modeling.py` calls
"gelu". The two differ by up to about 5e-4 per element (PITFALLS.md, Checkpoints).
"""

import keras
from keras import ops


def gelu(x):
    """Exact erf GELU; bfloat16/float16 inputs are computed in float32 and cast back.

    TensorFlow's CPU kernel of erf in bfloat16 is not vectorised: on [32, 128, 1536] it took
    74 ms against 15 ms in float32 (benchmarks/RESULTS.md), more than the bfloat16 matmul that
    feeds it. Upcasting is also the more accurate result.
    """
    dtype = keras.backend.standardize_dtype(x.dtype)
    if dtype in ("bfloat16", "float16"):
        return ops.cast(keras.activations.gelu(ops.cast(x, "float32"), approximate=False), dtype)
    return keras.activations.gelu(x, approximate=False)


def gelu_approximate(x):
    return keras.activations.gelu(x, approximate=True)


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
