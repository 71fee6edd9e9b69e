"""Reader for TensorFlow Model Garden TF2 BERT encoder checkpoints (object-based).

What tf-models-official's `tf2_bert_encoder_checkpoint_converter` writes,
`tf.train.Checkpoint(encoder=BertEncoder(...))`, often beside a google-research style
`bert_config.json` and `vocab.txt`; and what Model Garden training saves,
`tf.train.Checkpoint(model=BertPretrainerV2(...), optimizer=..., global_step=...)`. Inside the
encoder, variables sit at object paths `layer_with_weights-<k>/<attribute>`, where `k` counts
the encoder's layers that hold weights in construction order (official/nlp/modeling/networks/
bert_encoder.py): word (0), position (1) and type (2) embeddings, the embedding LayerNorm (3),
transformer blocks (4 .. 4+L-1), the pooler (4+L). A checkpoint stores each variable once,
under the first path that reaches it (a pretrainer's word embeddings appear as
`model/masked_lm/embedding_table`), so paths are resolved through the checkpoint's object graph,
not read off the keys. Attention kernels are per-head einsum layouts ([H, N, D], output
[N, D, H]). Model Garden's "gelu" is the tanh form (official/modeling/activations/gelu.py:
`approximate=True`).

Not read: factorized embeddings (`embedding_width` != hidden_size, an extra projection layer).
"""

from __future__ import annotations


import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from keras_bert import fileio
from keras_bert.checkpoints import names
from keras_bert.checkpoints.google import CONFIG_FILE, find_checkpoint_prefix
from keras_bert.checkpoints.source import (
    CheckpointError,
    apply_table,
)
from keras_bert.config import BertConfig

VARIABLE_VALUE = "VARIABLE_VALUE"
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
# Object paths (relative to a node) that make the node a Model Garden BertEncoder.
_ENCODER_SIGNATURE = (
    "layer_with_weights-1/embeddings",
    "layer_with_weights-3/gamma",
    "layer_with_weights-4/_attention_layer/_query_dense/kernel",
)

# Checkpoint keys outside the encoder that are not weights of a BertEncoder.
MODEL_GARDEN_IGNORED = (
    (r"save_counter/\.ATTRIBUTES/VARIABLE_VALUE", "tf.train.Checkpoint's save counter"),
    (OBJECT_GRAPH_KEY, "the checkpoint's object graph (structure, not a weight)"),
    (r"(.*/)?\.OPTIMIZER_SLOT/.*|optimizer/.*", "optimizer state, not a model weight"),
    (r"(.*/)?global_step/\.ATTRIBUTES/VARIABLE_VALUE", "training step counter"),
    (
        r"(.*/)?(masked_lm|classification_heads)/.*",
        "BertPretrainerV2 head (masked LM / classification), not part of a bare BertEncoder",
    ),
)


def model_garden_table(num_layers: int) -> tuple:
    """The name table of a `num_layers`-block encoder (keys relative to the encoder prefix).

    Rows are (canonical, source, transform) as in `source.apply_table`, from the Model Garden
    column of `names.NAME_ROWS`; the layer index is spelled out because the object graph numbers
    layers in order: embeddings 0-3, block i at 4 + i, the pooler at 4 + num_layers.
    """
    table = names.name_table("model_garden")
    block = [row for row in table if row[0].startswith("layer_{i}/")]
    rows = [row for row in table if row[0].startswith("embeddings/")]
    for i in range(num_layers):
        rows += [
            (canonical.format(i=i), f"layer_with_weights-{4 + i}/{source}", transform)
            for canonical, source, transform in block
        ]
    rows += [
        (canonical, f"layer_with_weights-{4 + num_layers}/{source}", transform)
        for canonical, source, transform in table
        if canonical.startswith("pooler/")
    ]
    return tuple(rows)


def object_graph(reader):
    """The checkpoint's `TrackableObjectGraph`, or None for a name-based (TF1) checkpoint."""
    if not reader.has_tensor(OBJECT_GRAPH_KEY):
        return None
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))
    return graph


def variable_paths(graph, root: int = 0) -> dict:
    """Object path (relative to node `root`) -> checkpoint key, for every saved variable.

    Breadth-first, each node once, so a variable reachable by several paths gets the
    shortest (the encoder's own path when `root` is the encoder).
    """
    paths, seen, queue = {}, {root}, [(root, "")]
    while queue:
        node_id, path = queue.pop(0)
        for attribute in graph.nodes[node_id].attributes:
            if attribute.name == VARIABLE_VALUE:
                paths[path] = attribute.checkpoint_key
        for child in graph.nodes[node_id].children:
            if child.node_id not in seen:
                seen.add(child.node_id)
                queue.append((child.node_id, f"{path}/{child.local_name}".lstrip("/")))
    return paths


def _node_at(graph, node_id: int, path: str):
    for name in path.split("/"):
        ids = [c.node_id for c in graph.nodes[node_id].children if c.local_name == name]
        if not ids:
            return None
        node_id = ids[0]
    return node_id


def encoder_nodes(graph) -> list:
    """Ids of the nodes that are Model Garden BertEncoders (`_ENCODER_SIGNATURE`)."""
    return [
        i
        for i in range(len(graph.nodes))
        if all(_node_at(graph, i, p) is not None for p in _ENCODER_SIGNATURE)
    ]


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
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_layers=num_layers,
        num_heads=shapes[first + "_attention_layer/_query_dense/kernel"][1],
        intermediate_size=shapes[first + "_intermediate_dense/kernel"][1],
        hidden_activation="gelu_approximate",
        max_sequence_length=shapes["layer_with_weights-1/embeddings"][0],
        type_vocab_size=shapes["layer_with_weights-2/embeddings"][0],
    )


def _read_config(directory: str, shapes: dict, label: str) -> BertConfig:
    config_path = fileio.join(directory, CONFIG_FILE)
    if not fileio.exists(config_path):
        return infer_config(shapes)
    values = fileio.read_json(config_path)
    if values.get("embedding_size") not in (None, values.get("hidden_size")):
        raise CheckpointError(
            f"{label}: factorized embeddings (embedding_size="
            f"{values['embedding_size']}) are not supported"
        )
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
        checkpoint's keys.

    Raises:
        FileNotFoundError: naming the missing checkpoint index.
        CheckpointError: when the checkpoint is not object-based or holds not exactly one
            encoder, on factorized embeddings, or on missing / unexpected variables (listed).
    """
    prefix = find_checkpoint_prefix(path)
    reader = tf.compat.v1.train.NewCheckpointReader(prefix)  # a prefix, never a directory
    graph = object_graph(reader)
    nodes = [] if graph is None else encoder_nodes(graph)
    if len(nodes) != 1:
        raise CheckpointError(
            f"{prefix}: expected one Model Garden BertEncoder in an "
            f"object-based checkpoint, found {len(nodes)}"
        )
    inside = variable_paths(graph, nodes[0])  # encoder-relative path -> key
    keys_inside = set(inside.values())
    names = dict(inside)  # table name -> key; keys outside the encoder under their own name
    names.update({key: key for key in reader.get_variable_to_shape_map() if key not in keys_inside})
    shape_map = reader.get_variable_to_shape_map()
    shapes = {n: shape_map[k] for n, k in names.items()}
    if "layer_with_weights-4/kernel" in shapes:  # block 0's place holds a plain Dense
        raise CheckpointError(
            f"{prefix}: factorized embeddings (an embedding projection layer) are not supported"
        )
    config = _read_config(fileio.parent(prefix), shapes, prefix)
    weights = apply_table(
        fmt="model_garden",
        weights_file=prefix,
        config=config,
        names=names,
        read=lambda n: reader.get_tensor(names[n]),
        table=model_garden_table(config.num_layers),
        ignore_rules=MODEL_GARDEN_IGNORED,
    )
    weights.source_names = {c: names[s] for c, s in weights.source_names.items()}
    weights.ignored = {names[s]: r for s, r in weights.ignored.items()}
    return weights


def is_model_garden_prefix(prefix: str) -> bool:
    """True for an object-based checkpoint holding a Model Garden BertEncoder."""
    graph = object_graph(tf.compat.v1.train.NewCheckpointReader(prefix))
    return graph is not None and bool(encoder_nodes(graph))
