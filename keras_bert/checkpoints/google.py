"""Reader for original google-research/bert TF1 checkpoints.

Files: `bert_config.json`, `bert_model.ckpt.{index,data-*}`, `vocab.txt`. Variable names are
those of google-research/bert `modeling.py` and `run_pretraining.py`; kernels are already Keras
[in, out] except `cls/seq_relationship/output_weights`, stored [2, hidden] (it is used with
`matmul(..., transpose_b=True)`). Optimizer slots and the step counter of checkpoints saved
during pretraining are ignored; TF-Hub exports put everything under `module/`, which is removed.
"""

from __future__ import annotations

import os

import tensorflow as tf

from keras_bert import fileio
from keras_bert.checkpoints.limits import Limit, check_format_holds, encoder_settings, fixed, one_of
from keras_bert.checkpoints import names
from keras_bert.checkpoints.source import read_config, apply_table, encoder_arrays, table_tensors
from keras_bert.config import BertConfig

CONFIG_FILE = "bert_config.json"
CHECKPOINT_PREFIX = "bert_model.ckpt"

# canonical name -> google-research/bert name (after removing a `module/` prefix); the rows
# are `names.NAME_ROWS`, shared by every format.
GOOGLE_NAME_TABLE = names.name_table("google")

GOOGLE_IGNORED = (
    (r".*/adam_[mv]", "Adam optimizer slot (AdamWeightDecayOptimizer), not a model weight"),
    (r"global_step", "training step counter, not a model weight"),
)


def find_checkpoint_prefix(path: str) -> str:
    """Returns the TF checkpoint prefix for a directory or a prefix path.

    A directory must hold `bert_model.ckpt.index` or exactly one `*.index` file.

    Raises:
        FileNotFoundError: naming what was looked for.
    """
    # A prefix first: on `ram://` any prefix of a file's name also reads as a directory.
    if fileio.exists(path + ".index"):
        return path
    if fileio.isdir(path):
        preferred = fileio.join(path, CHECKPOINT_PREFIX)
        if fileio.exists(preferred + ".index"):
            return preferred
        found = fileio.glob(fileio.join(path, "*.index"))
        if len(found) == 1:
            return found[0][: -len(".index")]
        raise FileNotFoundError(
            f"TF checkpoint not found: {preferred}.index"
            + (f" (several candidates: {found})" if found else "")
        )
    raise FileNotFoundError(f"TF checkpoint not found: {path}.index")


def read_google_checkpoint(path: str):
    """Reads a google-research/bert checkpoint (directory or `.../bert_model.ckpt` prefix).

    `bert_config.json` is read from the checkpoint's directory; its `hidden_act` "gelu" is the
    tanh approximation (modeling.py `gelu`), so the config says "gelu_approximate".

    Returns:
        `SourceWeights` with format "google".

    Raises:
        FileNotFoundError: naming the missing bert_config.json or checkpoint index.
        CheckpointError: on missing / unexpected variable names (listed).
    """
    prefix = find_checkpoint_prefix(path)
    config_path = fileio.join(fileio.parent(prefix), CONFIG_FILE)
    config = read_config(config_path, BertConfig.from_google_config, "google-research/bert")

    # Not tf.train.load_checkpoint: it takes a `ram://` prefix for a directory.
    reader = tf.compat.v1.train.NewCheckpointReader(prefix)
    originals = {}
    for original in reader.get_variable_to_shape_map():
        name = original[len("module/") :] if original.startswith("module/") else original
        originals[name] = original

    weights = apply_table(
        fmt="google",
        weights_file=prefix,
        config=config,
        names=originals,
        read=lambda n: reader.get_tensor(originals[n]),
        table=GOOGLE_NAME_TABLE,
        ignore_rules=GOOGLE_IGNORED,
    )
    weights.source_names = {c: originals[s] for c, s in weights.source_names.items()}
    weights.ignored = {originals[s]: r for s, r in weights.ignored.items()}
    return weights


def infer_do_lower_case(path: str):
    """True if the checkpoint's directory name says "uncased", False for "cased", else None."""
    return casing_in_name(directory_of(path))


def directory_of(path: str) -> str:
    """The directory a checkpoint lives in: `path` itself, or the parent of a file or a TF
    checkpoint prefix (checked first: on `ram://` a prefix also reads as a directory)."""
    path = os.fspath(path)
    if fileio.exists(path + ".index") or not fileio.isdir(path):
        return fileio.parent(path)
    return path


def directory_name(directory: str) -> str:
    """The last component of a directory path or URI, trailing slashes ignored."""
    directory = os.fspath(directory)
    return fileio.basename(directory.rstrip("/") or directory)


def casing_in_name(directory: str):
    """True if the directory's own name says "uncased", False for "cased", else None."""
    name = directory_name(directory).lower()
    if "uncased" in name:
        return True
    if "cased" in name:
        return False
    return None


# Our activation name -> google-research/bert `hidden_act` (modeling.py `get_activation`).
GOOGLE_ACTIVATION_NAMES = {"gelu_approximate": "gelu", "relu": "relu", "tanh": "tanh"}

# What a google-research/bert checkpoint cannot hold (modeling.py): every BertConfig size,
# dropout and initializer has a bert_config.json key; the LayerNorm epsilon and the attention
# direction have none, and the casing lives only in the directory name.
GOOGLE_LIMITS = (
    one_of(
        "hidden_activation",
        GOOGLE_ACTIVATION_NAMES,
        "modeling.py's get_activation names only 'gelu' (the tanh form, our "
        "'gelu_approximate'), 'relu' and 'tanh'",
    ),
    fixed("layer_norm_epsilon", 1e-12, "modeling.py's layer_norm fixes it at 1e-12"),
    fixed("causal", False, "modeling.py's encoder attends in both directions"),
    Limit(
        "do_lower_case",
        lambda s: (
            s["do_lower_case"] is None
            or casing_in_name(s["directory_name"]) in (None, bool(s["do_lower_case"]))
        ),
        "google-research/bert records the casing only in the directory name, and "
        "{directory_name!r} says the opposite",
    ),
)


def write_google_checkpoint(encoder, directory: str, vocab_file=None, do_lower_case=None) -> str:
    """Writes `encoder` as a google-research/bert TF1 checkpoint directory.

    Files: `bert_config.json` (google-research keys), `bert_model.ckpt.{index,data-*}` with
    modeling.py's variable names (a name-based checkpoint, what `tf.train.init_from_checkpoint`
    and `tf.train.list_variables` read), and `vocab.txt` when given. google-research records
    the casing only in the directory name (`uncased_...`): `do_lower_case` is not stored, and
    a directory whose name says the opposite casing is refused.

    Raises:
        ValueError: naming each setting of `GOOGLE_LIMITS` the encoder has and the format
            cannot hold (an activation modeling.py cannot name: its "gelu" is the tanh form,
            so the exact erf form is refused; a LayerNorm epsilon other than 1e-12; causal
            attention; `do_lower_case` against the directory's name); nothing is written then.
    """
    check_format_holds(
        "google",
        encoder_settings(
            encoder,
            do_lower_case=do_lower_case,
            directory_name=directory_name(directory),
        ),
        GOOGLE_LIMITS,
    )
    config = encoder.bert_config
    fileio.makedirs(directory)
    google_config = google_config_dict(config)
    google_config["hidden_act"] = GOOGLE_ACTIVATION_NAMES[config.hidden_activation]
    tensors = table_tensors(encoder_arrays(encoder), GOOGLE_NAME_TABLE, config)
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=fileio.join(directory, CHECKPOINT_PREFIX),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(tensors[n]) for n in names],
    )
    if vocab_file is not None:
        fileio.write_bytes(fileio.join(directory, "vocab.txt"), fileio.read_bytes(vocab_file))
    # bert_config.json (what marks the format) last, each file whole-or-nothing.
    fileio.write_json(fileio.join(directory, CONFIG_FILE), google_config)
    return directory


def google_config_dict(config) -> dict:
    """google-research `bert_config.json` keys for a `BertConfig` (no epsilon, no hidden_act)."""
    return {
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_dropout_prob": config.dropout_rate,
        "attention_probs_dropout_prob": config.attention_dropout_rate,
        "max_position_embeddings": config.max_sequence_length,
        "type_vocab_size": config.type_vocab_size,
        "initializer_range": config.initializer_range,
    }
