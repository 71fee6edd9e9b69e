import dataclasses
import json

import pytest

from keras_bert.config import PRESETS, BertConfig


def test_presets_follow_turc_sizes():
    expected = {
        "bert_tiny": (2, 128),
        "bert_mini": (4, 256),
        "bert_small": (4, 512),
        "bert_medium": (8, 512),
        "bert_base": (12, 768),
        "bert_large": (24, 1024),
    }
    assert set(PRESETS) == set(expected)
    for name, (layers, hidden) in expected.items():
        cfg = BertConfig.from_preset(name)
        assert (cfg.num_layers, cfg.hidden_size) == (layers, hidden)
        assert cfg.num_heads == hidden // 64 and cfg.intermediate_size == 4 * hidden
        assert cfg.layer_norm_epsilon == 1e-12


def test_unknown_preset_lists_presets():
    with pytest.raises(KeyError, match="bert_tiny"):
        BertConfig.from_preset("bert_huge")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(hidden_size=10, num_heads=4), "hidden_size=10 must be divisible by num_heads=4"),
        (dict(num_layers=0), "num_layers must be a positive int"),
        (dict(dropout_rate=1.0), r"dropout_rate must be in \[0, 1\)"),
        (dict(hidden_activation="gelu_new"), "hidden_activation='gelu_new' is not one of"),
    ],
)
def test_validation_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BertConfig(**kwargs)


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        BertConfig().hidden_size = 3


GOOGLE = {
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 128,
    "initializer_range": 0.02,
    "intermediate_size": 512,
    "max_position_embeddings": 512,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "type_vocab_size": 2,
    "vocab_size": 30522,
}


def test_google_config_gelu_is_tanh_form(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(GOOGLE))
    cfg = BertConfig.from_json_file(path)
    assert cfg.hidden_activation == "gelu_approximate"
    assert (cfg.num_layers, cfg.num_heads, cfg.max_sequence_length) == (2, 2, 512)
    assert cfg.layer_norm_epsilon == 1e-12


def test_hf_config_gelu_is_exact_form(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(GOOGLE, model_type="bert", layer_norm_eps=1e-7)))
    cfg = BertConfig.from_json_file(path)
    assert cfg.hidden_activation == "gelu" and cfg.layer_norm_epsilon == 1e-7
    path.write_text(json.dumps(dict(GOOGLE, model_type="bert", hidden_act="gelu_new")))
    assert BertConfig.from_json_file(path).hidden_activation == "gelu_approximate"


def test_own_json_round_trip(tmp_path):
    cfg = BertConfig.from_preset("bert_mini", hidden_activation="relu")
    cfg.to_json_file(tmp_path / "c.json")
    assert BertConfig.from_json_file(tmp_path / "c.json") == cfg


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        BertConfig.from_json_file(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="bad.json: not JSON: Expecting"):
        BertConfig.from_json_file(bad)
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"num_hidden_layers": 2, "model_type": "bert"}))
    with pytest.raises(ValueError, match="partial.json.*lacks required keys"):
        BertConfig.from_json_file(partial)
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"hidden_sise": 2}))
    with pytest.raises(ValueError, match="hidden_sise"):
        BertConfig.from_json_file(unknown)
    # Found by the bert_config fuzz target: a JSON string holding "num_hidden_layers" was taken
    # for Google's config and raised AttributeError ('str' object has no attribute 'get').
    for text, kind in (('"num_hidden_layers"', "str"), ("[1]", "list"), ("7", "int")):
        other = tmp_path / "other.json"
        other.write_text(text)
        with pytest.raises(ValueError) as raised:
            BertConfig.from_json_file(other)
        assert str(raised.value) == f"{other}: not a JSON object but {kind}"
