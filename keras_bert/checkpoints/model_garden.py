"""Reader for TensorFlow Model Garden TF2 BERT encoder checkpoints (object-based).

What tf-models-official's `tf2_bert_encoder_checkpoint_converter` writes (and what Model Garden
training saves): `tf.train.Checkpoint(encoder=BertEncoder(...)).save(...)`, often beside a
google-research style `bert_config.json` and `vocab.txt`. Keys are object-graph paths,
`<prefix>layer_with_weights-<k>/<attribute>/.ATTRIBUTES/VARIABLE_VALUE`, where `k` counts the
encoder's layers that hold weights in construction order (official/nlp/modeling/networks/
bert_encoder.py): word (0), position (1) and type (2) embeddings, the embedding LayerNorm (3),
transformer blocks (4 .. 4+L-1), the pooler (4+L). Attention kernels are per-head einsum
layouts ([H, N, D], output [N, D, H]). Model Garden's "gelu" is the tanh form
(official/modeling/activations/gelu.py: `approximate=True`).

Not read: factorized embeddings (`embedding_width` != hidden_size, an extra projection layer).
"""

from __future__ import annotations

import json
import os
import re

import tensorflow as tf

from keras_bert.checkpoints.google import CONFIG_FILE, find_checkpoint_prefix
from keras_bert.checkpoints.source import (
    MERGE_HEADS_IN,
    MERGE_HEADS_OUT,
    CheckpointError,
    apply_table,
)
from keras_bert.config import BertConfig

SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_FIRST_LAYER = "layer_with_weights-0/embeddings"

# Transformer block attributes of Model Garden's TransformerEncoderBlock (relative to the block).
_BLOCK_ROWS = (
    ("attention/query/kernel", "_attention_layer/_query_dense/kernel", MERGE_HEADS_IN),
    ("attention/query/bias", "_attention_layer/_query_dense/bias", MERGE_HEADS_IN),
    ("attention/key/kernel", "_attention_layer/_key_dense/kernel", MERGE_HEADS_IN),
    ("attention/key/bias", "_attention_layer/_key_dense/bias", MERGE_HEADS_IN),
    ("attention/value/kernel", "_attention_layer/_value_dense/kernel", MERGE_HEADS_IN),
    ("attention/value/bias", "_attention_layer/_value_dense/bias", MERGE_HEADS_IN),
    ("attention/output/kernel", "_attention_layer/_output_dense/kernel", MERGE_HEADS_OUT),
    ("attention/output/bias", "_attention_layer/_output_dense/bias", None),
    ("attention/layer_norm/gamma", "_attention_layer_norm/gamma", None),
    ("attention/layer_norm/beta", "_attention_layer_norm/beta", None),
    ("intermediate/kernel", "_intermediate_dense/kernel", None),
    ("intermediate/bias", "_intermediate_dense/bias", None),
    ("output/kernel", "_output_dense/kernel", None),
    ("output/bias", "_output_dense/bias", None),
    ("output/layer_norm/gamma", "_output_layer_norm/gamma", None),
    ("output/layer_norm/beta", "_output_layer_norm/beta", None),
)

MODEL_GARDEN_IGNORED = (
    (r"save_counter/\.ATTRIBUTES/VARIABLE_VALUE", "tf.train.Checkpoint's save counter"),
    (OBJECT_GRAPH_KEY, "the checkpoint's object graph (structure, not a weight)"),
    (r"(.*/)?\.OPTIMIZER_SLOT/.*|optimizer/.*", "optimizer state, not a model weight"),
    (r"(.*/)?global_step(/\.ATTRIBUTES/VARIABLE_VALUE)?", "training step counter"),
)


def model_garden_table(num_layers: int) -> tuple:
    """The name table of a `num_layers`-block encoder (keys relative to the encoder prefix).

    Rows are (canonical, source, transform) as in `source.apply_table`; the layer index
    is spelled out because the pooler's position depends on `num_layers`.
    """
    rows = [("embeddings/word_embeddings", "layer_with_weights-0/embeddings", None),
            ("embeddings/position_embeddings", "layer_with_weights-1/embeddings", None),
            ("embeddings/type_embeddings", "layer_with_weights-2/embeddings", None),
            ("embeddings/layer_norm/gamma", "layer_with_weights-3/gamma", None),
            ("embeddings/layer_norm/beta", "layer_with_weights-3/beta", None)]
    for i in range(num_layers):
        rows += [(f"layer_{i}/{canonical}", f"layer_with_weights-{4 + i}/{source}", transform)
                 for canonical, source, transform in _BLOCK_ROWS]
    rows += [("pooler/kernel", f"layer_with_weights-{4 + num_layers}/kernel", None),
             ("pooler/bias", f"layer_with_weights-{4 + num_layers}/bias", None)]
    return tuple(rows)


def _encoder_prefix(names, label: str) -> str:
    prefixes = sorted(n[:-len(_FIRST_LAYER + SUFFIX)] for n in names
                      if n.endswith(_FIRST_LAYER + SUFFIX))
    if len(prefixes) != 1:
        raise CheckpointError(
            f"{label}: expected one Model Garden BertEncoder (a '<prefix>{_FIRST_LAYER}' "
            f"variable), found {len(prefixes)}: {prefixes}")
    return prefixes[0]


def infer_config(shapes: dict) -> BertConfig:
    """BertConfig from the variable shapes (keys relative to the encoder prefix).

    Used when no `bert_config.json` is beside the checkpoint; the GELU is Model Garden's
    default ("gelu" = tanh form), LayerNorm epsilon 1e-12.
    """
    vocab_size, hidden = shapes["layer_with_weights-0/embeddings"]
    num_layers = 0
    while f"layer_with_weights-{4 + num_layers}/_attention_layer/_query_dense/kernel" in shapes:
        num_layers += 1
    first = "layer_with_weights-4/"
    return BertConfig(
        vocab_size=vocab_size, hidden_size=hidden, num_layers=num_layers,
        num_heads=shapes[first + "_attention_layer/_query_dense/kernel"][1],
        intermediate_size=shapes[first + "_intermediate_dense/kernel"][1],
        hidden_activation="gelu_approximate",
        max_sequence_length=shapes["layer_with_weights-1/embeddings"][0],
        type_vocab_size=shapes["layer_with_weights-2/embeddings"][0])


def _read_config(directory: str, shapes: dict, label: str) -> BertConfig:
    config_path = os.path.join(directory, CONFIG_FILE)
    if not os.path.exists(config_path):
        return infer_config(shapes)
    with open(config_path, encoding="utf-8") as f:
        values = json.load(f)
    if values.get("embedding_size") not in (None, values.get("hidden_size")):
        raise CheckpointError(f"{label}: factorized embeddings (embedding_size="
                              f"{values['embedding_size']}) are not supported")
    try:
        return BertConfig.from_google_config(values)
    except (KeyError, ValueError, TypeError) as e:
        raise ValueError(f"{config_path}: {e}") from e


def read_model_garden_checkpoint(path: str):
    """Reads a Model Garden TF2 encoder checkpoint (directory or checkpoint prefix).

    The config comes from `bert_config.json` beside the checkpoint (its "gelu" is the tanh
    form, as in Model Garden's `tf_utils.get_activation`), else from the variable shapes.

    Returns:
        `SourceWeights` with format "model_garden"; `source_names` and `ignored` use the
        checkpoint's full keys.

    Raises:
        FileNotFoundError: naming the missing checkpoint index.
        CheckpointError: when the checkpoint holds no single encoder, or on missing /
            unexpected variables (listed).
    """
    prefix = find_checkpoint_prefix(path)
    reader = tf.train.load_checkpoint(prefix)
    shape_map = reader.get_variable_to_shape_map()
    enc = _encoder_prefix(shape_map, prefix)
    names = {}  # table name (relative, no suffix) or full key -> full key
    for key in shape_map:
        inside = key.startswith(enc) and key.endswith(SUFFIX)
        names[key[len(enc):-len(SUFFIX)] if inside else key] = key
    shapes = {n: shape_map[k] for n, k in names.items()}
    config = _read_config(os.path.dirname(prefix), shapes, prefix)
    if "layer_with_weights-4/kernel" in shapes:  # block 0's place holds a plain Dense
        raise CheckpointError(f"{prefix}: factorized embeddings (an embedding projection "
                              "layer) are not supported")
    weights = apply_table(fmt="model_garden", weights_file=prefix, config=config, names=names,
                          read=lambda n: reader.get_tensor(names[n]),
                          table=model_garden_table(config.num_layers),
                          ignore_rules=MODEL_GARDEN_IGNORED)
    weights.source_names = {c: names[s] for c, s in weights.source_names.items()}
    weights.ignored = {names[s]: r for s, r in weights.ignored.items()}
    return weights


def is_model_garden_prefix(prefix: str) -> bool:
    """True for an object-based checkpoint holding `<prefix>layer_with_weights-0/embeddings`."""
    names = [name for name, _ in tf.train.list_variables(prefix)]
    return any(re.fullmatch(r"(.*/)?" + re.escape(_FIRST_LAYER + SUFFIX), n) for n in names)
