"""keras-bert: BERT (Devlin et al. 2018) in TensorFlow / Keras 3.

Public API (SPEC section 4a): `BertConfig`, `BertEncoder`, `from_pretrained`, `tokenization`.
"""

from keras_bert.config import PRESETS, BertConfig
from keras_bert.models.bert_encoder import BertEncoder

__version__ = "0.1.0"


def from_pretrained(name_or_path, **kwargs):
    """Returns a `BertEncoder` with pretrained weights; see `keras_bert.checkpoints.load_encoder`."""
    from keras_bert.checkpoints import load_encoder
    return load_encoder(name_or_path, **kwargs)


def __getattr__(name):  # lazy: `keras_bert.tokenization` pulls in tensorflow_text
    if name in ("tokenization", "checkpoints", "data", "training", "evaluation", "heads",
                "layers", "models"):
        import importlib
        return importlib.import_module(f"keras_bert.{name}")
    raise AttributeError(f"module 'keras_bert' has no attribute {name!r}")


__all__ = ["BertConfig", "BertEncoder", "PRESETS", "from_pretrained", "tokenization"]
