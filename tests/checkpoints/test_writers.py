"""`save_encoder(..., format=...)`: Hugging Face, keras-hub and google-research, and back.

The expected tensors come from the test helpers' own name rules (not from our tables): a Hugging
Face directory read and written again gives back the very tensors it was made of, and the
google-research checkpoint holds `hf_to_google` of them. The keras-hub preset is read by
keras-hub's own `BertBackbone.from_preset` and compared with our forward pass.
"""

import errno
import json
import subprocess
import sys

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
from keras_bert.models.bert_encoder import BertEncoder
from tests.conftest import REPO_ROOT
from tests.checkpoints.helpers import (
    CFG,
    FEATURES,
    VOCAB,
    VOCAB_TEXT,
    encoder_outputs,
    max_diff,
    hf_to_google,
    keras_hub_outputs,
    numpy_bert,
    random_hf_weights,
    write_hf_dir,
)


@pytest.fixture(scope="module")
def hf_tensors():
    return random_hf_weights(CFG, seed=7)


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory, hf_tensors):
    return write_hf_dir(tmp_path_factory.mktemp("hf"), CFG, hf_tensors)


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text(VOCAB_TEXT)
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
    assert max_diff(encoder_outputs(back), numpy_bert(written, FEATURES, 2, 2)) <= 1e-5
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
    assert (
        max_diff(encoder_outputs(back), numpy_bert(hf_tensors, FEATURES, 2, 2, approximate=True))
        <= 1e-5
    )
    assert resolve_do_lower_case(directory) is True  # "uncased" in the directory name


REBUILD = (
    ". To convert anyway, rebuild the encoder with values the format holds "
    "(`new = BertEncoder.from_config_object(encoder.bert_config, <setting>=<value>)`, "
    "`new.build()`, `new.set_weights(encoder.get_weights())`), knowing that its outputs "
    "change "
    "(docs/checkpoints.md, 'Migration')"
)
HUB_GELU = "keras-hub's BertBackbone always applies the tanh GELU (our 'gelu_approximate')"
GOOGLE_ACT = (
    "modeling.py's get_activation names only 'gelu' (the tanh form, our "
    "'gelu_approximate'), 'relu' and 'tanh'"
)


@pytest.fixture(scope="module")
def tanh_encoder(hf_dir):
    """Holdable by every format: tanh GELU, epsilon 1e-12, dropouts 0.1 / 0.1, stddev 0.02."""
    return load_encoder(hf_dir, hidden_activation="gelu_approximate")


@pytest.mark.parametrize(
    "fmt, overrides, refused",
    [
        (
            "huggingface",
            {"causal": True},
            "causal=True: transformers' BertModel attends in both directions (its is_decoder flag is "
            "a decoder mode, not read back by load_encoder)",
        ),
        ("keras_hub", {"hidden_activation": "gelu"}, f"hidden_activation='gelu': {HUB_GELU}"),
        ("keras_hub", {"hidden_activation": "relu"}, f"hidden_activation='relu': {HUB_GELU}"),
        (
            "keras_hub",
            {"layer_norm_epsilon": 1e-5},
            "layer_norm_epsilon=1e-05: keras-hub's BertBackbone fixes it at 1e-12",
        ),
        (
            "keras_hub",
            {"attention_dropout_rate": 0.0},
            "attention_dropout_rate=0.0: keras-hub's BertBackbone has one dropout for the hidden "
            "states and the attention probabilities (it would keep dropout_rate=0.1)",
        ),
        (
            "keras_hub",
            {"initializer_range": 0.05},
            "initializer_range=0.05: keras-hub's BertBackbone fixes its initializer stddev at 0.02",
        ),
        (
            "keras_hub",
            {"causal": True},
            "causal=True: keras-hub's BertBackbone attends in both directions",
        ),
        (
            "keras_hub",
            {"layer_norm_epsilon": 1e-5, "causal": True},
            "layer_norm_epsilon=1e-05: keras-hub's BertBackbone fixes it at 1e-12; causal=True: "
            "keras-hub's BertBackbone attends in both directions",
        ),
        ("google", {"hidden_activation": "gelu"}, f"hidden_activation='gelu': {GOOGLE_ACT}"),
        ("google", {"hidden_activation": "silu"}, f"hidden_activation='silu': {GOOGLE_ACT}"),
        (
            "google",
            {"layer_norm_epsilon": 1e-5},
            "layer_norm_epsilon=1e-05: modeling.py's layer_norm fixes it at 1e-12",
        ),
        (
            "google",
            {"causal": True},
            "causal=True: modeling.py's encoder attends in both directions",
        ),
    ],
)
def test_writer_refuses_the_settings_its_format_cannot_hold(
    tmp_path, tanh_encoder, fmt, overrides, refused
):
    encoder = BertEncoder.from_config_object(tanh_encoder.bert_config, **overrides)
    with pytest.raises(ValueError) as raised:
        save_encoder(encoder, tmp_path / "out", format=fmt)
    assert str(raised.value) == f"format={fmt!r} cannot hold {refused}{REBUILD}"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name, do_lower_case", [("uncased_out", False), ("cased_out", True)])
def test_google_refuses_a_casing_its_directory_name_contradicts(
    tmp_path, tanh_encoder, name, do_lower_case
):
    with pytest.raises(ValueError) as raised:
        save_encoder(tanh_encoder, tmp_path / name, do_lower_case=do_lower_case, format="google")
    assert str(raised.value) == (
        f"format='google' cannot hold do_lower_case={do_lower_case}: google-research/bert "
        f"records the casing only in the directory name, and {name!r} says the opposite{REBUILD}"
    )
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize(
    "fmt, name, settings",
    [
        (
            "huggingface",
            "out",
            {
                "hidden_activation": "silu",
                "dropout_rate": 0.2,
                "attention_dropout_rate": 0.05,
                "initializer_range": 0.03,
                "layer_norm_epsilon": 1e-5,
            },
        ),
        ("keras_hub", "out", {"dropout_rate": 0.2, "attention_dropout_rate": 0.2}),
        (
            "google",
            "cased_out",
            {
                "hidden_activation": "relu",
                "dropout_rate": 0.2,
                "attention_dropout_rate": 0.05,
                "initializer_range": 0.03,
            },
        ),
    ],
)
def test_writer_keeps_every_setting_it_does_not_refuse(tmp_path, tanh_encoder, fmt, name, settings):
    # Non-default values of every setting the format holds (CFG's sizes are non-default too:
    # max_position_embeddings=7, type_vocab_size=3); reading back gives the same config.
    encoder = BertEncoder.from_config_object(tanh_encoder.bert_config, **settings)
    encoder.build()
    encoder.set_weights(tanh_encoder.get_weights())
    out = save_encoder(encoder, tmp_path / name, do_lower_case=False, format=fmt)
    back = load_encoder(out)
    assert back.bert_config == encoder.bert_config and back.causal is False
    assert back.bert_config.max_sequence_length == 7 and back.bert_config.type_vocab_size == 3
    np.testing.assert_array_equal(encoder_outputs(back)[0], encoder_outputs(encoder)[0])


def test_unknown_format_is_refused(tmp_path, tanh_encoder):
    with pytest.raises(ValueError, match=r"unknown checkpoint format 'onnx'; formats: \["):
        save_encoder(tanh_encoder, tmp_path / "o", format="onnx")


def test_default_format_is_unchanged(tmp_path, hf_dir):
    save_encoder(load_encoder(hf_dir), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config.json",
        "encoder.weights.h5",
        "keras_bert_checkpoint.json",
    ]


def test_keras_hub_preset_loads_in_keras_hub(tmp_path, hf_dir, vocab_file):
    import keras_hub

    encoder = load_encoder(hf_dir, hidden_activation="gelu_approximate")
    save_encoder(encoder, tmp_path, vocab_file, True, format="keras_hub")
    backbone = keras_hub.models.BertBackbone.from_preset(str(tmp_path))
    ours = encoder_outputs(encoder)
    assert max_diff(ours, keras_hub_outputs(backbone)) <= 1e-5
    tokenizer = keras_hub.models.BertTokenizer.from_preset(str(tmp_path))
    assert tokenizer.get_vocabulary() == VOCAB
    assert resolve_do_lower_case(tmp_path) is True
    assert open(resolve_vocab_file(tmp_path)).read().split() == VOCAB
    assert max_diff(encoder_outputs(load_encoder(tmp_path)), ours) <= 1e-6


def test_keras_files_stage_their_weights_on_disk_not_in_memory(tmp_path):
    """Inside `weights_through_disk` Keras takes its own large-model path (a temporary file
    beside the archive, not an in-memory copy of the weights), and the switch is put back after,
    also when the block fails; a file saved and read that way holds the same weights."""
    from keras.src.saving import saving_lib

    from keras_bert.checkpoints import keras_format
    from tests.tiny import tiny_encoder

    encoder = tiny_encoder()
    encoder.build()
    original = saving_lib.is_memory_sufficient
    assert original(encoder)  # this machine has room: Keras would stage in memory
    with keras_format.weights_through_disk():
        assert saving_lib.is_memory_sufficient(encoder) is False
    assert saving_lib.is_memory_sufficient is original
    with pytest.raises(RuntimeError), keras_format.weights_through_disk():
        raise RuntimeError("a failed save")
    assert saving_lib.is_memory_sufficient is original
    path = tmp_path / "encoder.keras"
    keras_format.save_keras_file(encoder, path)
    loaded = keras_format.load_keras_model(path)
    for a, b in zip(encoder.weights, loaded.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


# A child process under RLIMIT_FSIZE (every file it writes at most 16 KiB: a full disk, EFBIG):
# a weights file and a .keras file of a compiled tiny classifier do not fit; with the limit
# lifted, both save. Without `check_room`, HDF5 met the limit itself and the process ended in a
# segmentation fault.
_SAVE_ON_A_FULL_DISK = """
import os, resource, sys
import keras
from keras_bert.checkpoints.keras_format import save_keras_file, save_weights_file
from keras_bert.tasks import TextClassifier
from tests.tiny import tiny_encoder

out = sys.argv[1]
task = TextClassifier(tiny_encoder(), 2)
task.build()
task.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
task.optimizer.build(task.trainable_variables)
unlimited = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 10, unlimited[1]))
for save, name in ((save_weights_file, "ckpt.weights.h5"), (save_keras_file, "best.keras")):
    try:
        save(task, os.path.join(out, name))
    except OSError as e:
        print(e.errno, e.strerror.split(":")[0], sorted(os.listdir(out)))
resource.setrlimit(resource.RLIMIT_FSIZE, unlimited)
save_weights_file(task, os.path.join(out, "ckpt.weights.h5"))
save_keras_file(task, os.path.join(out, "best.keras"))
print(sorted(os.listdir(out)))
"""


@pytest.mark.slow
def test_a_full_disk_fails_hdf5_saves_with_one_error_and_no_crash(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", _SAVE_ON_A_FULL_DISK, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [
        f"{errno.EFBIG} File too large []",
        f"{errno.EFBIG} File too large []",
        "['best.keras', 'ckpt.weights.h5']",
    ]
    assert "Can't decrement id ref count" not in proc.stderr


def test_h5_bytes_bound_covers_the_files_keras_writes(tmp_path):
    from keras_bert.checkpoints.keras_format import (
        h5_bytes_bound,
        save_keras_file,
        save_weights_file,
    )
    from keras_bert.tasks import TextClassifier
    from tests.tiny import tiny_encoder

    task = TextClassifier(tiny_encoder(vocab_size=300, hidden_size=16), 2)
    task.build()
    save_weights_file(task, tmp_path / "plain.weights.h5")
    bound = h5_bytes_bound(task)
    assert (tmp_path / "plain.weights.h5").stat().st_size <= bound
    task.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    task.optimizer.build(task.trainable_variables)
    save_weights_file(task, tmp_path / "optimizer.weights.h5")  # Adam's two moments as well
    assert (tmp_path / "optimizer.weights.h5").stat().st_size <= h5_bytes_bound(task)
    assert h5_bytes_bound(task) > bound
    save_keras_file(task, tmp_path / "task.keras")  # the optimizer left out: the plain bound
    assert (tmp_path / "task.keras").stat().st_size <= bound
