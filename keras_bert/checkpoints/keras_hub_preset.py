"""keras-hub `BertBackbone` presets, both directions.

A preset directory as `BertBackbone.save_to_preset` writes it: `config.json` (the backbone's
Keras config, `"registered_name": "keras_hub>BertBackbone"`), `model.weights.h5`,
`metadata.json`, and, when a tokenizer was saved too, `tokenizer.json` and
`assets/tokenizer/vocabulary.txt`. keras-hub itself reads and writes the weights file
(`BertBackbone.from_preset` / `save_to_preset`), so its own layout rules apply; the name table
maps our canonical names to the backbone's variable paths. keras-hub's BERT always applies the
tanh GELU (`keras_hub.src.utils.keras_utils.gelu_approximate`), LayerNorm epsilon 1e-12, one
dropout rate and initializer stddev 0.02; `KERAS_HUB_LIMITS` is what the writer refuses.
"""

from __future__ import annotations

import tempfile

import numpy as np

from keras_bert import fileio
from keras_bert.checkpoints.limits import check_format_holds, encoder_settings, fixed, same_as
from keras_bert.checkpoints import names
from keras_bert.checkpoints.source import (
    CheckpointError,
    apply_table,
    encoder_arrays,
    table_tensors,
)
from keras_bert.config import BertConfig

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
METADATA_FILE = "metadata.json"
TOKENIZER_FILE = "tokenizer.json"
VOCAB_ASSET = "assets/tokenizer/vocabulary.txt"
BACKBONE = "keras_hub>BertBackbone"
HIDDEN_ACTIVATION = "gelu_approximate"
LAYER_NORM_EPSILON = 1e-12
INITIALIZER_RANGE = 0.02

# What a BertBackbone preset cannot hold (keras_hub/src/models/bert/bert_backbone.py): its
# constructor takes sizes, `dropout`, `max_sequence_length` and `num_segments`, and fixes the
# rest. The vocabulary, layer, head, width, position and segment sizes all pass through.
KERAS_HUB_LIMITS = (
    fixed(
        "hidden_activation",
        HIDDEN_ACTIVATION,
        "keras-hub's BertBackbone always applies the tanh GELU (our 'gelu_approximate')",
    ),
    fixed("layer_norm_epsilon", LAYER_NORM_EPSILON, "keras-hub's BertBackbone fixes it at 1e-12"),
    same_as(
        "attention_dropout_rate",
        "dropout_rate",
        "keras-hub's BertBackbone has one dropout for the hidden states and the attention "
        "probabilities (it would keep dropout_rate={dropout_rate!r})",
    ),
    fixed(
        "initializer_range",
        INITIALIZER_RANGE,
        "keras-hub's BertBackbone fixes its initializer stddev at 0.02",
    ),
    fixed("causal", False, "keras-hub's BertBackbone attends in both directions"),
)

# BertBackbone constructor argument -> BertConfig field: the sizes both hold, read and written
# through this one table (keras-hub's single `dropout` is our `dropout_rate`).
BACKBONE_ARGUMENTS = {
    "vocabulary_size": "vocab_size",
    "num_layers": "num_layers",
    "num_heads": "num_heads",
    "hidden_dim": "hidden_size",
    "intermediate_dim": "intermediate_size",
    "max_sequence_length": "max_sequence_length",
    "num_segments": "type_vocab_size",
}

# canonical name -> BertBackbone variable path (`variable.path`); the rows are
# `names.NAME_ROWS`, shared by every format.
KERAS_HUB_NAME_TABLE = names.name_table("keras_hub")


def is_keras_hub_preset(directory: str) -> bool:
    """True if `directory` holds a keras-hub preset (config.json naming a keras_hub class)."""
    path = fileio.join(directory, CONFIG_FILE)
    if not (fileio.exists(path) and fileio.exists(fileio.join(directory, WEIGHTS_FILE))):
        return False
    try:
        registered = fileio.read_json(path).get("registered_name") or ""
    except (fileio.UserFileError, AttributeError):
        return False
    return registered.startswith("keras_hub>")


def config_from_preset(directory: str) -> BertConfig:
    """BertConfig from a BertBackbone preset's config.json (tanh GELU, epsilon 1e-12).

    Raises:
        CheckpointError: if the preset holds another keras-hub class.
    """
    values = fileio.read_json(fileio.join(directory, CONFIG_FILE))
    if values.get("registered_name") != BACKBONE:
        raise CheckpointError(
            f"{directory}: keras-hub preset of {values.get('registered_name')}, not {BACKBONE}"
        )
    c = values["config"]
    return BertConfig(
        **{field: c[argument] for argument, field in BACKBONE_ARGUMENTS.items()},
        hidden_activation=HIDDEN_ACTIVATION,
        dropout_rate=c.get("dropout", 0.1),
        attention_dropout_rate=c.get("dropout", 0.1),
        initializer_range=INITIALIZER_RANGE,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
    )


def keras_hub_backbone(config: BertConfig, **options):
    """keras-hub's own `BertBackbone` (new weights) at the sizes and dropout of `config`;
    `options` are further constructor arguments (`dtype=...`). The settings a BertBackbone fixes
    (`KERAS_HUB_LIMITS`) are not checked here: the preset writer checks them."""
    import keras_hub  # optional heavy dependency, needed only for this format

    arguments = {argument: getattr(config, field) for argument, field in BACKBONE_ARGUMENTS.items()}
    return keras_hub.models.BertBackbone(**arguments, dropout=config.dropout_rate, **options)


def read_keras_hub_preset(directory: str):
    """Reads a keras-hub BertBackbone preset into a `SourceWeights` (format "keras_hub").

    The backbone is loaded with keras-hub's own `BertBackbone.from_preset`; every one of its
    variables is used once (the ledger names their paths).

    Raises:
        CheckpointError: for another keras-hub class, or missing / unexpected variables.
    """
    import keras_hub  # optional heavy dependency, needed only for this format

    config = config_from_preset(directory)
    if fileio.is_local(directory):
        backbone = keras_hub.models.BertBackbone.from_preset(directory)
    else:  # keras-hub reads a local directory: a private local copy of the preset
        with tempfile.TemporaryDirectory(prefix="keras_bert_preset_") as local:
            fileio.copy_tree(directory, local)
            backbone = keras_hub.models.BertBackbone.from_preset(local)
    variables = {}
    for variable in backbone.weights:
        if variable.path in variables:
            raise CheckpointError(f"{directory}: two variables have the path {variable.path!r}")
        variables[variable.path] = variable
    return apply_table(
        fmt="keras_hub",
        weights_file=fileio.join(directory, WEIGHTS_FILE),
        config=config,
        names=variables,
        read=lambda n: np.asarray(variables[n].numpy()),
        table=KERAS_HUB_NAME_TABLE,
        ignore_rules=(),
    )


def read_do_lower_case(directory: str):
    """`lowercase` of the preset's saved BertTokenizer, or None without a tokenizer.json."""
    path = fileio.join(directory, TOKENIZER_FILE)
    if not fileio.exists(path):
        return None
    value = fileio.read_json(path).get("config", {}).get("lowercase")
    return None if value is None else bool(value)


def _vocabulary_lines(vocab_file) -> list[str]:
    """The tokens of a vocab.txt as keras-hub's BertTokenizer reads a local file (one a line,
    trailing whitespace stripped), from any URI."""
    return [line.rstrip() for line in fileio.text_lines(fileio.read_user_text(vocab_file))]


def write_keras_hub_preset(encoder, directory: str, vocab_file=None, do_lower_case=None) -> str:
    """Writes `encoder` as a keras-hub BertBackbone preset (`BertBackbone.from_preset` reads it).

    With `vocab_file`, a `BertTokenizer` preset (`tokenizer.json`, vocabulary asset) is saved
    too, lower-casing as `do_lower_case` says (default True).

    Raises:
        ValueError: naming each setting of `KERAS_HUB_LIMITS` the encoder has and a
            BertBackbone cannot hold (activation other than the tanh GELU, LayerNorm epsilon
            other than 1e-12, an attention dropout unlike the hidden dropout, initializer
            range other than 0.02, causal attention); nothing is written then.
    """
    check_format_holds("keras_hub", encoder_settings(encoder), KERAS_HUB_LIMITS)
    import keras_hub  # optional heavy dependency, needed only for this format

    config = encoder.bert_config
    backbone = keras_hub_backbone(config)
    tensors = table_tensors(encoder_arrays(encoder), KERAS_HUB_NAME_TABLE, config)
    targets = {variable.path: variable for variable in backbone.weights}
    if set(tensors) != set(targets):
        raise AssertionError(
            f"keras-hub name table does not cover BertBackbone one to one: "
            f"{sorted(set(tensors) ^ set(targets))}"
        )
    for path, variable in targets.items():
        variable.assign(tensors[path])
    # keras-hub writes a local directory: built in a private local one, then copied file by
    # file (each whole) to `directory`, which may be any URI.
    with tempfile.TemporaryDirectory(prefix="keras_bert_preset_") as local:
        backbone.save_to_preset(local)
        if vocab_file is not None:
            tokenizer = keras_hub.models.BertTokenizer(
                vocabulary=_vocabulary_lines(vocab_file),
                lowercase=True if do_lower_case is None else bool(do_lower_case),
            )
            tokenizer.save_to_preset(local)
        fileio.makedirs(directory)
        fileio.copy_tree(local, directory)
    return directory
