"""Format-neutral core of the converters: canonical weight names, name tables, assignment.

Every converter reads its source into a `SourceWeights`: arrays keyed by *canonical* names (one
per variable of `BertEncoder` and of the two pretraining heads), plus the record of which source
variable filled which canonical name and which source variables were ignored and why. Each
source format owns one name table (a tuple of `(canonical, source, transform)` rows, `{i}`
standing for the layer index); `apply_table` expands it, and fails on a missing, unexpected or
duplicated name before any weight is read.

Canonical names (H = hidden_size, I = intermediate_size, V = vocab_size, P = max positions):

    embeddings/word_embeddings [V, H]        embeddings/position_embeddings [P, H]
    embeddings/type_embeddings [types, H]    embeddings/layer_norm/{gamma,beta} [H]
    layer_{i}/attention/{query,key,value}/{kernel [H, H], bias [H]}
    layer_{i}/attention/output/{kernel [H, H], bias [H]}
    layer_{i}/attention/layer_norm/{gamma,beta} [H]
    layer_{i}/intermediate/{kernel [H, I], bias [I]}
    layer_{i}/output/{kernel [I, H], bias [H]}      layer_{i}/output/layer_norm/{gamma,beta} [H]
    pooler/{kernel [H, H], bias [H]}
    masked_lm/transform/{kernel [H, H], bias [H]}   masked_lm/layer_norm/{gamma,beta} [H]
    masked_lm/output_bias [V]
    next_sentence/{kernel [H, 2], bias [2]}

Kernels are Keras `Dense` kernels, [in, out].
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable

import numpy as np
import tensorflow as tf

from keras_bert import fileio

TRANSPOSE = "transpose"
# Per-head einsum layouts (Model Garden, keras-hub, TF Hub): query/key/value kernels [H, N, D]
# and biases [N, D] merge into [H, N*D] / [N*D]; the attention output kernel [N, D, H] into
# [N*D, H]. N*D = H; head n owns columns n*D .. n*D+D-1, as in our fused Dense layers.
MERGE_HEADS_IN = "merge_heads_in"
MERGE_HEADS_OUT = "merge_heads_out"
HEAD_GROUPS = ("masked_lm", "next_sentence")


class CheckpointError(ValueError):
    """A checkpoint does not fit the encoder: missing, unexpected or mis-shaped variables."""


@dataclasses.dataclass
class SourceWeights:
    """Weights read from one checkpoint, keyed by canonical name.

    Attributes:
        format: "huggingface" or "google".
        weights_file: path of the weights file(s), for messages.
        config: `BertConfig` read from the source's config file.
        encoder: dict canonical name -> float32 ndarray, every `BertEncoder` variable.
        heads: dict canonical name -> float32 ndarray for the pretraining heads present in the
            checkpoint (`masked_lm/*`, `next_sentence/*`); empty when it has none.
        source_names: dict canonical name -> the source variable it came from.
        ignored: dict source variable -> reason it is not loaded.
    """

    format: str
    weights_file: str
    config: object
    encoder: dict
    heads: dict
    source_names: dict
    ignored: dict

    def used(self) -> dict:
        """Source variable -> canonical name, for every source variable loaded."""
        return {src: canon for canon, src in self.source_names.items()}


def read_config(config_path: str, parse: Callable, what: str):
    """`parse(json)` of a format's config file; errors name the file.

    Raises:
        FileNotFoundError: no such file ("<what> config file not found: <path>").
        ValueError: a missing or bad field, prefixed by the path.
    """
    if not fileio.exists(config_path):
        raise FileNotFoundError(f"{what} config file not found: {config_path}")
    try:
        return parse(fileio.read_json(config_path))
    except (KeyError, ValueError, TypeError) as e:
        raise ValueError(f"{config_path}: {e}") from e


def expand_table(table, num_layers: int):
    """Yields (canonical, source, transform, group) with `{i}` expanded to 0..num_layers-1."""
    for canonical, source, transform in table:
        group = canonical.split("/", 1)[0]
        group = group if group in HEAD_GROUPS else "encoder"
        if "{i}" in canonical:
            for i in range(num_layers):
                yield canonical.format(i=i), source.format(i=i), transform, group
        else:
            yield canonical, source, transform, group


def apply_table(
    *,
    fmt: str,
    weights_file: str,
    config,
    names,
    read: Callable[[str], np.ndarray],
    table,
    ignore_rules,
) -> SourceWeights:
    """Maps source variables to canonical names with `table`; reads them with `read`.

    Args:
        fmt: format name for `SourceWeights.format`.
        weights_file: path named in error messages.
        config: the `BertConfig` of the checkpoint (gives num_layers).
        names: iterable of the (normalised) source variable names.
        read: callable name -> ndarray.
        table: the format's name table (see module docstring).
        ignore_rules: sequence of (regex, reason); a source name matching a regex is ignored.

    Raises:
        CheckpointError: listing the missing encoder variables, the missing variables of a head
            that is only partly present, or the variables neither in the table nor ignored.
    """
    names = set(names)
    rows = list(expand_table(table, config.num_layers))
    sources = [src for _, src, _, _ in rows]
    duplicated = {s for s in sources if sources.count(s) > 1}
    if duplicated:  # a bug in a table, never in a checkpoint
        raise AssertionError(f"{fmt} name table maps {sorted(duplicated)} more than once")

    ignored = {}
    for name in sorted(names):
        for pattern, reason in ignore_rules:
            if re.fullmatch(pattern, name):
                ignored[name] = reason
                break

    missing = [src for _, src, _, group in rows if group == "encoder" and src not in names]
    for group in HEAD_GROUPS:
        present = [src for _, src, _, g in rows if g == group and src in names]
        if present:  # a head is all or nothing
            missing += [src for _, src, _, g in rows if g == group and src not in names]
    if missing:
        raise CheckpointError(
            f"{weights_file}: missing variables (the {fmt} name table needs them for a "
            f"{config.num_layers}-layer encoder): {missing}"
        )
    unexpected = sorted(names - set(sources) - set(ignored))
    if unexpected:
        raise CheckpointError(
            f"{weights_file}: unexpected variables (not in the {fmt} name table and not "
            f"ignorable): {unexpected}"
        )

    encoder, heads, source_names = {}, {}, {}
    for canonical, src, transform, group in rows:
        if src not in names:
            continue
        array = to_canonical(np.asarray(read(src), dtype=np.float32), transform, src, weights_file)
        (encoder if group == "encoder" else heads)[canonical] = array
        source_names[canonical] = src
    return SourceWeights(fmt, weights_file, config, encoder, heads, source_names, ignored)


def to_canonical(array, transform, src: str, weights_file: str):
    """Applies a table row's transform (source layout -> canonical layout).

    Raises:
        CheckpointError: naming the variable when its rank does not fit the transform.
    """
    expected_ndim = {TRANSPOSE: (2,), MERGE_HEADS_IN: (2, 3), MERGE_HEADS_OUT: (3,)}
    if transform is None:
        return array
    if array.ndim not in expected_ndim[transform]:
        raise CheckpointError(
            f"{weights_file}: variable {src!r} has shape {array.shape}; the {transform} "
            f"layout needs rank {' or '.join(map(str, expected_ndim[transform]))}"
        )
    if transform == TRANSPOSE:
        return array.T
    if transform == MERGE_HEADS_IN:  # [H, N, D] -> [H, N*D]; [N, D] -> [N*D]
        return array.reshape(array.shape[0], -1) if array.ndim == 3 else array.reshape(-1)
    return array.reshape(-1, array.shape[-1])  # [N, D, H] -> [N*D, H]


def from_canonical(array, transform, num_heads: int):
    """Inverse of `to_canonical`: canonical layout -> the source layout of a table row."""
    if transform is None:
        return array
    if transform == TRANSPOSE:
        return np.ascontiguousarray(array.T)
    if transform == MERGE_HEADS_IN:  # [H, H] -> [H, N, D]; [H] -> [N, D]
        return array.reshape(array.shape[:-1] + (num_heads, array.shape[-1] // num_heads))
    return array.reshape(num_heads, array.shape[0] // num_heads, array.shape[1])


def table_tensors(arrays: dict, table, config) -> dict:
    """Source name -> ndarray for every row of `table` whose canonical name is in `arrays`.

    The writers' half of a name table: `arrays` holds canonical names (e.g.
    `encoder_arrays(encoder)`), the result the source format's names and layouts.
    """
    out = {}
    for canonical, src, transform, _ in expand_table(table, config.num_layers):
        if canonical in arrays:
            out[src] = from_canonical(
                np.asarray(arrays[canonical], np.float32), transform, config.num_heads
            )
    return out


# -- targets ---------------------------------------------------------------------------------


def encoder_arrays(encoder) -> dict:
    """Canonical name -> float32 ndarray of every variable of a built `BertEncoder`."""
    return {
        name: np.asarray(variable.numpy(), np.float32)
        for name, variable in encoder_variables(encoder).items()
    }


def encoder_variables(encoder) -> dict:
    """Canonical name -> Keras variable, for every variable of a built `BertEncoder`.

    Raises:
        AssertionError: if the encoder has variables this map does not name (the encoder
            changed and the converters must follow).
    """
    emb = encoder.embeddings
    out = {
        "embeddings/word_embeddings": emb.word_embeddings.embeddings,
        "embeddings/position_embeddings": emb.position_embeddings,
        "embeddings/type_embeddings": emb.type_embeddings.embeddings,
        "embeddings/layer_norm/gamma": emb.layer_norm.gamma,
        "embeddings/layer_norm/beta": emb.layer_norm.beta,
        "pooler/kernel": encoder.pooler.kernel,
        "pooler/bias": encoder.pooler.bias,
    }
    for i, block in enumerate(encoder.transformer_layers):
        p = f"layer_{i}/"
        att = block.self_attention
        dense = {
            "attention/query": att.query,
            "attention/key": att.key,
            "attention/value": att.value,
            "attention/output": block.attention_output,
            "intermediate": block.intermediate,
            "output": block.output_dense,
        }
        for name, layer in dense.items():
            out[p + name + "/kernel"] = layer.kernel
            out[p + name + "/bias"] = layer.bias
        for name, layer in {
            "attention/layer_norm": block.attention_layer_norm,
            "output/layer_norm": block.output_layer_norm,
        }.items():
            out[p + name + "/gamma"] = layer.gamma
            out[p + name + "/beta"] = layer.beta
    _check_complete(out, encoder.weights, "BertEncoder")
    return out


def pretrainer_head_variables(pretrainer) -> dict:
    """Canonical name -> variable for the heads of a built `BertPretrainer` (no encoder)."""
    mlm = pretrainer.masked_lm
    out = {
        "masked_lm/transform/kernel": mlm.transform.kernel,
        "masked_lm/transform/bias": mlm.transform.bias,
        "masked_lm/layer_norm/gamma": mlm.layer_norm.gamma,
        "masked_lm/layer_norm/beta": mlm.layer_norm.beta,
        "masked_lm/output_bias": mlm.output_bias,
    }
    if getattr(pretrainer, "next_sentence", None) is not None:
        out["next_sentence/kernel"] = pretrainer.next_sentence.dense.kernel
        out["next_sentence/bias"] = pretrainer.next_sentence.dense.bias
    return out


def _check_complete(mapping, weights, what):
    ids = {id(v) for v in mapping.values()}
    if len(ids) != len(mapping) or ids != {id(v) for v in weights}:
        raise AssertionError(f"converter map does not cover the {what} variables one to one")


def assign(targets: dict, arrays: dict, source_names: dict, weights_file: str) -> None:
    """Checks every shape first, then assigns arrays[name] to targets[name] for all names.

    Raises:
        CheckpointError: naming the source variable, its shape and the shape the target needs,
            or listing canonical names present on one side only.
    """
    if set(targets) != set(arrays):
        raise CheckpointError(
            f"{weights_file}: weights for {sorted(set(targets) - set(arrays))} are missing and "
            f"{sorted(set(arrays) - set(targets))} have no place in the model"
        )
    for name, variable in targets.items():
        if tuple(arrays[name].shape) != tuple(variable.shape):
            raise CheckpointError(
                f"{weights_file}: shape mismatch for variable "
                f"{source_names.get(name, name)!r}: checkpoint has {tuple(arrays[name].shape)}, "
                f"the model's {name!r} needs {tuple(variable.shape)}"
            )
    for name, variable in targets.items():
        variable.assign(tf.cast(arrays[name], variable.dtype))
