import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertEncoder
from keras_bert.models.bert_pretrainer import BertPretrainer, masked_lm_loss, next_sentence_loss
from tests.tiny import tiny_config

CFG = tiny_config(num_layers=2, type_vocab_size=3, dropout_rate=0.0, attention_dropout_rate=0.0)


def batch(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "input_word_ids": rng.integers(5, 23, (2, 5)).astype(np.int32),
        "input_mask": np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], np.int32),
        "input_type_ids": np.array([[0, 0, 1, 1, 0], [0, 0, 0, 1, 1]], np.int32),
        "masked_lm_positions": np.array([[1, 3, 0], [2, 0, 0]], np.int32),
        "masked_lm_ids": np.array([[7, 9, 0], [11, 0, 0]], np.int32),
        "masked_lm_weights": np.array([[1, 1, 0], [1, 0, 0]], np.float32),
        "next_sentence_labels": np.array([[0], [1]], np.int32),
    }


def make(use_nsp=True, causal=False):
    keras.utils.set_random_seed(3)
    model = BertPretrainer(BertEncoder.from_config_object(CFG, causal=causal), use_nsp=use_nsp)
    model(batch())
    return model


def test_hand_computed_two_example_loss():
    """Logits chosen so that every softmax is a simple fraction.

    MLM rows [0, ln 3, 0, ...]: with vocab 3, p = (1/5, 3/5, 1/5). Example 1 predicts ids 1 and
    0 (weights 1, 1), example 2 predicts id 1 (weight 1) plus one padding slot (weight 0):
    MLM = (ln(5/3) + ln 5 + ln(5/3)) / (3 + 1e-5).
    NSP logits [0, 0] with label 0 -> ln 2; [ln 3, 0] with label 1 -> ln 4; mean = 1.5 ln 2.
    """
    row = [0.0, math.log(3.0), 0.0]
    logits = np.array([[row, row], [row, row]], np.float32)
    ids = np.array([[1, 0], [1, 2]], np.int32)
    weights = np.array([[1, 1], [1, 0]], np.float32)
    expected_mlm = (2 * math.log(5 / 3) + math.log(5)) / (3 + 1e-5)
    assert float(masked_lm_loss(logits, ids, weights)) == pytest.approx(expected_mlm, rel=1e-6)
    nsp_logits = np.array([[0.0, 0.0], [math.log(3.0), 0.0]], np.float32)
    expected_nsp = 1.5 * math.log(2.0)
    assert float(next_sentence_loss(nsp_logits, np.array([[0], [1]]))) == pytest.approx(
        expected_nsp, rel=1e-6
    )

    model = make()
    x = {
        "masked_lm_ids": ids,
        "masked_lm_weights": weights,
        "next_sentence_labels": np.array([0, 1], np.int32),
    }
    total = model.compute_loss(x, None, {"mlm_logits": logits, "nsp_logits": nsp_logits})
    assert float(total) == pytest.approx(expected_mlm + expected_nsp, rel=1e-6)
    assert float(model.mlm_accuracy_tracker.result()) == pytest.approx(2 / 3)  # argmax = id 1
    assert float(model.nsp_accuracy_tracker.result()) == pytest.approx(0.5)


def test_outputs_and_tied_embeddings():
    model = make()
    out = model(batch())
    assert out["mlm_logits"].shape == (2, 3, 23) and out["mlm_logits"].dtype == tf.float32
    assert out["nsp_logits"].shape == (2, 2)
    # The MLM head owns only transform, LayerNorm and bias: no second [vocab, hidden] table.
    head_shapes = sorted(tuple(w.shape) for w in model.masked_lm.weights)
    assert head_shapes == [(8,), (8,), (8,), (8, 8), (23,)]
    # Tied: logits move when the word embedding table moves.
    before = out["mlm_logits"].numpy()
    table = model.encoder.word_embeddings
    table.assign(table.numpy() * 2.0)
    assert np.abs(model(batch())["mlm_logits"].numpy() - before).max() > 1e-3


def test_one_step_lowers_loss_on_fixed_batch():
    model = make()
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    data = batch()
    before = model.evaluate(data, verbose=0, return_dict=True)
    for _ in range(3):
        model.train_on_batch(data)
    after = model.evaluate(data, verbose=0, return_dict=True)
    assert after["loss"] < before["loss"]
    assert set(after) == {"loss", "mlm_loss", "mlm_accuracy", "nsp_loss", "nsp_accuracy"}


def test_no_nsp_ablation():
    model = make(use_nsp=False)
    out = model(batch())
    assert set(out) == {"mlm_logits"} and model.next_sentence is None
    data = batch()
    del data["next_sentence_labels"]
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    logs = model.evaluate(data, verbose=0, return_dict=True)
    assert set(logs) == {"loss", "mlm_loss", "mlm_accuracy"}
    assert logs["loss"] == pytest.approx(logs["mlm_loss"], rel=1e-6)


def test_missing_feature_is_named():
    model = make()
    data = batch()
    del data["masked_lm_weights"]
    model.compile(optimizer="adam")
    with pytest.raises(KeyError, match="masked_lm_weights"):
        model.train_on_batch(data)


def test_config_and_keras_round_trip(tmp_path):
    model = make(causal=True)
    restored = BertPretrainer.from_config(json.loads(json.dumps(model.get_config())))
    assert restored.encoder.causal and restored.use_nsp
    path = tmp_path / "pretrainer.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(
        loaded(batch())["mlm_logits"], model(batch())["mlm_logits"], atol=1e-5
    )
