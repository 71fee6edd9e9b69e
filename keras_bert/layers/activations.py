"""Hidden activations by name, so configs stay plain strings.

"gelu" is the exact erf form, x * Phi(x) (Hendrycks & Gimpel 2016); Hugging Face BERT
checkpoints use it under that name. "gelu_approximate" is the tanh form
0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), which google-research/bert `modeling.py` calls
"gelu". The two differ by up to about 5e-4 per element (PITFALLS.md, Checkpoints).
"""

import keras


def gelu(x):
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
