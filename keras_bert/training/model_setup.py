"""The model source of a fine-tuning run: vocabulary and casing, the encoder.

What the model is (vocabulary, casing, sequence length) is decided here once, from the
`FinetuneArgs` model-source fields, and stored in the task (its preprocessor and encoder); export
and serving read it from the task.
"""

from __future__ import annotations

import logging

from keras_bert import checkpoints
from keras_bert.config import BertConfig
from keras_bert.models.bert_encoder import BertEncoder

logger = logging.getLogger(__name__)


def checkpoint_casing(init_checkpoint) -> bool | None:
    """The do_lower_case a checkpoint's vocabulary expects, or None when nothing says.

    Sources (`checkpoints.resolve_do_lower_case`): the preset table, Hugging Face
    `tokenizer_config.json`, keras-bert metadata, google-research/bert directory names such as
    `uncased_L-12_H-768_A-12`.
    """
    try:
        return checkpoints.resolve_do_lower_case(init_checkpoint, default=None)
    except (ValueError, FileNotFoundError):  # unknown casing, or no such checkpoint (loading says)
        return None


def check_casing(do_lower_case, init_checkpoint) -> bool:
    """The do_lower_case to use: the explicit one, checked against the checkpoint's known casing.

    As google-research/bert `tokenization.validate_case_matches_checkpoint`: an explicit value that
    contradicts a checkpoint of known casing is an error (an uncased vocabulary without
    lower-casing turns capitalised words into [UNK]). Unknown casing: a warning, and the explicit
    value (default True).

    Raises:
        ValueError: "--do_lower_case=False contradicts --init_checkpoint=X: that checkpoint is
            uncased (do_lower_case=True); drop --do_lower_case or pass --do_lower_case=True".
    """
    known = checkpoint_casing(init_checkpoint) if init_checkpoint else None
    if known is None:
        if init_checkpoint:
            logger.warning(
                "cannot tell whether --init_checkpoint=%s is cased or uncased; using "
                "do_lower_case=%s",
                init_checkpoint,
                True if do_lower_case is None else do_lower_case,
            )
        return True if do_lower_case is None else bool(do_lower_case)
    if do_lower_case is not None and bool(do_lower_case) != known:
        kind = "uncased" if known else "cased"
        raise ValueError(
            f"--do_lower_case={bool(do_lower_case)} contradicts --init_checkpoint="
            f"{init_checkpoint}: that checkpoint is {kind} (do_lower_case={known}); "
            f"drop --do_lower_case or pass --do_lower_case={known}"
        )
    return known


def resolve_vocab(config) -> tuple[str, bool]:
    """(vocab_file, do_lower_case) from the flags or the checkpoint, casing checked.

    Raises:
        ValueError: random init without --vocab_file, or a casing contradiction (`check_casing`).
        FileNotFoundError: a checkpoint without vocab.txt.
    """
    lower = check_casing(config.do_lower_case, config.init_checkpoint)
    if config.vocab_file:
        return str(config.vocab_file), lower
    if not config.init_checkpoint:
        raise ValueError(
            "--vocab_file is required when the encoder is randomly initialised "
            "(--preset / --bert_config_file)"
        )
    return str(checkpoints.resolve_vocab_file(config.init_checkpoint)), lower


def build_encoder(config, vocab_size: int | None = None) -> BertEncoder:
    """BertEncoder: pretrained from init_checkpoint, else random from bert_config_file / preset.

    Args:
        vocab_size: entries in the vocab file used. A random encoder gets this vocab_size (logged
            when it differs from the config's); a pretrained one must have at least this many rows.

    Raises:
        ValueError: no model source, or a vocab larger than the pretrained encoder's vocab_size.
    """
    if config.init_checkpoint:
        encoder = checkpoints.load_encoder(config.init_checkpoint)
        rows = encoder.bert_config.vocab_size
        if vocab_size is not None and vocab_size > rows:
            source = config.vocab_file or "(the checkpoint's)"
            raise ValueError(
                f"vocab file {source} has {vocab_size} entries but the encoder of "
                f"--init_checkpoint={config.init_checkpoint} has vocab_size {rows}: ids "
                f">= {rows} have no embedding; use the checkpoint's vocab"
            )
        return encoder
    if config.bert_config_file:
        cfg = BertConfig.from_json_file(config.bert_config_file)
    elif config.preset:
        cfg = BertConfig.from_preset(config.preset)
    else:
        raise ValueError("give --init_checkpoint, or --bert_config_file / --preset for random init")
    if vocab_size is not None and vocab_size != cfg.vocab_size:
        logger.info(
            "random encoder: vocab_size %d from %s instead of the config's %d",
            vocab_size,
            config.vocab_file,
            cfg.vocab_size,
        )
    return BertEncoder.from_config_object(cfg, vocab_size=vocab_size)
