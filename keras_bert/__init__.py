"""keras-bert: BERT (Devlin et al. 2018) in TensorFlow / Keras 3.

Public API (SPEC section 4a): `BertConfig`, `BertEncoder`, `from_pretrained`, `load_task`,
`tasks` (`Task`, `TextClassifier`, ...), `tokenization`.

Importing the package loads nothing else (PEP 562): each name above is imported the first time it
is read, so `import keras_bert.fileio` (the server, a LiteRT-only process) loads neither Keras nor
a task.
"""

import importlib
import warnings

# google-api-core (through tf-models-official) warns at import that grpcio < 1.83 lacks
# post-quantum TLS. The pinned set holds grpcio 1.81 because apache-beam 2.77 needs protobuf < 7
# (docs/beam.md); the warning says nothing a user of a recipe can act on.
warnings.filterwarnings("ignore", message=r".*Post-Quantum Cryptography.*", category=FutureWarning)

__version__ = "0.1.0"

# Public name -> (module, attribute in it; None: the module itself).
_PUBLIC = {
    "BertConfig": ("keras_bert.config", "BertConfig"),
    "PRESETS": ("keras_bert.config", "PRESETS"),
    "BertEncoder": ("keras_bert.models.bert_encoder", "BertEncoder"),
    "load_task": ("keras_bert.tasks.loading", "load_task"),
    "tasks": ("keras_bert.tasks", None),
    "tokenization": ("keras_bert.tokenization", None),
}


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'keras_bert' has no attribute {name!r}")
    module_name, attribute = _PUBLIC[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # the next read is an ordinary attribute
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))


def from_pretrained(name_or_path, **kwargs):
    """Returns a `BertEncoder` with pretrained weights; see `keras_bert.checkpoints.load_encoder`."""
    from keras_bert.checkpoints.loader import load_encoder

    return load_encoder(name_or_path, **kwargs)


__all__ = [
    "BertConfig",
    "BertEncoder",
    "PRESETS",
    "from_pretrained",
    "load_task",
    "tasks",
    "tokenization",
]
