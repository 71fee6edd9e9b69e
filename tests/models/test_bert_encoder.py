import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertConfig, BertEncoder
from tests import numpy_bert
from tests.tiny import tiny_config

# Pairwise-distinct sizes (STYLE.md section 6): a swapped axis cannot pass by coincidence.
CFG = tiny_config(num_layers=2, type_vocab_size=3, hidden_activation="gelu")
B, T = 2, 5


def make_inputs(seed=0):
    rng = np.random.default_rng(seed)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    ids = rng.integers(1, CFG.vocab_size, (B, T)).astype(np.int32) * mask
    types = (rng.integers(0, 3, (B, T)) * mask).astype(np.int32)
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


@pytest.fixture(scope="module")
def encoder():
    keras.utils.set_random_seed(1)
    enc = BertEncoder.from_config_object(CFG)
    enc(make_inputs())
    # Non-trivial weights (pre-activations of order 1) so every weight and the GELU form matter.
    rng = np.random.default_rng(2)
    for w in enc.weights:
        w.assign(w.numpy() + rng.normal(0, 0.3, w.shape).astype(np.float32))
    return enc


def test_shapes_and_dtypes(encoder):
    out = encoder(make_inputs())
    assert out["sequence_output"].shape == (B, T, 8)
    assert out["pooled_output"].shape == (B, 8)
    assert len(out["encoder_outputs"]) == 2
    assert all(o.shape == (B, T, 8) for o in out["encoder_outputs"])
    assert out["sequence_output"].dtype == tf.float32
    np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])


@pytest.mark.parametrize("activation, approximate", [("gelu", False), ("gelu_approximate", True)])
def test_matches_numpy_float64_reference(encoder, activation, approximate):
    enc = encoder
    if activation != CFG.hidden_activation:
        enc = BertEncoder.from_config_object(
            BertConfig(**dict(CFG.to_dict(), hidden_activation=activation))
        )
        enc(make_inputs())
        enc.set_weights(encoder.get_weights())
    x = make_inputs()
    out = enc(x)
    seq, pooled, layers = numpy_bert.forward(
        numpy_bert.encoder_weights(enc),
        x["input_word_ids"],
        x["input_mask"],
        x["input_type_ids"],
        CFG.num_heads,
        approximate=approximate,
    )
    real = x["input_mask"].astype(bool)
    np.testing.assert_allclose(out["sequence_output"].numpy()[real], seq[real], atol=1e-5)
    np.testing.assert_allclose(out["pooled_output"], pooled, atol=1e-5)
    np.testing.assert_allclose(out["encoder_outputs"][0].numpy()[real], layers[0][real], atol=1e-5)


def test_exact_and_tanh_gelu_differ(encoder):
    """A GELU mix-up must be visible: the two forms give different outputs on the same weights."""
    other = BertEncoder.from_config_object(
        BertConfig(**dict(CFG.to_dict(), hidden_activation="gelu_approximate"))
    )
    other(make_inputs())
    other.set_weights(encoder.get_weights())
    diff = np.abs(
        other(make_inputs())["sequence_output"] - encoder(make_inputs())["sequence_output"]
    )
    assert diff.max() > 1e-4  # 10x the parity tolerance below


def test_padding_does_not_change_real_positions(encoder):
    x = make_inputs()
    y = {k: v.copy() for k, v in x.items()}
    y["input_word_ids"][0, 3:] = [7, 19]
    y["input_type_ids"][0, 3:] = [2, 1]
    a, b = encoder(x), encoder(y)
    np.testing.assert_allclose(a["sequence_output"][0, :3], b["sequence_output"][0, :3], atol=1e-6)
    np.testing.assert_allclose(a["pooled_output"], b["pooled_output"], atol=1e-6)
    np.testing.assert_array_equal(a["sequence_output"][1], b["sequence_output"][1])


def test_causal_attention_ignores_future_tokens():
    enc = BertEncoder.from_config_object(CFG, causal=True)
    x = make_inputs()
    x["input_mask"][:] = 1
    y = {k: v.copy() for k, v in x.items()}
    y["input_word_ids"][:, 3:] = (y["input_word_ids"][:, 3:] + 5) % CFG.vocab_size
    a, b = enc(x)["sequence_output"], enc(y)["sequence_output"]
    np.testing.assert_allclose(a[:, :3], b[:, :3], atol=1e-6)
    assert np.abs(a[:, 3:] - b[:, 3:]).max() > 1e-4
    seq, _, _ = numpy_bert.forward(
        numpy_bert.encoder_weights(enc),
        x["input_word_ids"],
        x["input_mask"],
        x["input_type_ids"],
        2,
        causal=True,
    )
    np.testing.assert_allclose(a, seq, atol=1e-5)


def test_dropout_only_in_training(encoder):
    x = make_inputs()
    np.testing.assert_array_equal(encoder(x)["sequence_output"], encoder(x)["sequence_output"])
    a = encoder(x, training=True)["sequence_output"]
    b = encoder(x, training=True)["sequence_output"]
    assert np.abs(a - b).max() > 1e-4


def test_int64_inputs_and_default_mask_and_types(encoder):
    x = make_inputs()
    x["input_mask"][:] = 1
    x["input_type_ids"][:] = 0
    ref = encoder(x)["sequence_output"]
    only_ids = encoder({"input_word_ids": x["input_word_ids"].astype(np.int64)})["sequence_output"]
    np.testing.assert_allclose(ref, only_ids, atol=1e-6)


def test_too_long_sequence_is_a_clear_error(encoder):
    ids = np.ones((1, 8), np.int32)
    with pytest.raises(ValueError, match="sequence length 8 exceeds max_sequence_length=7"):
        encoder({"input_word_ids": ids})
    fn = tf.function(
        lambda t: encoder({"input_word_ids": t})["pooled_output"],
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_sequence_length=7"):
        fn(tf.constant(ids))


def test_missing_word_ids_is_a_clear_error(encoder):
    with pytest.raises(ValueError, match="input_word_ids"):
        encoder({"input_mask": np.ones((1, 3), np.int32)})


def test_get_config_json_round_trip(encoder):
    config = encoder.get_config()
    restored = BertEncoder.from_config(json.loads(json.dumps(config)))
    assert restored.get_config() == config
    assert restored.bert_config == CFG and restored.causal is False


def test_keras_file_round_trip(encoder, tmp_path):
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    restored = keras.models.load_model(path)
    x = make_inputs()
    np.testing.assert_allclose(
        restored(x)["sequence_output"], encoder(x)["sequence_output"], atol=1e-6
    )
    np.testing.assert_allclose(restored(x)["pooled_output"], encoder(x)["pooled_output"], atol=1e-6)


@pytest.mark.parametrize(
    "policy, compute", [("mixed_bfloat16", tf.bfloat16), ("mixed_float16", tf.float16)]
)
def test_mixed_precision_keeps_layer_norm_and_softmax_in_float32(encoder, policy, compute):
    enc = BertEncoder.from_config_object(CFG, dtype=policy)
    x = make_inputs()
    enc(x)
    enc.set_weights(encoder.get_weights())
    assert enc.embeddings.layer_norm.compute_dtype == "float32"
    assert enc.transformer_layers[0].output_layer_norm.compute_dtype == "float32"
    assert all(w.dtype == "float32" for w in enc.weights)  # float32 master weights
    out = enc(x)
    assert out["sequence_output"].dtype == compute
    ref = encoder(x)["sequence_output"].numpy()
    real = x["input_mask"].astype(bool)
    got = tf.cast(out["sequence_output"], tf.float32).numpy()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got[real], ref[real], atol=0.1)


def test_bfloat16_weights_give_the_same_outputs_as_mixed_bfloat16(encoder):
    """Inference with variables stored in bfloat16 (policy "bfloat16") equals mixed_bfloat16,
    which casts its float32 variables to bfloat16 at every use: the same rounding, done once."""
    x = make_inputs()
    outs = {}
    for policy in ("mixed_bfloat16", "bfloat16"):
        enc = BertEncoder.from_config_object(CFG, dtype=policy)
        enc(x)
        enc.set_weights(encoder.get_weights())
        outs[policy] = {
            k: tf.cast(v, tf.float32).numpy() for k, v in enc(x, training=False).items()
        }
        if policy == "bfloat16":
            assert enc.transformer_layers[0].intermediate.kernel.dtype == "bfloat16"
            assert enc.transformer_layers[0].output_layer_norm.gamma.dtype == "float32"
    for k in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(outs["bfloat16"][k], outs["mixed_bfloat16"][k])
