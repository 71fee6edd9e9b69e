"""`save_encoder(..., format=...)`: Hugging Face, keras-hub and google-research, and back.

The expected tensors come from the test helpers' own name rules (not from our tables): a Hugging
Face directory read and written again gives back the very tensors it was made of, and the
google-research checkpoint holds `hf_to_google` of them. The keras-hub preset is read by
keras-hub's own `BertBackbone.from_preset` and compared with our forward pass.
"""

import json

import numpy as np
import pytest
import tensorflow as tf
from safetensors import safe_open

from keras_bert.checkpoints import (
    load_encoder,
    resolve_do_lower_case,
    resolve_vocab_file,
    save_encoder,
)
from tests.checkpoints.helpers import hf_to_google, numpy_bert, random_hf_weights, write_hf_dir

CFG = {"vocab_size": 23, "hidden_size": 8, "num_attention_heads": 2, "intermediate_size": 12,
       "num_hidden_layers": 2, "max_position_embeddings": 7, "type_vocab_size": 3,
       "hidden_act": "gelu", "layer_norm_eps": 1e-12}
FEATURES = {"input_word_ids": np.array([[1, 5, 22, 7, 2], [1, 9, 2, 0, 0]], np.int32),
            "input_mask": np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32),
            "input_type_ids": np.array([[0, 0, 1, 2, 1], [0, 1, 1, 0, 0]], np.int32)}
MASK = FEATURES["input_mask"].astype(bool)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(18)]


def _ours(encoder):
    out = encoder(FEATURES, training=False)
    return np.asarray(out["sequence_output"]), np.asarray(out["pooled_output"])


def _max_diff(a, b):
    return max(float(np.abs(np.asarray(a[0])[MASK] - np.asarray(b[0])[MASK]).max()),
               float(np.abs(np.asarray(a[1]) - np.asarray(b[1])).max()))


@pytest.fixture(scope="module")
def hf_tensors():
    return random_hf_weights(CFG, seed=7)


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory, hf_tensors):
    return write_hf_dir(tmp_path_factory.mktemp("hf"), CFG, hf_tensors)


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(t + "\n" for t in VOCAB))
    return str(path)


def test_huggingface_round_trip_gives_back_the_tensors(tmp_path, hf_dir, hf_tensors, vocab_file):
    encoder = load_encoder(hf_dir)
    out = save_encoder(encoder, tmp_path / "out", vocab_file, False, format="huggingface")
    with safe_open(f"{out}/model.safetensors", framework="numpy") as f:
        written = {name: f.get_tensor(name) for name in f.keys()}
        assert f.metadata() == {"format": "pt"}
    assert written.keys() == hf_tensors.keys()
    for name, value in hf_tensors.items():
        np.testing.assert_array_equal(written[name], value, err_msg=name)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert {k: config[k] for k in CFG} == CFG and config["model_type"] == "bert"
    back = load_encoder(out)
    assert back.bert_config == encoder.bert_config
    assert _max_diff(_ours(back), numpy_bert(written, FEATURES, 2, 2)) <= 1e-5
    assert resolve_do_lower_case(out) is False
    assert open(resolve_vocab_file(out)).read().split() == VOCAB


def test_huggingface_tanh_gelu_is_gelu_new(tmp_path, hf_dir):
    encoder = load_encoder(hf_dir, hidden_activation="gelu_approximate")
    save_encoder(encoder, tmp_path, format="huggingface")
    assert json.loads((tmp_path / "config.json").read_text())["hidden_act"] == "gelu_new"
    assert load_encoder(tmp_path).bert_config.hidden_activation == "gelu_approximate"


def test_google_checkpoint_has_modeling_py_names(tmp_path, hf_dir, hf_tensors, vocab_file):
    encoder = load_encoder(hf_dir, hidden_activation="gelu_approximate")
    directory = tmp_path / "uncased_out"
    save_encoder(encoder, directory, vocab_file, format="google")
    expected = hf_to_google(hf_tensors)
    reader = tf.train.load_checkpoint(str(directory / "bert_model.ckpt"))
    assert set(reader.get_variable_to_shape_map()) == set(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value, err_msg=name)
    config = json.loads((directory / "bert_config.json").read_text())
    assert config["hidden_act"] == "gelu" and "layer_norm_eps" not in config
    back = load_encoder(directory)
    assert back.bert_config == encoder.bert_config
    assert _max_diff(_ours(back), numpy_bert(hf_tensors, FEATURES, 2, 2, approximate=True)) <= 1e-5
    assert resolve_do_lower_case(directory) is True  # "uncased" in the directory name


def test_formats_refuse_what_they_cannot_represent(tmp_path, hf_dir):
    exact = load_encoder(hf_dir)  # exact erf GELU
    with pytest.raises(ValueError, match="google-research/bert has no name for "
                                         "hidden_activation='gelu'"):
        save_encoder(exact, tmp_path / "g", format="google")
    with pytest.raises(ValueError, match="keras-hub's BertBackbone always applies the tanh GELU"):
        save_encoder(exact, tmp_path / "k", format="keras_hub")
    causal = load_encoder(hf_dir, causal=True)
    with pytest.raises(ValueError, match="a causal encoder has no Hugging Face BertModel"):
        save_encoder(causal, tmp_path / "h", format="huggingface")
    with pytest.raises(ValueError, match=r"unknown checkpoint format 'onnx'; formats: \["):
        save_encoder(exact, tmp_path / "o", format="onnx")


def test_default_format_is_unchanged(tmp_path, hf_dir):
    save_encoder(load_encoder(hf_dir), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config.json", "encoder.weights.h5", "keras_bert_checkpoint.json"]


def test_keras_hub_preset_loads_in_keras_hub(tmp_path, hf_dir, vocab_file):
    import keras_hub

    encoder = load_encoder(hf_dir, hidden_activation="gelu_approximate")
    save_encoder(encoder, tmp_path, vocab_file, True, format="keras_hub")
    backbone = keras_hub.models.BertBackbone.from_preset(str(tmp_path))
    out = backbone({"token_ids": FEATURES["input_word_ids"],
                    "segment_ids": FEATURES["input_type_ids"],
                    "padding_mask": FEATURES["input_mask"]}, training=False)
    ours = _ours(encoder)
    assert _max_diff(ours, (out["sequence_output"], out["pooled_output"])) <= 1e-5
    tokenizer = keras_hub.models.BertTokenizer.from_preset(str(tmp_path))
    assert tokenizer.get_vocabulary() == VOCAB
    assert resolve_do_lower_case(tmp_path) is True
    assert open(resolve_vocab_file(tmp_path)).read().split() == VOCAB
    assert _max_diff(_ours(load_encoder(tmp_path)), ours) <= 1e-6
