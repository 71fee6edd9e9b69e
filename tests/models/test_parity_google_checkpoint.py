"""The google-research/bert TF1 path, proven with the real MiniLM-L6-H384 weights.

The test writes the checkpoint's weights under google-research/bert variable names as a TF1
checkpoint (tf.compat.v1 Saver; with `adam_m`/`adam_v` slots and `global_step` as saved by
run_pretraining.py, plus MLM/NSP head variables) and a `bert_config.json` whose hidden_act is
"gelu". Each loader takes the GELU form from its source format: the TF1 path gives the tanh form
(google-research "gelu") and matches the Hugging Face path loaded with the tanh GELU, while the
Hugging Face path itself ("gelu" = exact erf) does not.
"""

import shutil

import numpy as np
import pytest

import keras_bert
from keras_bert.checkpoints import load_encoder, load_pretrainer_weights, read_checkpoint
from tests.checkpoints.helpers import hf_to_google, write_google_dir
from tests.models.test_parity_minilm import batch, hf_weights, model_dir  # noqa: F401 fixtures

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def google_dir(tmp_path_factory, hf_weights, model_dir):  # noqa: F811
    import json

    directory = tmp_path_factory.mktemp("ckpt") / "uncased_L-6_H-384_A-12"
    tensors = hf_to_google({k: v.astype(np.float32) for k, v in hf_weights.items()})
    rng = np.random.default_rng(3)
    tensors.update(
        {  # pretraining heads as run_pretraining.py names them
            "cls/predictions/transform/dense/kernel": rng.normal(size=(384, 384)),
            "cls/predictions/transform/dense/bias": rng.normal(size=(384,)),
            "cls/predictions/transform/LayerNorm/gamma": rng.normal(size=(384,)),
            "cls/predictions/transform/LayerNorm/beta": rng.normal(size=(384,)),
            "cls/predictions/output_bias": rng.normal(size=(30522,)),
            "cls/seq_relationship/output_weights": rng.normal(size=(2, 384)),
            "cls/seq_relationship/output_bias": rng.normal(size=(2,)),
        }
    )
    tensors = {k: np.asarray(v, np.float32) for k, v in tensors.items()}
    config = json.loads((model_dir / "config.json").read_text())
    write_google_dir(directory, config, tensors, hidden_act="gelu")
    shutil.copyfile(model_dir / "vocab.txt", directory / "vocab.txt")
    return directory, tensors


def _outputs(encoder, features):
    out = encoder(features, training=False)
    return np.asarray(out["sequence_output"]), np.asarray(out["pooled_output"])


def test_tf1_checkpoint_matches_hf_path_with_tanh_gelu(google_dir, batch, model_dir):  # noqa: F811
    directory, _ = google_dir
    from_google = load_encoder(str(directory))
    assert from_google.bert_config.hidden_activation == "gelu_approximate"
    # The prefix form of --init_checkpoint works too.
    assert load_encoder(str(directory / "bert_model.ckpt")).bert_config.num_layers == 6
    hf_tanh = load_encoder(str(model_dir), hidden_activation="gelu_approximate")
    hf_exact = load_encoder(str(model_dir))
    assert hf_exact.bert_config.hidden_activation == "gelu"
    mask = batch["input_mask"].astype(bool)
    g_seq, g_pooled = _outputs(from_google, batch)
    t_seq, t_pooled = _outputs(hf_tanh, batch)
    e_seq, _ = _outputs(hf_exact, batch)
    seq, pooled = np.abs(g_seq - t_seq)[mask].max(), np.abs(g_pooled - t_pooled).max()
    print(f"TF1 path vs HF path (tanh GELU): sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq <= 1e-6 and pooled <= 1e-6
    assert np.abs(g_seq - e_seq)[mask].max() > 1e-3  # the GELU form comes from the format


def test_tf1_ledger_every_variable_once(google_dir):
    directory, tensors = google_dir
    import tensorflow as tf

    all_names = set(
        tf.train.load_checkpoint(str(directory / "bert_model.ckpt")).get_variable_to_shape_map()
    )
    source = read_checkpoint(str(directory))
    used = source.used()
    assert set(used) == set(tensors)  # 103 encoder + 7 head variables
    assert len(used) == 110 and len(set(used.values())) == 110
    assert set(used) | set(source.ignored) == all_names
    assert not set(used) & set(source.ignored)
    assert len(source.ignored) == 2 * 110 + 1
    assert source.ignored["global_step"] == "training step counter, not a model weight"
    assert source.ignored["bert/pooler/dense/kernel/adam_m"].startswith("Adam optimizer slot")
    assert keras_bert.checkpoints.resolve_do_lower_case(str(directory)) is True
    assert keras_bert.checkpoints.resolve_vocab_file(str(directory)) == str(directory / "vocab.txt")


def test_tf1_heads_load_into_pretrainer(google_dir):
    from keras_bert.models import BertPretrainer

    directory, tensors = google_dir
    pretrainer = BertPretrainer(load_encoder(str(directory)))
    load_pretrainer_weights(pretrainer, str(directory))
    np.testing.assert_array_equal(
        pretrainer.next_sentence.dense.kernel.numpy(),
        tensors["cls/seq_relationship/output_weights"].T,
    )  # [H, 2]
    np.testing.assert_array_equal(
        pretrainer.masked_lm.output_bias.numpy(), tensors["cls/predictions/output_bias"]
    )
    np.testing.assert_array_equal(
        pretrainer.masked_lm.layer_norm.gamma.numpy(),
        tensors["cls/predictions/transform/LayerNorm/gamma"],
    )
    np.testing.assert_array_equal(
        pretrainer.encoder.pooler.kernel.numpy(), tensors["bert/pooler/dense/kernel"]
    )
