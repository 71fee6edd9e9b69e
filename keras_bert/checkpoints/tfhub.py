"""Reader for TF Hub-style BERT encoder SavedModels (tf-models-official's `export_tfhub`).

`official/nlp/tools/export_tfhub_lib.export_model` saves Model Garden's `BertEncoder` wrapped in
a Keras model that implements TF Hub's text-encoder API (inputs `input_word_ids`, `input_mask`,
`input_type_ids`; outputs `sequence_output`, `pooled_output`, `encoder_outputs`, `default`),
plus a `vocab_file` asset and a boolean `do_lower_case` variable. Variables keep their Keras
names (`transformer/layer_<i>/self_attention/query/kernel:0`, ...); attention kernels are
per-head einsum layouts. The SavedModel stores no config: sizes come from the variable shapes,
and the GELU form from the graph itself (an `Erf` or `Erfc` op means the exact form, as
`tf.nn.gelu(approximate=False)` computes it; otherwise the tanh form, Model Garden's "gelu").
With `export_tfhub`'s `with_mlm=True`, the `mlm` sub-model's head variables are listed as
ignored.
"""

from __future__ import annotations


import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from keras_bert import fileio
from keras_bert.checkpoints import names
from keras_bert.checkpoints.source import (
    CheckpointError,
    apply_table,
)
from keras_bert.config import BertConfig

SAVED_MODEL_FILE = "saved_model.pb"
VOCAB_ASSET = "assets/vocab.txt"

# canonical name -> Keras variable name of Model Garden's BertEncoder (without ":0"); the rows
# are `names.NAME_ROWS`, shared by every format.
TFHUB_NAME_TABLE = names.name_table("tfhub")

TFHUB_IGNORED = (
    (
        r"mlm/.*",
        "head of export_tfhub's `mlm` sub-model (masked LM), not part of a bare BertEncoder",
    ),
    (
        r"do_lower_case",
        "the SavedModel's do_lower_case attribute (a tokenizer setting, read by "
        "resolve_do_lower_case), not a weight",
    ),
)


def is_saved_model_dir(directory: str) -> bool:
    return fileio.exists(fileio.join(directory, SAVED_MODEL_FILE))


def graph_activation(directory: str) -> str:
    """ "gelu" if the SavedModel's graph computes `Erf` or `Erfc`, else "gelu_approximate"."""
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(fileio.read_bytes(fileio.join(directory, SAVED_MODEL_FILE)))
    ops = set()
    for meta_graph in proto.meta_graphs:
        ops.update(node.op for node in meta_graph.graph_def.node)
        for function in meta_graph.graph_def.library.function:
            ops.update(node.op for node in function.node_def)
    return "gelu" if ops & {"Erf", "Erfc"} else "gelu_approximate"


def infer_config(shapes: dict, hidden_activation: str) -> BertConfig:
    """BertConfig from variable shapes (TFHUB_NAME_TABLE names); LayerNorm epsilon 1e-12."""
    vocab_size, hidden = shapes["word_embeddings/embeddings"]
    num_layers = 0
    while f"transformer/layer_{num_layers}/self_attention/query/kernel" in shapes:
        num_layers += 1
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_layers=num_layers,
        num_heads=shapes["transformer/layer_0/self_attention/query/kernel"][1],
        intermediate_size=shapes["transformer/layer_0/intermediate/kernel"][1],
        hidden_activation=hidden_activation,
        max_sequence_length=shapes["position_embedding/embeddings"][0],
        type_vocab_size=shapes["type_embeddings/embeddings"][0],
    )


def _variables(directory: str) -> dict:
    """Variable name (no ":0") -> variable, for the encoder's variables and the others.

    The `do_lower_case` attribute is named so; variables only the `mlm` sub-model holds get
    the prefix "mlm/".
    """
    loaded = tf.saved_model.load(directory)
    flag = getattr(loaded, "do_lower_case", None)
    own = list(loaded.variables)
    mlm = getattr(loaded, "mlm", None)
    extra = [] if mlm is None else [v for v in mlm.variables if all(v is not o for o in own)]
    out = {}
    for variable in own + extra:
        name = variable.name[:-2] if variable.name.endswith(":0") else variable.name
        if variable is flag:
            name = "do_lower_case"
        elif any(variable is e for e in extra):
            name = "mlm/" + name
        if name in out:
            raise ValueError(f"{directory}: two variables are named {name!r}")
        out[name] = variable
    return out


def read_tfhub_saved_model(directory: str):
    """Reads a TF Hub-style BERT encoder SavedModel directory into a `SourceWeights`.

    Returns:
        `SourceWeights` with format "tfhub_saved_model".

    Raises:
        FileNotFoundError: naming the missing saved_model.pb.
        CheckpointError: on missing / unexpected variables (listed).
    """
    if not is_saved_model_dir(directory):
        raise FileNotFoundError(f"SavedModel not found: {fileio.join(directory, SAVED_MODEL_FILE)}")
    variables = _variables(directory)
    shapes = {name: tuple(v.shape) for name, v in variables.items()}
    try:
        config = infer_config(shapes, graph_activation(directory))
    except KeyError as e:
        raise CheckpointError(
            f"{directory}: not a Model Garden BERT encoder SavedModel (no "
            f"variable {e}); variables: {sorted(shapes)}"
        ) from None
    return apply_table(
        fmt="tfhub_saved_model",
        weights_file=directory,
        config=config,
        names=variables,
        read=lambda n: np.asarray(variables[n].numpy()),
        table=TFHUB_NAME_TABLE,
        ignore_rules=TFHUB_IGNORED,
    )


def read_do_lower_case(directory: str):
    """The SavedModel's `do_lower_case` attribute (export_tfhub sets it), or None."""
    flag = getattr(tf.saved_model.load(directory), "do_lower_case", None)
    return None if flag is None else bool(flag.numpy())
