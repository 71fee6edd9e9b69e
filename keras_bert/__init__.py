"""keras-bert: BERT (Devlin et al. 2018) in TensorFlow / Keras 3.

Public API (SPEC section 4a): `BertConfig`, `BertEncoder`, `from_pretrained`, `load_task`,
`tasks` (`Task`, `TextClassifier`, ...), `tokenization`.
"""

import warnings

# google-api-core (through tf-models-official) warns at import that grpcio < 1.83 lacks
# post-quantum TLS. The pinned set holds grpcio 1.81 because apache-beam 2.77 needs protobuf < 7
# (docs/beam.md); the warning says nothing a user of a recipe can act on.
warnings.filterwarnings("ignore", message=r".*Post-Quantum Cryptography.*", category=FutureWarning)

from keras_bert import tasks  # noqa: E402
from keras_bert import tokenization  # noqa: E402
from keras_bert.checkpoints.loader import load_encoder  # noqa: E402
from keras_bert.config import PRESETS, BertConfig  # noqa: E402
from keras_bert.models.bert_encoder import BertEncoder  # noqa: E402
from keras_bert.tasks.loading import load_task  # noqa: E402

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
