"""Reader for Hugging Face BERT directories: `config.json` + `model.safetensors` + `vocab.txt`.

Layout of `transformers`' `BertModel` / `BertForPreTraining` (modeling_bert.py). Linear weights
are stored [out, in] and are transposed into Keras [in, out] kernels; embedding tables are not.
Names may carry the `bert.` prefix (BertForPreTraining, BertForMaskedLM) or not (BertModel), and
LayerNorm parameters may be called `gamma`/`beta` (older exports) or `weight`/`bias`.
"""

from __future__ import annotations


import numpy as np
import safetensors.numpy
from safetensors import safe_open

from keras_bert import fileio

from keras_bert.checkpoints.limits import check_format_holds, encoder_settings, fixed
from keras_bert.checkpoints import names
from keras_bert.checkpoints.source import (
    read_config,
    CheckpointError,
    apply_table,
    encoder_arrays,
    table_tensors,
)
from keras_bert.config import BertConfig

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"

# canonical name -> Hugging Face name (after normalisation: no `bert.`, LayerNorm weight/bias);
# the rows are `names.NAME_ROWS`, shared by every format.
HF_NAME_TABLE = names.name_table("huggingface")

HF_IGNORED = (
    (r"embeddings\.position_ids", "buffer holding arange(max_position_embeddings), not a weight"),
    (
        r"cls\.predictions\.decoder\.weight",
        "MLM decoder tied to embeddings.word_embeddings.weight (checked equal)",
    ),
    (r"cls\.predictions\.decoder\.bias", "alias of cls.predictions.bias (checked equal)"),
)


def weights_files(directory: str) -> list[str]:
    """Paths of the safetensors file(s) of a HF directory (single file or sharded index).

    Raises:
        FileNotFoundError: naming `model.safetensors` (and a `pytorch_model.bin` if that is all
            there is, which this converter does not read).
    """
    single = fileio.join(directory, WEIGHTS_FILE)
    index = fileio.join(directory, WEIGHTS_INDEX_FILE)
    if fileio.exists(single):
        return [single]
    if fileio.exists(index):
        shards = sorted(set(fileio.read_json(index)["weight_map"].values()))
        paths = [fileio.join(directory, s) for s in shards]
        for p in paths:
            if not fileio.exists(p):
                raise FileNotFoundError(f"safetensors shard listed in {index} not found: {p}")
        return paths
    hint = (
        " (found pytorch_model.bin: re-save it with safetensors, "
        "`model.save_pretrained(dir, safe_serialization=True)`)"
        if fileio.exists(fileio.join(directory, "pytorch_model.bin"))
        else ""
    )
    raise FileNotFoundError(f"Hugging Face weights file not found: {single}{hint}")


def _normalise(name: str) -> str:
    if name.startswith("bert."):
        name = name[len("bert.") :]
    if name.endswith("LayerNorm.gamma"):
        name = name[: -len("gamma")] + "weight"
    elif name.endswith("LayerNorm.beta"):
        name = name[: -len("beta")] + "bias"
    return name


def read_hf_checkpoint(directory: str):
    """Reads a Hugging Face BERT directory into a `SourceWeights`.

    Args:
        directory: path holding `config.json` and `model.safetensors` (or a sharded
            `model.safetensors.index.json`).

    Returns:
        `SourceWeights` with format "huggingface"; its config takes the GELU form from
        `hidden_act` (HF "gelu" = exact erf, "gelu_new" = tanh).

    Raises:
        FileNotFoundError: naming the missing config or weights file.
        CheckpointError: on missing / unexpected names (listed), a name present twice after
            normalisation, or an untied MLM decoder.
    """
    config_path = fileio.join(directory, CONFIG_FILE)
    config = read_config(config_path, BertConfig.from_hf_config, "Hugging Face")

    files = weights_files(directory)
    label = files[0] if len(files) == 1 else fileio.join(directory, WEIGHTS_INDEX_FILE)
    handles = [_open_safetensors(p) for p in files]
    location = {}  # normalised name -> (handle, original name)
    for handle in handles:
        for original in handle.keys():
            name = _normalise(original)
            if name in location:
                raise CheckpointError(
                    f"{label}: {location[name][1]!r} and {original!r} are the same variable "
                    "after removing the 'bert.' prefix / LayerNorm gamma-beta naming"
                )
            location[name] = (handle, original)

    def read(name):
        handle, original = location[name]
        return handle.get_tensor(original)

    weights = apply_table(
        fmt="huggingface",
        weights_file=label,
        config=config,
        names=location,
        read=read,
        table=HF_NAME_TABLE,
        ignore_rules=HF_IGNORED,
    )
    # Tied and aliased tensors are ignored only after checking they are what we assume.
    checks = {
        "cls.predictions.decoder.weight": weights.encoder["embeddings/word_embeddings"],
        "cls.predictions.decoder.bias": weights.heads.get("masked_lm/output_bias"),
    }
    for name, expected in checks.items():
        if name in location and (expected is None or not np.array_equal(read(name), expected)):
            raise CheckpointError(
                f"{label}: {name!r} differs from the tensor it should be tied to; an untied MLM "
                "decoder is not supported (our MaskedLMHead ties it to the word embeddings)"
            )
    # Report the original names (with prefix) in the ledger.
    weights.source_names = {c: location[s][1] for c, s in weights.source_names.items()}
    weights.ignored = {location[s][1]: r for s, r in weights.ignored.items()}
    return weights


class _LoadedSafetensors:
    """`safe_open`'s `keys` / `get_tensor` over a file read whole (a URI safe_open cannot map)."""

    def __init__(self, data: bytes):
        self.tensors = safetensors.numpy.load(data)

    def keys(self):
        return list(self.tensors)

    def get_tensor(self, name):
        return self.tensors[name]


def _open_safetensors(path: str):
    """A local file is memory-mapped (`safe_open`); any other URI is read through fileio."""
    if fileio.is_local(path):
        return safe_open(path, framework="numpy")
    return _LoadedSafetensors(fileio.read_bytes(path))


def read_do_lower_case(directory: str):
    """`do_lower_case` from the directory's tokenizer_config.json, or None if it has none."""
    path = fileio.join(directory, TOKENIZER_CONFIG_FILE)
    if not fileio.exists(path):
        return None
    value = fileio.read_json(path).get("do_lower_case")
    return None if value is None else bool(value)


# Our activation name -> Hugging Face `hidden_act` (ACT2FN names; "gelu" is the exact form).
HF_ACTIVATION_NAMES = {
    "gelu": "gelu",
    "gelu_approximate": "gelu_new",
    "relu": "relu",
    "silu": "silu",
    "tanh": "tanh",
}

# What a BertModel config.json cannot hold: every BertConfig field has a key (all activations
# a name above) except the attention direction. `is_decoder=True` would mask BertModel causally
# but also makes it a decoder (key/value cache, cross-attention with add_cross_attention), and
# `load_encoder` does not read it back, so a causal encoder is refused rather than written so.
HF_LIMITS = (
    fixed(
        "causal",
        False,
        "transformers' BertModel attends in both directions (its "
        "is_decoder flag is a decoder mode, not read back by load_encoder)",
    ),
)


def hf_config_dict(config) -> dict:
    """A `BertModel` config.json dict for a `BertConfig` (the inverse of `from_hf_config`)."""
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_act": HF_ACTIVATION_NAMES[config.hidden_activation],
        "hidden_dropout_prob": config.dropout_rate,
        "attention_probs_dropout_prob": config.attention_dropout_rate,
        "max_position_embeddings": config.max_sequence_length,
        "type_vocab_size": config.type_vocab_size,
        "initializer_range": config.initializer_range,
        "layer_norm_eps": config.layer_norm_epsilon,
        "position_embedding_type": "absolute",
    }


def write_hf_dir(encoder, directory: str, vocab_file=None, do_lower_case=None) -> str:
    """Writes `encoder` as a Hugging Face `BertModel` directory.

    Files: `config.json`, `model.safetensors` (BertModel's names, no `bert.` prefix; Linear
    weights [out, in]; safetensors metadata `{"format": "pt"}` as transformers expects),
    and with `vocab_file` a `vocab.txt` plus `tokenizer_config.json` (`do_lower_case`).

    Raises:
        ValueError: for a causal encoder (`HF_LIMITS`: BertModel attends both ways); nothing is
            written then.
    """
    check_format_holds("huggingface", encoder_settings(encoder), HF_LIMITS)
    config = encoder.bert_config
    fileio.makedirs(directory)
    # Each file whole-or-nothing; config.json (what marks the format) last.
    tensors = table_tensors(encoder_arrays(encoder), HF_NAME_TABLE, config)
    fileio.write_bytes(
        fileio.join(directory, WEIGHTS_FILE),
        safetensors.numpy.save(tensors, metadata={"format": "pt"}),
    )
    if vocab_file is not None:
        fileio.write_bytes(fileio.join(directory, "vocab.txt"), fileio.read_bytes(vocab_file))
        fileio.write_json(
            fileio.join(directory, TOKENIZER_CONFIG_FILE),
            {
                "tokenizer_class": "BertTokenizer",
                "do_lower_case": True if do_lower_case is None else bool(do_lower_case),
            },
        )
    fileio.write_json(fileio.join(directory, CONFIG_FILE), hf_config_dict(config))
    return directory
