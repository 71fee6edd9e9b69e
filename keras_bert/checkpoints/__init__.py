"""Checkpoint converters and loaders (SPEC section 5).

`load_encoder(name_or_path)` returns a `BertEncoder` from a pretrained preset
("minilm_l6_h384_uncased"), a Hugging Face BERT directory, a google-research/bert TF1 checkpoint,
a Model Garden TF2 encoder checkpoint, a TF Hub-style encoder SavedModel, a keras-hub
BertBackbone preset, a keras-bert checkpoint directory (`save_encoder`) or a `.keras` file,
detected from the files (`detect_format`). Each external format maps names in one table
(`HF_NAME_TABLE`, `GOOGLE_NAME_TABLE`, `model_garden.model_garden_table`, `TFHUB_NAME_TABLE`,
`KERAS_HUB_NAME_TABLE`) and uses every source variable exactly once or lists it as ignored with
a reason (`read_checkpoint(...).used()` / `.ignored`). `save_encoder(encoder, directory,
format=...)` writes our format (default), a Hugging Face directory, a keras-hub preset or a
google-research TF1 checkpoint.
"""

from keras_bert.checkpoints.google import GOOGLE_IGNORED, GOOGLE_NAME_TABLE
from keras_bert.checkpoints.huggingface import HF_IGNORED, HF_NAME_TABLE
from keras_bert.checkpoints.loader import (
    READERS,
    detect_format,
    load_encoder,
    load_pretrainer_weights,
    read_checkpoint,
    resolve_do_lower_case,
    resolve_vocab_file,
)
from keras_bert.checkpoints.presets import PRETRAINED_PRESETS, resolve_preset
from keras_bert.checkpoints.saver import WRITERS, save_encoder
from keras_bert.checkpoints.source import CheckpointError, SourceWeights, encoder_variables

__all__ = [
    "CheckpointError",
    "GOOGLE_IGNORED",
    "GOOGLE_NAME_TABLE",
    "HF_IGNORED",
    "HF_NAME_TABLE",
    "PRETRAINED_PRESETS",
    "READERS",
    "SourceWeights",
    "WRITERS",
    "detect_format",
    "encoder_variables",
    "load_encoder",
    "load_pretrainer_weights",
    "read_checkpoint",
    "resolve_do_lower_case",
    "resolve_preset",
    "resolve_vocab_file",
    "save_encoder",
]
