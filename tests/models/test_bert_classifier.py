"""BertClassifier: shapes, dtypes, dropout, config and .keras round trips, errors."""
import json

import keras
import numpy as np
import pytest

import keras_bert
from keras_bert.models.bert_classifier import BertClassifier

B, T = 2, 5


def _encoder(dropout=0.1):
    cfg = keras_bert.BertConfig(vocab_size=23, hidden_size=8, num_layers=1, num_heads=2,
                                intermediate_size=12, max_sequence_length=7, dropout_rate=dropout,
                                attention_dropout_rate=dropout)
    return keras_bert.BertEncoder(**cfg.to_dict())


def _inputs():
    ids = np.array([[101 % 23, 5, 6, 7, 0], [1, 2, 3, 0, 0]], np.int32)
    mask = (ids > 0).astype(np.int32)
    mask[:, 0] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def test_shapes_dtypes_and_dropout_only_in_training():
    keras.utils.set_random_seed(1)
    model = BertClassifier(_encoder(0.0), num_classes=3, dropout_rate=0.5, label_names=["a", "b", "c"])
    out = model(_inputs())
    assert out.shape == (B, 3) and out.dtype == "float32"
    np.testing.assert_array_equal(model(_inputs()), out)
    assert not np.allclose(model(_inputs(), training=True), out)
    regression = BertClassifier(_encoder(), num_classes=1)
    assert regression(_inputs()).shape == (B, 1) and regression.is_regression


def test_logits_stay_float32_under_mixed_bfloat16():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = BertClassifier(_encoder(), num_classes=2)
        assert model(_inputs()).dtype == "float32"
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_config_round_trip_and_keras_file(tmp_path):
    model = BertClassifier(_encoder(), num_classes=2, dropout_rate=0.2, label_names=["neg", "pos"],
                           task_name="sst2")
    expected = model(_inputs())
    config = model.get_config()
    assert config["encoder"]["class_name"] == "BertEncoder"
    clone = BertClassifier.from_config(json.loads(json.dumps(config)))
    assert json.dumps(clone.get_config(), sort_keys=True) == json.dumps(config, sort_keys=True)
    assert clone.label_names == ["neg", "pos"] and clone.encoder.bert_config == model.encoder.bert_config
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(loaded, BertClassifier) and loaded.task_name == "sst2"
    np.testing.assert_allclose(loaded(_inputs()), expected, atol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="num_classes must be >= 1"):
        BertClassifier(_encoder(), num_classes=0)
    with pytest.raises(ValueError, match="dropout_rate must be in"):
        BertClassifier(_encoder(), num_classes=2, dropout_rate=1.0)
    with pytest.raises(ValueError, match="label_names has 3 entries for num_classes=2"):
        BertClassifier(_encoder(), num_classes=2, label_names=["a", "b", "c"])


def test_mean_pooling_is_masked_mean_of_sequence_output():
    keras.utils.set_random_seed(2)
    encoder = _encoder(0.0)
    model = BertClassifier(encoder, num_classes=3, dropout_rate=0.0, pooling="mean")
    x = _inputs()
    logits = model(x).numpy()
    seq = encoder(x)["sequence_output"].numpy()
    mask = x["input_mask"].astype(bool)
    pooled = np.stack([seq[b][mask[b]].mean(0) for b in range(B)])  # real tokens only
    kernel, bias = (w.numpy() for w in model.classifier.weights)
    np.testing.assert_allclose(logits, pooled @ kernel + bias, atol=1e-5)
    # Padding ids do not move the mean.
    y = {k: v.copy() for k, v in x.items()}
    y["input_word_ids"][1, 3:] = [9, 11]
    np.testing.assert_allclose(model(y).numpy(), logits, atol=1e-5)
    restored = BertClassifier.from_config(json.loads(json.dumps(model.get_config())))
    assert restored.pooling == "mean"
    with pytest.raises(ValueError, match="pooling must be one of"):
        BertClassifier(_encoder(), num_classes=2, pooling="max")
