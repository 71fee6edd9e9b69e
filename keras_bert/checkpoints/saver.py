"""`save_encoder`: one entry point that writes a `BertEncoder` in any supported format.

Formats (each writer lives beside its reader, so one module owns one format's names):
- "keras_bert" (default): our directory (`keras_format.save_encoder`), what the recipes write;
- "huggingface": `config.json` + `model.safetensors` with transformers' BertModel names
  (`huggingface.write_hf_dir`);
- "keras_hub": a keras-hub BertBackbone preset (`keras_hub_preset.write_keras_hub_preset`);
- "google": a google-research/bert TF1 checkpoint (`google.write_google_checkpoint`).
Every format is read back by `load_encoder`.
"""

from __future__ import annotations

import os

from keras_bert import fileio
from keras_bert.checkpoints import google, huggingface, keras_format, keras_hub_preset
from keras_bert.models.bert_encoder import BertEncoder

WRITERS = {
    "keras_bert": keras_format.save_encoder,
    "huggingface": huggingface.write_hf_dir,
    "keras_hub": keras_hub_preset.write_keras_hub_preset,
    "google": google.write_google_checkpoint,
}


def save_encoder(
    encoder, directory, vocab_file=None, do_lower_case=None, *, format: str = "keras_bert"
) -> str:
    """Writes `encoder` to `directory` in `format`; returns the directory (str).

    Args:
        encoder: a `BertEncoder` (built if it is not).
        directory: output directory, created if needed; files of the format are overwritten.
        vocab_file: optional WordPiece vocabulary to store with it (each format's own place).
        do_lower_case: optional casing to record where the format can (not "google", which
            keeps it only in the directory name by convention).
        format: one of `WRITERS`: "keras_bert", "huggingface", "keras_hub", "google".

    Raises:
        ValueError: for an unknown format, or an encoder setting the format cannot hold,
            each named with its value ("format='keras_hub' cannot hold layer_norm_epsilon=
            1e-05: ..."; the tables `HF_LIMITS`, `KERAS_HUB_LIMITS`, `GOOGLE_LIMITS`, checked
            by `limits.check_format_holds`); nothing is written then.
        TypeError: if `encoder` is not a `BertEncoder`.
        FileNotFoundError: if `vocab_file` does not exist.
    """
    if format not in WRITERS:
        raise ValueError(f"unknown checkpoint format {format!r}; formats: {sorted(WRITERS)}")
    if not isinstance(encoder, BertEncoder):
        raise TypeError(f"save_encoder needs a BertEncoder, got {type(encoder).__name__}")
    if vocab_file is not None and not fileio.exists(vocab_file):
        raise FileNotFoundError(f"vocab file not found: {vocab_file}")
    if not encoder.built:
        encoder.build()
    return WRITERS[format](
        encoder, os.fspath(directory), vocab_file=vocab_file, do_lower_case=do_lower_case
    )
