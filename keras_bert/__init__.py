"""keras-bert: BERT (Devlin et al. 2018) in TensorFlow / Keras 3.

Public API (SPEC section 4a): `BertConfig`, `BertEncoder`, `from_pretrained`, `load_task`,
`tasks` (`Task`, `TextClassifier`, ...), `tokenization`.
"""

from keras_bert import tasks
from keras_bert import tokenization
from keras_bert.checkpoints.loader import load_encoder
from keras_bert.config import PRESETS, BertConfig
from keras_bert.models.bert_encoder import BertEncoder
from keras_bert.tasks.loading import load_task

__version__ = "0.1.0"


def from_pretrained(name_or_path, **kwargs):
    """Returns a `BertEncoder` with pretrained weights; see `keras_bert.checkpoints.load_encoder`."""
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
