"""Fast tests of the checkpoint loaders on tiny, pairwise-distinct sizes.

Checkpoints are written by the test helpers with their own name rules, then loaded by our
converters and compared with the float64 NumPy forward pass that reads the HF names directly.
"""

import json
import os

import numpy as np
import pytest

from keras_bert import BertEncoder
from keras_bert import checkpoints
from tests.checkpoints.helpers import (
    CFG,
    FEATURES,
    MASK,
    encoder_outputs,
    hf_to_google,
    numpy_bert,
    random_hf_weights,
    write_google_dir,
    write_hf_dir,
)
from tests.tiny import tiny_encoder


def _assert_close(ours, ref, atol=1e-5):
    np.testing.assert_allclose(ours[0][MASK], ref[0][MASK], atol=atol)
    np.testing.assert_allclose(ours[1], ref[1], atol=atol)


@pytest.fixture(scope="module")
def hf_tensors():
    return random_hf_weights(CFG, seed=1)


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory, hf_tensors):
    return write_hf_dir(
        tmp_path_factory.mktemp("hf"),
        CFG,
        dict(hf_tensors, **{"embeddings.position_ids": np.arange(7, dtype=np.int64)[None]}),
    )


@pytest.fixture(scope="module")
def hf_encoder(hf_dir):
    return checkpoints.load_encoder(hf_dir)


def test_hf_dir_matches_numpy_exact_gelu(hf_encoder, hf_tensors):
    assert hf_encoder.bert_config.hidden_activation == "gelu"
    _assert_close(encoder_outputs(hf_encoder), numpy_bert(hf_tensors, FEATURES, 2, 2))


def test_hf_bert_prefix_gamma_beta_and_heads(tmp_path, hf_tensors, hf_encoder):
    tensors = {}
    for name, value in random_hf_weights(CFG, seed=1, heads=True, prefix="bert.").items():
        tensors[
            name.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
                "LayerNorm.bias", "LayerNorm.beta"
            )
        ] = value
    directory = write_hf_dir(tmp_path, CFG, tensors)
    source = checkpoints.read_checkpoint(directory)
    assert set(source.used()) | set(source.ignored) == set(tensors)
    assert len(source.used()) == len(set(source.used().values())) == 2 * 16 + 7 + 7
    assert source.ignored["cls.predictions.decoder.weight"].startswith("MLM decoder tied")
    assert source.used()["bert.embeddings.LayerNorm.gamma"] == "embeddings/layer_norm/gamma"
    assert source.used()["cls.seq_relationship.weight"] == "next_sentence/kernel"
    encoder = checkpoints.load_encoder(directory)
    np.testing.assert_array_equal(encoder_outputs(encoder)[0], encoder_outputs(hf_encoder)[0])

    from keras_bert.models import BertPretrainer

    pretrainer = BertPretrainer(encoder)
    checkpoints.load_pretrainer_weights(pretrainer, directory)
    np.testing.assert_array_equal(
        pretrainer.next_sentence.dense.kernel.numpy(), tensors["cls.seq_relationship.weight"].T
    )
    np.testing.assert_array_equal(
        pretrainer.masked_lm.transform.kernel.numpy(),
        tensors["cls.predictions.transform.dense.weight"].T,
    )


def test_google_tf1_path_uses_tanh_gelu_and_module_prefix(tmp_path, hf_tensors, hf_dir):
    heads = random_hf_weights(CFG, seed=1, heads=True)
    tensors = hf_to_google(heads)
    directory = tmp_path / "cased_L-2_H-8_A-2"
    write_google_dir(directory, CFG, tensors, scope="module/")
    encoder = checkpoints.load_encoder(str(directory))
    assert encoder.bert_config.hidden_activation == "gelu_approximate"
    _assert_close(
        encoder_outputs(encoder), numpy_bert(hf_tensors, FEATURES, 2, 2, approximate=True)
    )
    np.testing.assert_allclose(
        encoder_outputs(encoder)[0],
        encoder_outputs(checkpoints.load_encoder(hf_dir, hidden_activation="gelu_approximate"))[0],
        atol=1e-6,
    )
    source = checkpoints.read_checkpoint(str(directory))
    assert source.used()["module/cls/seq_relationship/output_weights"] == "next_sentence/kernel"
    assert source.ignored["module/global_step"] == "training step counter, not a model weight"
    # "cased" in the directory name
    assert checkpoints.resolve_do_lower_case(str(directory)) is False


def test_own_directory_round_trip(tmp_path, hf_encoder, uncased_vocab):
    out = checkpoints.save_encoder(
        hf_encoder, tmp_path / "run", vocab_file=uncased_vocab, do_lower_case=True
    )
    assert sorted(os.listdir(out)) == [
        "config.json",
        "encoder.weights.h5",
        "keras_bert_checkpoint.json",
        "vocab.txt",
    ]
    assert checkpoints.detect_format(out) == ("keras_bert", out)
    loaded = checkpoints.load_encoder(out)
    np.testing.assert_array_equal(encoder_outputs(loaded)[0], encoder_outputs(hf_encoder)[0])
    assert loaded.bert_config == hf_encoder.bert_config
    assert checkpoints.resolve_do_lower_case(out) is True
    assert checkpoints.resolve_vocab_file(out) == os.path.join(out, "vocab.txt")
    tanh = checkpoints.load_encoder(out, hidden_activation="gelu_approximate")
    assert tanh.bert_config.hidden_activation == "gelu_approximate"


def test_keras_file_round_trip(tmp_path, hf_encoder):
    path = str(tmp_path / "encoder.keras")
    hf_encoder.save(path)
    loaded = checkpoints.load_encoder(path)
    assert isinstance(loaded, BertEncoder)
    np.testing.assert_allclose(
        encoder_outputs(loaded)[0], encoder_outputs(hf_encoder)[0], atol=1e-6
    )
    causal = checkpoints.load_encoder(path, causal=True)
    assert causal.causal and not np.allclose(
        encoder_outputs(causal)[0], encoder_outputs(hf_encoder)[0]
    )


# -- errors ----------------------------------------------------------------------------------


def _hf_dir_with(tmp_path, tensors, cfg=CFG):
    return write_hf_dir(tmp_path, cfg, tensors)


def test_missing_key_is_listed(tmp_path, hf_tensors):
    tensors = dict(hf_tensors)
    del tensors["encoder.layer.1.output.dense.bias"], tensors["pooler.dense.weight"]
    with pytest.raises(
        checkpoints.CheckpointError,
        match=r"missing variables .*\['encoder\.layer\.1\.output"
        r"\.dense\.bias', 'pooler\.dense\.weight'\]",
    ):
        checkpoints.load_encoder(_hf_dir_with(tmp_path, tensors))


def test_unexpected_key_is_listed(tmp_path, hf_tensors):
    tensors = dict(hf_tensors, **{"classifier.weight": np.zeros((3, 8), np.float32)})
    with pytest.raises(
        checkpoints.CheckpointError,
        match=r"model\.safetensors: unexpected variables .*\['classifier\.weight'\]",
    ):
        checkpoints.load_encoder(_hf_dir_with(tmp_path, tensors))


def test_extra_layer_is_unexpected(tmp_path):
    tensors = random_hf_weights(dict(CFG, num_hidden_layers=3))
    with pytest.raises(
        checkpoints.CheckpointError, match=r"unexpected variables .*'encoder\.layer\.2\."
    ):
        checkpoints.load_encoder(_hf_dir_with(tmp_path, tensors))  # config says 2 layers


def test_partial_head_is_missing_keys(tmp_path):
    tensors = random_hf_weights(CFG, heads=True)
    del tensors["cls.seq_relationship.bias"]
    with pytest.raises(
        checkpoints.CheckpointError, match=r"missing variables .*\['cls\.seq_relationship\.bias'\]"
    ):
        checkpoints.read_checkpoint(_hf_dir_with(tmp_path, tensors))


def test_untied_decoder_is_an_error(tmp_path):
    tensors = random_hf_weights(CFG, heads=True)
    tensors["cls.predictions.decoder.weight"] = tensors["cls.predictions.decoder.weight"] + 1.0
    with pytest.raises(
        checkpoints.CheckpointError, match=r"'cls\.predictions\.decoder\.weight' differs"
    ):
        checkpoints.read_checkpoint(_hf_dir_with(tmp_path, tensors))


def test_shape_mismatch_names_the_variable(tmp_path, hf_tensors):
    tensors = dict(hf_tensors)
    tensors["encoder.layer.0.intermediate.dense.weight"] = np.zeros((11, 8), np.float32)
    with pytest.raises(
        checkpoints.CheckpointError,
        match=r"shape mismatch for variable 'encoder\.layer\.0\.intermediate\.dense"
        r"\.weight': checkpoint has \(8, 11\), the model's 'layer_0/intermediate/"
        r"kernel' needs \(8, 12\)",
    ):
        checkpoints.load_encoder(_hf_dir_with(tmp_path, tensors))


def _google_dir_with(directory, name, value):
    """A google-research directory of random CFG weights whose variable `name` is `value`
    (replaced or added): one checkpoint flaw at a time, for the loader to name."""
    tensors = hf_to_google(random_hf_weights(CFG))
    tensors[name] = value
    write_google_dir(directory, CFG, tensors, slots=False)
    return str(directory)


def test_google_shape_mismatch_and_unexpected(tmp_path):
    wrong_shape = _google_dir_with(
        tmp_path / "a", "bert/embeddings/token_type_embeddings", np.zeros((2, 8), np.float32)
    )
    with pytest.raises(
        checkpoints.CheckpointError,
        match=r"bert_model\.ckpt: shape mismatch for variable "
        r"'bert/embeddings/token_type_embeddings': checkpoint has \(2, 8\)",
    ):
        checkpoints.load_encoder(wrong_shape)
    unexpected = _google_dir_with(
        tmp_path / "b",
        "bert/encoder/layer_0/attention/self/query/lora",
        np.zeros((8,), np.float32),
    )
    with pytest.raises(
        checkpoints.CheckpointError,
        match=r"unexpected variables .*\['bert/encoder/layer_0/"
        r"attention/self/query/lora'\]",
    ):
        checkpoints.load_encoder(unexpected)


def test_missing_files_are_named(tmp_path, hf_tensors, hf_dir):
    directory = _hf_dir_with(tmp_path / "hf", hf_tensors)
    os.remove(os.path.join(directory, "model.safetensors"))
    with pytest.raises(
        FileNotFoundError,
        match=r"Hugging Face weights file not found: .*"
        r"hf/model\.safetensors",
    ):
        checkpoints.load_encoder(directory)
    google = tmp_path / "google"
    write_google_dir(google, CFG, hf_to_google(hf_tensors), slots=False)
    os.remove(google / "bert_config.json")
    with pytest.raises(
        FileNotFoundError, match=r"config file not found: .*google/bert_config\.json"
    ):
        checkpoints.load_encoder(str(google))
    with pytest.raises(FileNotFoundError, match=r"TF checkpoint not found: .*nothere\.ckpt\.index"):
        checkpoints.load_encoder(str(tmp_path / "nothere.ckpt"))
    with pytest.raises(FileNotFoundError, match=r"neither a pretrained preset"):
        checkpoints.load_encoder(str(tmp_path / "no_such_dir"))
    with pytest.raises(FileNotFoundError, match=r"vocab file not found: .*hf\d*/vocab\.txt"):
        checkpoints.resolve_vocab_file(hf_dir)
    own = checkpoints.save_encoder(tiny_encoder(), tmp_path / "own")
    os.remove(os.path.join(own, "encoder.weights.h5"))
    with pytest.raises(
        FileNotFoundError, match=r"keras-bert weights file not found: .*own/encoder\.weights\.h5"
    ):
        checkpoints.load_encoder(own)
    os.remove(os.path.join(own, "keras_bert_checkpoint.json"))
    os.remove(os.path.join(own, "config.json"))
    with pytest.raises(
        FileNotFoundError, match=r"no checkpoint found in directory .*own: expected"
    ):
        checkpoints.load_encoder(own)


def test_own_weights_that_do_not_fit_name_the_file(tmp_path):
    small = tiny_encoder()
    out = checkpoints.save_encoder(small, tmp_path)
    with open(os.path.join(out, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(dict(config, num_layers=2), f)
    with pytest.raises(ValueError, match=r"encoder\.weights\.h5 does not fit the encoder"):
        checkpoints.load_encoder(out)


def test_size_preset_and_unknown_case():
    with pytest.raises(
        ValueError, match=r"'bert_tiny' is a size preset with no pretrained weights"
    ):
        checkpoints.load_encoder("bert_tiny")


def test_do_lower_case_unknown_needs_a_flag(tmp_path, hf_tensors):
    directory = write_hf_dir(tmp_path / "model", CFG, hf_tensors, do_lower_case=None)
    with pytest.raises(ValueError, match=r"cannot tell whether .* is cased or uncased"):
        checkpoints.resolve_do_lower_case(directory)
    assert checkpoints.resolve_do_lower_case(directory, default=False) is False


def test_dtype_policy_and_head_ledger_log(tmp_path, caplog):
    import logging

    tensors = random_hf_weights(CFG, seed=1, heads=True)
    directory = write_hf_dir(tmp_path, CFG, tensors)
    with caplog.at_level(logging.INFO, logger="keras_bert.checkpoints.loader"):
        encoder = checkpoints.load_encoder(directory, dtype="mixed_bfloat16")
    assert encoder.dtype_policy.name == "mixed_bfloat16"
    np.testing.assert_array_equal(
        encoder.embeddings.word_embeddings.embeddings.numpy(),
        tensors["embeddings.word_embeddings.weight"],
    )  # float32 vars
    assert (
        "'cls.seq_relationship.weight': 'pretraining head, not part of a bare BertEncoder"
        in caplog.text
    )
    assert "'cls.predictions.decoder.weight': 'MLM decoder tied" in caplog.text
