"""`BertConfig`: the encoder hyperparameters, presets, and readers for published config files.

The field names are the project's standard names (SPEC section 4); the original names of
google-research/bert (`bert_config.json`) and Hugging Face (`config.json`) appear only in the two
mapping tables of this module.
"""

from __future__ import annotations

import dataclasses
import os

from keras_bert import fileio

ACTIVATIONS = ("gelu", "gelu_approximate", "relu", "silu", "tanh")
# The model inputs, int32 [batch_size, seq_length] each (SPEC section 4); the one definition.
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Hyperparameters of a BERT encoder (Devlin et al. 2018, section 3; Turc et al. 2019 sizes).

    Attributes:
        vocab_size: int. Number of WordPiece ids (rows of the word embedding table).
        hidden_size: int. Width H of every hidden state.
        num_layers: int. Number L of Transformer blocks.
        num_heads: int. Attention heads A; hidden_size must be divisible by it.
        intermediate_size: int. Width of the feed-forward inner layer (4H in the paper).
        hidden_activation: str. One of ACTIVATIONS. "gelu" is the exact erf form (Hugging Face
            "gelu"); "gelu_approximate" is the tanh form that google-research/bert calls "gelu".
        dropout_rate: float in [0, 1). Probability of dropping a unit of the hidden states.
        attention_dropout_rate: float in [0, 1). Dropout on the attention probabilities.
        max_sequence_length: int. Size of the position table, in tokens (incl. [CLS]/[SEP]).
        type_vocab_size: int. Number of segment ids.
        initializer_range: float. Stddev of the truncated-normal initializer.
        layer_norm_epsilon: float. LayerNorm epsilon (1e-12 in google-research/bert).

    Raises:
        ValueError: on a non-positive size, a hidden_size not divisible by num_heads, a dropout
            rate outside [0, 1) or an unknown activation.
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    hidden_activation: str = "gelu"
    dropout_rate: float = 0.1
    attention_dropout_rate: float = 0.1
    max_sequence_length: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_epsilon: float = 1e-12

    def __post_init__(self):
        for name in (
            "vocab_size",
            "hidden_size",
            "num_layers",
            "num_heads",
            "intermediate_size",
            "max_sequence_length",
            "type_vocab_size",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size={self.hidden_size} must be divisible by num_heads={self.num_heads}"
            )
        for name in ("dropout_rate", "attention_dropout_rate"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        if self.hidden_activation not in ACTIVATIONS:
            raise ValueError(
                f"hidden_activation={self.hidden_activation!r} is not one of {ACTIVATIONS}"
            )
        if self.initializer_range <= 0 or self.layer_norm_epsilon <= 0:
            raise ValueError("initializer_range and layer_norm_epsilon must be positive")

    # -- presets ---------------------------------------------------------------------------
    @classmethod
    def from_preset(cls, name: str, **overrides) -> "BertConfig":
        """Returns the named preset (see `PRESETS`), with keyword overrides.

        Raises:
            KeyError: if `name` is not a preset; the message lists the presets.
        """
        if name not in PRESETS:
            raise KeyError(f"unknown BERT preset {name!r}; presets: {sorted(PRESETS)}")
        return dataclasses.replace(PRESETS[name], **overrides)

    # -- JSON ------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json_file(self, path: str | os.PathLike) -> None:
        fileio.write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, values: dict) -> "BertConfig":
        """Builds a config from a dict in any of the three formats (ours, Hugging Face, Google).

        The format is recognised by its keys: `num_hidden_layers` marks a published config; one
        with `model_type` or `layer_norm_eps` is read as Hugging Face's, otherwise as Google's.

        Raises:
            ValueError: on unknown keys in our own format, or missing keys in any format.
        """
        if "num_hidden_layers" in values:
            if "model_type" in values or "layer_norm_eps" in values or "architectures" in values:
                return cls.from_hf_config(values)
            return cls.from_google_config(values)
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown BertConfig keys: {sorted(unknown)}")
        return cls(**values)

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> "BertConfig":
        """Reads our config.json, a google-research `bert_config.json` or a Hugging Face config.

        Raises:
            FileNotFoundError: if `path` does not exist (named in the message).
            ValueError: if the file is not UTF-8, not JSON (`fileio.read_json`'s
                `UserFileError`) or another JSON value than an object, or lacks a required key
                (both named).
        """
        path = os.fspath(path)
        if not fileio.exists(path):
            raise FileNotFoundError(f"BERT config file not found: {path}")
        values = fileio.read_json(path)
        if not isinstance(values, dict):
            raise ValueError(f"{path}: not a JSON object but {type(values).__name__}")
        try:
            return cls.from_dict(values)
        except (KeyError, ValueError, TypeError) as e:
            raise ValueError(f"{path}: {e}") from e

    @classmethod
    def from_google_config(cls, values: dict) -> "BertConfig":
        """google-research/bert `bert_config.json`; its "gelu" is the tanh form (modeling.py)."""
        act = values.get("hidden_act", "gelu")
        return cls(
            **_map_keys(values, _GOOGLE_KEYS), hidden_activation=_GOOGLE_ACTIVATIONS.get(act, act)
        )

    @classmethod
    def from_hf_config(cls, values: dict) -> "BertConfig":
        """Hugging Face `config.json` of a BertModel; its "gelu" is the exact erf form."""
        if values.get("model_type", "bert") != "bert":
            raise ValueError(f"model_type={values['model_type']!r} is not a BERT config")
        if values.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(
                "only absolute position embeddings are supported, got "
                f"{values['position_embedding_type']!r}"
            )
        act = values.get("hidden_act", "gelu")
        return cls(**_map_keys(values, _HF_KEYS), hidden_activation=_HF_ACTIVATIONS.get(act, act))


# Published name -> our name. google-research/bert and Hugging Face share these keys except the
# LayerNorm epsilon, which Google's config does not store (modeling.py hard-codes 1e-12).
_GOOGLE_KEYS = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "intermediate_size": "intermediate_size",
    "hidden_dropout_prob": "dropout_rate",
    "attention_probs_dropout_prob": "attention_dropout_rate",
    "max_position_embeddings": "max_sequence_length",
    "type_vocab_size": "type_vocab_size",
    "initializer_range": "initializer_range",
}
_HF_KEYS = dict(_GOOGLE_KEYS, layer_norm_eps="layer_norm_epsilon")
_OPTIONAL_KEYS = {
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "initializer_range",
    "layer_norm_eps",
    "type_vocab_size",
    "max_position_embeddings",
}
_GOOGLE_ACTIVATIONS = {"gelu": "gelu_approximate", "gelu_new": "gelu_approximate"}
_HF_ACTIVATIONS = {
    "gelu_new": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "gelu_fast": "gelu_approximate",
    "swish": "silu",
}


def _map_keys(values: dict, table: dict) -> dict:
    missing = [k for k in table if k not in values and k not in _OPTIONAL_KEYS]
    if missing:
        raise KeyError(f"config lacks required keys {missing}")
    return {ours: values[theirs] for theirs, ours in table.items() if theirs in values}


def _preset(layers: int, hidden: int) -> BertConfig:
    return BertConfig(
        hidden_size=hidden, num_layers=layers, num_heads=hidden // 64, intermediate_size=4 * hidden
    )


# Turc et al. 2019 ("Well-Read Students Learn Better") sizes: heads = H/64, intermediate = 4H.
PRESETS: dict[str, BertConfig] = {
    "bert_tiny": _preset(2, 128),
    "bert_mini": _preset(4, 256),
    "bert_small": _preset(4, 512),
    "bert_medium": _preset(8, 512),
    "bert_base": _preset(12, 768),
    "bert_large": _preset(24, 1024),
}


def check_max_seq_length(max_seq_length, max_sequence_length=None, is_pair=False) -> int:
    """The one check of a `max_seq_length` (tokens per packed example, [CLS]/[SEP] included).

    Rule: at least 2 for single texts (`[CLS] [SEP]`), 3 for pairs (`[CLS] A [SEP] B [SEP]`
    needs three special tokens), and never more than the encoder's position table
    `max_sequence_length` (PITFALLS: refuse at configuration or export time, not at the first
    long request). Fine-tuning, export, pretraining data and the task models all call it.

    Args:
        max_seq_length: int, the requested tokens per example.
        max_sequence_length: int or None, the encoder's position table size (None: unknown).
        is_pair: bool, two segments per example.

    Returns:
        max_seq_length as int.

    Raises:
        ValueError: "max_seq_length=600 exceeds the encoder's max_sequence_length=512 ..." or
            "max_seq_length must be >= 3 for sentence pairs ...", naming both numbers.
    """
    if isinstance(max_seq_length, bool) or int(max_seq_length) != max_seq_length:
        raise ValueError(f"max_seq_length must be an int, got {max_seq_length!r}")
    value = int(max_seq_length)
    minimum = 3 if is_pair else 2
    if value < minimum:
        what = "sentence pairs ([CLS] A [SEP] B [SEP])" if is_pair else "single texts ([CLS] [SEP])"
        raise ValueError(f"max_seq_length must be >= {minimum} for {what}, got {value}")
    if max_sequence_length is not None and value > int(max_sequence_length):
        raise ValueError(
            f"max_seq_length={value} exceeds the encoder's max_sequence_length="
            f"{int(max_sequence_length)} (the size of its position table)"
        )
    return value
