"""TextClassifier: shapes, dtypes, dropout, config and .keras round trips, errors."""

import json
import pathlib
import re

import keras
import numpy as np
import pytest
import scipy.special

import keras_bert
from keras_bert.tasks import TextClassifier
from tests.tiny import tiny_encoder

B, T = 2, 5


def _encoder(dropout=0.1):
    return tiny_encoder(dropout_rate=dropout, attention_dropout_rate=dropout)


def _inputs():
    ids = np.array([[101 % 23, 5, 6, 7, 0], [1, 2, 3, 0, 0]], np.int32)
    mask = (ids > 0).astype(np.int32)
    mask[:, 0] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def test_shapes_dtypes_and_dropout_only_in_training():
    keras.utils.set_random_seed(1)
    model = TextClassifier(
        _encoder(0.0), num_classes=3, dropout_rate=0.5, label_names=["a", "b", "c"]
    )
    out = model(_inputs())
    assert out.shape == (B, 3) and out.dtype == "float32"
    np.testing.assert_array_equal(model(_inputs()), out)
    assert not np.allclose(model(_inputs(), training=True), out)
    regression = TextClassifier(_encoder(), num_classes=1)
    assert regression(_inputs()).shape == (B, 1) and regression.is_regression


def test_logits_stay_float32_under_mixed_bfloat16():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = TextClassifier(_encoder(), num_classes=2)
        assert model(_inputs()).dtype == "float32"
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_config_round_trip_and_keras_file(tmp_path):
    model = TextClassifier(
        _encoder(), num_classes=2, dropout_rate=0.2, label_names=["neg", "pos"], task_name="sst2"
    )
    expected = model(_inputs())
    config = model.get_config()
    assert config["encoder"]["class_name"] == "BertEncoder"
    clone = TextClassifier.from_config(json.loads(json.dumps(config)))
    assert json.dumps(clone.get_config(), sort_keys=True) == json.dumps(config, sort_keys=True)
    assert (
        clone.label_names == ["neg", "pos"]
        and clone.encoder.bert_config == model.encoder.bert_config
    )
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(loaded, TextClassifier) and loaded.task_name == "sst2"
    np.testing.assert_allclose(loaded(_inputs()), expected, atol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="num_classes must be >= 1"):
        TextClassifier(_encoder(), num_classes=0)
    with pytest.raises(ValueError, match="dropout_rate must be in"):
        TextClassifier(_encoder(), num_classes=2, dropout_rate=1.0)
    with pytest.raises(ValueError, match="label_names has 3 entries .* for num_classes=2"):
        TextClassifier(_encoder(), num_classes=2, label_names=["a", "b", "c"])


def test_mean_pooling_is_masked_mean_of_sequence_output():
    keras.utils.set_random_seed(2)
    encoder = _encoder(0.0)
    model = TextClassifier(encoder, num_classes=3, dropout_rate=0.0, pooling="mean")
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
    restored = TextClassifier.from_config(json.loads(json.dumps(model.get_config())))
    assert restored.pooling == "mean"

    # The pooler has no gradient under mean pooling: it is not trained (no Keras "Gradients do
    # not exist" warning, no optimizer slots); with [CLS] pooling it is.
    def trained_pooler_weights(task):
        task(x)  # built
        pooler = {w.path for w in task.encoder.pooler.weights}
        assert len(pooler) == 2
        return pooler & {w.path for w in task.trainable_weights}

    assert not trained_pooler_weights(model) and not trained_pooler_weights(restored)
    assert len(trained_pooler_weights(TextClassifier(_encoder(0.0), num_classes=3))) == 2
    with pytest.raises(ValueError, match="pooling must be one of"):
        TextClassifier(_encoder(), num_classes=2, pooling="max")


# ---- the task carries its preprocessing: raw strings in, saved and loaded anywhere ---------------

TEXTS = ["A gripping, beautifully acted film.", "naïve café", "It's a DULL mess!!", ""]
TEXTS_B = ["The film is gripping.", "No.", "boring", "empty first text"]
LOAD_AND_PREDICT = """
import json, sys
import numpy as np
import keras_bert
task = keras_bert.load_task(sys.argv[1])
texts = json.loads(sys.argv[2])
x = (texts[0], texts[1]) if task.is_pair else texts[0]
np.save(sys.argv[3], task.predict(x))
print(json.dumps({"type": type(task).__name__, "task_type": task.task_type, "is_pair": task.is_pair,
                  "label_names": task.label_names, "vocab_file": task.preprocessor.vocab_file}))
"""


def _task(vocab_file, num_classes, is_pair, label_names=None, seed=0):
    from keras_bert.tokenization import BertPreprocessor

    encoder = tiny_encoder(vocab_size=30522, max_sequence_length=24)
    task = TextClassifier(
        encoder,
        num_classes,
        label_names=label_names,
        is_pair=is_pair,
        preprocessor=BertPreprocessor(vocab_file, max_seq_length=12),
    )
    task.build_for_export()
    rng = np.random.default_rng(seed)
    for w in task.weights:
        w.assign(rng.normal(0.0, 0.5, w.shape).astype("float32"))
    return task


@pytest.mark.slow
@pytest.mark.parametrize(
    "num_classes, is_pair, label_names",
    [
        (3, False, ["neg", "neutral", "pos"]),
        (1, False, None),
        (2, True, ["entailment", "not_entailment"]),
    ],
)
def test_saved_task_predicts_the_same_after_its_vocab_is_deleted_and_the_file_moved(
    tmp_path, uncased_vocab, num_classes, is_pair, label_names
):
    import os
    import shutil
    import subprocess
    import sys

    vocab = tmp_path / "source" / "vocab.txt"
    vocab.parent.mkdir()
    shutil.copyfile(uncased_vocab, vocab)
    task = _task(vocab, num_classes, is_pair, label_names)
    x = (TEXTS, TEXTS_B) if is_pair else TEXTS
    before = task.predict(x)
    if num_classes == 1:
        assert before.shape == (4,) and before.dtype == np.float32
    else:
        assert before.shape == (4, num_classes) and before.dtype == np.float32
        np.testing.assert_allclose(before.sum(-1), 1.0, rtol=1e-6)
    assert np.ptp(before.reshape(4, -1)[:, 0]) > 1e-3  # the texts reach the model
    (tmp_path / "first").mkdir()
    task.save(tmp_path / "first" / "task.keras")
    shutil.rmtree(vocab.parent)
    moved = tmp_path / "elsewhere" / "renamed.keras"
    moved.parent.mkdir()
    shutil.move(tmp_path / "first" / "task.keras", moved)
    repo = pathlib.Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            LOAD_AND_PREDICT,
            str(moved),
            json.dumps([TEXTS, TEXTS_B]),
            str(tmp_path / "after.npy"),
        ],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(repo)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info == {
        "type": "TextClassifier",
        "is_pair": is_pair,
        "label_names": label_names,
        "task_type": "regression" if num_classes == 1 else "classification",
        "vocab_file": str(vocab),
    }
    np.testing.assert_array_equal(np.load(tmp_path / "after.npy"), before)


def test_predict_checks_the_input_against_the_task(uncased_vocab):
    single = _task(uncased_vocab, 2, False)
    pair = _task(uncased_vocab, 2, True)
    with pytest.raises(ValueError, match=re.escape("is a pair task: pass (texts_a, texts_b)")):
        pair.predict(["only one text"])
    with pytest.raises(ValueError, match="texts_a has 2 items but texts_b has 1"):
        pair.predict((["a", "b"], ["c"]))
    with pytest.raises(ValueError, match="is a single-text task: pass a list of str, not a tuple"):
        single.predict((["a"], ["b"]))
    with pytest.raises(ValueError, match="predict takes a batch"):
        single.predict("one string")
    with pytest.raises(ValueError, match="texts must be str items; got int"):
        single.predict(["a", 3])
    assert single.predict([]).shape == (0, 2)
    assert single.predict(np.array(["a", "b"])).shape == (2, 2)
    ids = {k: np.asarray(v) for k, v in single.preprocessor(["a b c"]).items()}
    np.testing.assert_allclose(
        scipy.special.softmax(single.predict(ids), -1), single.predict(["a b c"]), atol=1e-6
    )
    bare = TextClassifier(_encoder(), 2)
    with pytest.raises(ValueError, match="encoding text needs the task's preprocessor"):
        bare.predict(["text"])


def test_preprocessor_must_fit_the_encoder(uncased_vocab):
    from keras_bert.tokenization import BertPreprocessor

    with pytest.raises(
        ValueError, match=re.escape("max_seq_length=8 exceeds the encoder's max_sequence_length=7")
    ):
        TextClassifier(
            _encoder(), 2, preprocessor=BertPreprocessor(uncased_vocab, max_seq_length=8)
        )
    with pytest.raises(TypeError, match="preprocessor must be a keras_bert BertPreprocessor"):
        TextClassifier(_encoder(), 2, preprocessor=object())
    with pytest.raises(ValueError, match="a regressor \\(num_classes=1\\) has no label_names"):
        TextClassifier(_encoder(), 1, label_names=["score"])
    assert TextClassifier(_encoder(), 3).label_names == ["0", "1", "2"]


def test_runs_saved_before_the_task_api_load_with_their_preprocessor(tmp_path, uncased_vocab):
    """A best_model.keras registered as keras_bert>BertClassifier plus config.json / labels.json."""
    task = _task(uncased_vocab, 2, True, ["a", "b"])
    config = task.get_config()
    for key in ("preprocessor", "is_pair"):
        config.pop(key)
    legacy = {
        "module": "keras_bert.tasks.text_classifier",
        "class_name": "BertClassifier",
        "config": config,
        "registered_name": "keras_bert>BertClassifier",
    }
    old = keras.saving.deserialize_keras_object(legacy)
    old.build_for_export()
    old.set_weights(task.get_weights())
    old.save(tmp_path / "best_model.keras")
    (tmp_path / "config.json").write_text(
        json.dumps({"vocab_file": str(uncased_vocab), "do_lower_case": True, "max_seq_length": 12})
    )
    (tmp_path / "labels.json").write_text(json.dumps({"is_pair": True, "labels": ["a", "b"]}))
    loaded = keras_bert.load_task(tmp_path)
    assert loaded.is_pair and loaded.preprocessor.max_seq_length == 12
    np.testing.assert_allclose(
        loaded.predict((TEXTS, TEXTS_B)), task.predict((TEXTS, TEXTS_B)), atol=1e-6
    )
    with pytest.raises(FileNotFoundError, match="not a .keras file or a directory holding one"):
        keras_bert.load_task(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds 0 .keras files"):
        keras_bert.load_task(tmp_path / "empty")
