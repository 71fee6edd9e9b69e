"""Every checkpoint writer and reader on a URI (TensorFlow's in-memory `ram://`): the directory
is written there as typed, `load_encoder` reads it back with the same outputs, the vocab and
casing resolve there, and nothing is created on the local disk."""

import os
import uuid

import numpy as np
import pytest

from keras_bert import fileio
from keras_bert.checkpoints import (
    load_encoder,
    resolve_do_lower_case,
    resolve_vocab_file,
    save_encoder,
)
from keras_bert.models.bert_encoder import BertEncoder
from tests.checkpoints.helpers import (
    CFG,
    VOCAB,
    VOCAB_TEXT,
    encoder_outputs,
    random_hf_weights,
    write_hf_dir,
)

FILES = {
    "keras_bert": ["config.json", "encoder.weights.h5", "keras_bert_checkpoint.json", "vocab.txt"],
    "huggingface": ["config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"],
    "google": [
        "bert_config.json",
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
        "vocab.txt",
    ],
}


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """A tanh-GELU encoder: one every format can hold."""
    hf_dir = write_hf_dir(tmp_path_factory.mktemp("hf"), CFG, random_hf_weights(CFG, seed=3))
    exact = load_encoder(hf_dir)
    encoder = BertEncoder.from_config_object(
        exact.bert_config, hidden_activation="gelu_approximate"
    )
    encoder.build()
    encoder.set_weights(exact.get_weights())
    return encoder


@pytest.fixture
def ram_root(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # where a folded "ram:/..." path would land
    root = f"ram://checkpoints-{uuid.uuid4().hex[:8]}"
    fileio.makedirs(root)
    fileio.write_text(f"{root}/vocab.txt", VOCAB_TEXT)
    yield root
    fileio.rmtree(root)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_write_and_read_back_on_ram(encoder, ram_root, fmt):
    directory = f"{ram_root}/uncased_{fmt}"
    out = save_encoder(encoder, directory, f"{ram_root}/vocab.txt", True, format=fmt)
    assert out == directory
    assert fileio.listdir(directory) == FILES[fmt]
    loaded = load_encoder(directory)
    for a, b in zip(encoder_outputs(loaded), encoder_outputs(encoder)):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert resolve_vocab_file(directory) == f"{directory}/vocab.txt"
    assert fileio.read_text(resolve_vocab_file(directory)).split("\n")[:-1] == list(VOCAB)
    assert resolve_do_lower_case(directory) is True


def test_google_checkpoint_prefix_on_ram(encoder, ram_root):
    """On `ram://` a prefix also reads as a directory; it is still taken as a prefix."""
    directory = f"{ram_root}/uncased_L-2_H-8"
    save_encoder(encoder, directory, f"{ram_root}/vocab.txt", format="google")
    prefix = f"{directory}/bert_model.ckpt"
    loaded = load_encoder(prefix)
    for a, b in zip(encoder_outputs(loaded), encoder_outputs(encoder)):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert resolve_vocab_file(prefix) == f"{directory}/vocab.txt"
    assert resolve_do_lower_case(prefix) is True


def test_keras_hub_preset_on_ram(encoder, ram_root):
    pytest.importorskip("keras_hub")
    directory = f"{ram_root}/preset"
    save_encoder(encoder, directory, f"{ram_root}/vocab.txt", False, format="keras_hub")
    assert {"config.json", "model.weights.h5", "tokenizer.json"} <= set(fileio.listdir(directory))
    loaded = load_encoder(directory)
    for a, b in zip(encoder_outputs(loaded), encoder_outputs(encoder)):
        np.testing.assert_allclose(a, b, atol=1e-5)
    vocab = resolve_vocab_file(directory)
    assert vocab == f"{directory}/assets/tokenizer/vocabulary.txt"
    assert fileio.read_text(vocab).split("\n")[:-1] == list(VOCAB)
    assert resolve_do_lower_case(directory) is False


def test_missing_checkpoint_on_ram_names_the_uri(ram_root):
    with pytest.raises(FileNotFoundError, match=f"{ram_root}/none"):
        load_encoder(f"{ram_root}/none")
