"""`load_encoder` and friends: one entry point for every checkpoint source of SPEC section 5.

Sources, recognised from their files in this order:
1. a pretrained preset name (`PRETRAINED_PRESETS`, e.g. "minilm_l6_h384_uncased");
2. a `.keras` file;
3. a directory written by `save_encoder` (holds `encoder.weights.h5`);
4. a keras-hub `BertBackbone` preset (`config.json` naming `keras_hub>BertBackbone` +
   `model.weights.h5`);
5. a Hugging Face BERT directory (holds `model.safetensors` or its sharded index);
6. a TF Hub-style encoder SavedModel (holds `saved_model.pb`; tf-models-official's
   `export_tfhub`);
7. a TF checkpoint, a directory (`bert_config.json` + `*.index`) or the prefix itself: an
   object-based one holding a Model Garden `BertEncoder` is a Model Garden TF2 checkpoint,
   any other a google-research/bert TF1 checkpoint.
"""

from __future__ import annotations

import logging
import os

from keras_bert import fileio
from keras_bert.checkpoints import (
    google,
    huggingface,
    keras_format,
    keras_hub_preset,
    model_garden,
    tfhub,
)
from keras_bert.checkpoints.presets import PRETRAINED_PRESETS, resolve_preset
from keras_bert.checkpoints.source import (
    CheckpointError,
    assign,
    encoder_variables,
    pretrainer_head_variables,
)
from keras_bert.config import PRESETS
from keras_bert.models.bert_encoder import BertEncoder

logger = logging.getLogger(__name__)

HEAD_IGNORE_REASON = (
    "pretraining head, not part of a bare BertEncoder (load it with load_pretrainer_weights)"
)


READERS = {
    "huggingface": huggingface.read_hf_checkpoint,
    "google": google.read_google_checkpoint,
    "model_garden": model_garden.read_model_garden_checkpoint,
    "tfhub_saved_model": tfhub.read_tfhub_saved_model,
    "keras_hub": keras_hub_preset.read_keras_hub_preset,
}


def _tf_checkpoint_format(path: str) -> str:
    """ "model_garden" for an object-based checkpoint holding a Model Garden encoder, else
    "google" (also when no checkpoint is found: the google reader names what is missing)."""
    try:
        prefix = google.find_checkpoint_prefix(path)
    except FileNotFoundError:
        return "google"
    return "model_garden" if model_garden.is_model_garden_prefix(prefix) else "google"


def detect_format(name_or_path) -> tuple[str, str]:
    """Returns (format, path): format is "keras_file", "keras_bert", "keras_hub",
    "huggingface", "tfhub_saved_model", "model_garden" or "google".

    Raises:
        ValueError: for a size-only preset of `keras_bert.config.PRESETS` (no weights).
        FileNotFoundError: naming the path, and what a checkpoint directory should hold.
    """
    name_or_path = os.fspath(name_or_path)
    if name_or_path in PRETRAINED_PRESETS:
        return "huggingface", resolve_preset(name_or_path)
    if name_or_path in PRESETS:
        raise ValueError(
            f"{name_or_path!r} is a size preset with no pretrained weights; build it with "
            f"BertEncoder.from_config_object(BertConfig.from_preset({name_or_path!r})). "
            f"Pretrained presets: {sorted(PRETRAINED_PRESETS)}"
        )
    path = name_or_path
    if path.endswith(".keras"):
        return "keras_file", path
    # A TF checkpoint prefix first: on `ram://` any prefix of a file's name reads as a directory.
    if fileio.exists(path + ".index") and not fileio.isdir(path + ".index"):
        return _tf_checkpoint_format(path), path
    if fileio.isdir(path):
        if keras_format.is_keras_bert_dir(path):
            return "keras_bert", path
        if keras_hub_preset.is_keras_hub_preset(path):
            return "keras_hub", path
        if any(
            fileio.exists(fileio.join(path, f))
            for f in (huggingface.WEIGHTS_FILE, huggingface.WEIGHTS_INDEX_FILE)
        ):
            return "huggingface", path
        if tfhub.is_saved_model_dir(path):
            return "tfhub_saved_model", path
        if fileio.exists(fileio.join(path, google.CONFIG_FILE)) or any(
            f.endswith(".index") for f in fileio.listdir(path)
        ):
            return _tf_checkpoint_format(path), path
        if fileio.exists(fileio.join(path, huggingface.CONFIG_FILE)):
            huggingface.weights_files(path)  # raises, naming model.safetensors
        raise FileNotFoundError(
            f"no checkpoint found in directory {path}: expected {keras_format.WEIGHTS_FILE} "
            f"(keras-bert), {keras_hub_preset.WEIGHTS_FILE} + {keras_hub_preset.CONFIG_FILE} "
            f"(keras-hub preset), {huggingface.WEIGHTS_FILE} + {huggingface.CONFIG_FILE} "
            f"(Hugging Face), {tfhub.SAVED_MODEL_FILE} (TF Hub SavedModel) or "
            f"{google.CHECKPOINT_PREFIX}.index + {google.CONFIG_FILE} (google-research/bert or "
            "Model Garden)"
        )
    if fileio.exists(path + ".index"):
        return _tf_checkpoint_format(path), path
    if ".ckpt" in fileio.basename(path):
        raise FileNotFoundError(f"TF checkpoint not found: {path}.index")
    raise FileNotFoundError(
        f"checkpoint not found: {path!r} is neither a pretrained preset "
        f"({sorted(PRETRAINED_PRESETS)}) nor an existing file, directory or TF checkpoint prefix"
    )


def read_checkpoint(name_or_path):
    """Reads any external checkpoint (every format but our own) into a `SourceWeights`.

    Useful to inspect the ledger: `.used()` (source variable -> canonical name) and
    `.ignored` (source variable -> reason).

    Raises:
        ValueError: for keras-bert directories and `.keras` files, which hold Keras models.
        FileNotFoundError, CheckpointError: as `load_encoder`.
    """
    fmt, path = detect_format(name_or_path)
    if fmt in READERS:
        return READERS[fmt](path)
    raise ValueError(f"{path} is a keras-bert checkpoint; load it with load_encoder")


def load_encoder(name_or_path, hidden_activation=None, dtype=None, causal=None):
    """Returns a `BertEncoder` holding the weights of a checkpoint (see module docstring).

    Args:
        name_or_path: preset name, directory, TF checkpoint prefix or `.keras` file (str or
            PathLike).
        hidden_activation: optional override of the activation the source's config gives
            (e.g. "gelu_approximate" to match an implementation that always uses tanh GELU).
        dtype: optional Keras dtype policy name for the encoder ("float32", "mixed_bfloat16",
            ...); default: the global policy.
        causal: optional bool; None means as saved (False for published checkpoints).

    Returns:
        A built `BertEncoder`. The GELU form follows the source format: Hugging Face "gelu" is
        exact erf, google-research/bert "gelu" is the tanh form. Pretraining-head variables of
        the source are ignored and logged (INFO) with the other ignored variables.

    Raises:
        FileNotFoundError: naming the missing file (config, weights, checkpoint index).
        CheckpointError (a ValueError): listing missing or unexpected variables, or naming a
            variable whose shape does not fit.
        ImportError: for a preset whose package is not installed (with the pip command).
    """
    fmt, path = detect_format(name_or_path)
    if fmt == "keras_file":
        return keras_format.load_keras_file(
            path, hidden_activation=hidden_activation, dtype=dtype, causal=causal
        )
    if fmt == "keras_bert":
        return keras_format.load_saved_encoder(
            path, hidden_activation=hidden_activation, dtype=dtype, causal=causal
        )
    source = read_checkpoint(path)
    config = source.config
    kwargs = {} if dtype is None else {"dtype": dtype}
    encoder = BertEncoder.from_config_object(
        config, causal=bool(causal), hidden_activation=hidden_activation, **kwargs
    )
    encoder.build()
    assign(encoder_variables(encoder), source.encoder, source.source_names, source.weights_file)
    ignored = dict(source.ignored)
    ignored.update({source.source_names[c]: HEAD_IGNORE_REASON for c in source.heads})
    logger.info(
        "loaded %d variables from %s (%s); ignored %d: %s",
        len(source.encoder),
        source.weights_file,
        source.format,
        len(ignored),
        ignored,
    )
    return encoder


def load_pretrainer_weights(pretrainer, name_or_path) -> None:
    """Loads encoder and pretraining heads of a HF or google-research checkpoint in place.

    Args:
        pretrainer: a `BertPretrainer` whose encoder config matches the checkpoint's sizes.
        name_or_path: as `load_encoder` (Hugging Face or google-research sources only).

    Raises:
        CheckpointError: if the checkpoint has no masked-LM head (or no NSP head while the
            pretrainer uses one), or on any name or shape mismatch.
    """
    source = read_checkpoint(name_or_path)
    if not pretrainer.built:
        pretrainer.build()
    heads = pretrainer_head_variables(pretrainer)
    missing = sorted(set(heads) - set(source.heads))
    if missing:
        raise CheckpointError(
            f"{source.weights_file}: no weights for the pretraining heads "
            f"{missing} (the checkpoint holds a bare encoder?)"
        )
    arrays = {k: v for k, v in source.heads.items() if k in heads}
    targets = dict(encoder_variables(pretrainer.encoder), **heads)
    assign(targets, dict(source.encoder, **arrays), source.source_names, source.weights_file)


def resolve_vocab_file(name_or_path) -> str:
    """Path of the `vocab.txt` belonging to a checkpoint (any source of `load_encoder`).

    Raises:
        FileNotFoundError: naming the vocab path looked for.
    """
    fmt, path = detect_format(name_or_path)
    directory = google.directory_of(path)
    relative = {"keras_hub": keras_hub_preset.VOCAB_ASSET, "tfhub_saved_model": tfhub.VOCAB_ASSET}
    vocab = fileio.join(directory, relative.get(fmt, "vocab.txt"))
    if not fileio.exists(vocab):
        raise FileNotFoundError(f"vocab file not found: {vocab}")
    return vocab


def resolve_do_lower_case(name_or_path, default=None) -> bool:
    """Whether the checkpoint's vocab expects lower-cased, accent-stripped text.

    Sources: Hugging Face `tokenizer_config.json` "do_lower_case"; keras-bert
    `keras_bert_checkpoint.json`; keras-hub `tokenizer.json` "lowercase"; a TF Hub SavedModel's
    `do_lower_case` variable; google-research/bert and Model Garden: the directory name
    ("uncased" -> True, "cased" -> False), as in google-research/bert `tokenization.validate_case_matches_checkpoint`.

    Args:
        default: returned when the source does not say; None means raise instead.

    Raises:
        ValueError: when the source does not say and `default` is None (pass --do_lower_case).
    """
    fmt, path = detect_format(name_or_path)
    directory = google.directory_of(path)
    value = None
    if fmt == "huggingface":
        value = huggingface.read_do_lower_case(directory)
    elif fmt in ("keras_bert", "keras_file"):
        value = keras_format.read_metadata(directory).get("do_lower_case")
    elif fmt == "keras_hub":
        value = keras_hub_preset.read_do_lower_case(directory)
    elif fmt == "tfhub_saved_model":
        value = tfhub.read_do_lower_case(directory)
    if value is None:
        value = google.infer_do_lower_case(path)
    if value is None:
        value = default
    if value is None:
        raise ValueError(
            f"cannot tell whether {name_or_path} is cased or uncased; set "
            "do_lower_case (--do_lower_case) explicitly"
        )
    return bool(value)
