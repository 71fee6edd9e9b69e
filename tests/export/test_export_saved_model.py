"""SavedModel export: round trip in a fresh TensorFlow-only process, layout, versions, warmup.

The slow tests share the session fixture `exports` (tests/export/conftest.py): three tiny
exports loaded once by `_load_and_call.py` under `python -I`.
"""

import json
import os
import pathlib
import re

import numpy as np
import pytest
import scipy.special
import tensorflow as tf

from export.export_saved_model import Overrides, apply_overrides
from keras_bert.saved_model import versioning
from keras_bert.saved_model.classifier_signatures import (
    CLASSIFY_METHOD_NAME,
    REGRESS_METHOD_NAME,
    ClassifierServingModule,
)
from keras_bert.saved_model.exporter import with_dtype
from keras_bert.saved_model.serving_module import INPUT_NAMES, PREDICT_METHOD_NAME
from tests.export.conftest import LABELS3, MAX_POSITIONS, NLI, TEXTS, WARMUP, read_warmup

ATOL = 1e-5


def _logits(model, ids):
    return model({k: tf.constant(v) for k, v in ids.items()}, training=False).numpy()


def _text_ids(pre, a, b=None):
    out = pre(
        {"text": tf.constant(a), "text_b": tf.constant(b)} if b is not None else tf.constant(a)
    )
    return {k: v.numpy() for k, v in out.items()}


def _assert_classification(out, logits, label_names):
    probs = scipy.special.softmax(logits.astype(np.float64), axis=-1)
    assert out["probabilities"].dtype == np.float32
    np.testing.assert_allclose(out["probabilities"], probs, atol=ATOL, rtol=0)
    assert out["label_ids"].dtype == np.int64
    np.testing.assert_array_equal(out["label_ids"], probs.argmax(-1))
    assert [x.decode() for x in out["labels"]] == [label_names[i] for i in probs.argmax(-1)]


def _call(exports, key, call_id):
    result = exports["loaded"][key]["calls"][call_id]
    assert not (isinstance(result, tuple) and result[0] == "error"), result
    return result


# ---- fresh process, signatures -----------------------------------------------------------------


@pytest.mark.slow
def test_fresh_process_imports_only_tensorflow(exports):
    modules = exports["loaded"]["modules"]
    for forbidden in ("keras_bert", "export", "tensorflow_text", "tests"):
        assert forbidden not in modules
    assert "tensorflow" in modules


@pytest.mark.slow
def test_signature_names_dtypes_and_shapes(exports):
    text = {"text": ("string", (None,))}
    pair = {**text, "text_b": ("string", (None,))}
    ids = {n: ("int32", (None, None)) for n in INPUT_NAMES}
    examples = {"inputs": ("string", (None,))}

    def cls_out(c):
        return {
            "probabilities": ("float32", (None, c)),
            "label_ids": ("int64", (None,)),
            "labels": ("string", (None,)),
        }

    def classifier_signatures(texts, c):
        """A c-class classifier's signatures: (inputs, outputs) each; `texts`: one text or a pair."""
        return {
            "serving_default": (texts, cls_out(c)),
            "encoded": (ids, cls_out(c)),
            "classification": (
                examples,
                {"classes": ("string", (None, c)), "scores": ("float32", (None, c))},
            ),
        }

    reg_out = {"scores": ("float32", (None,))}
    expected = {
        "cls": classifier_signatures(text, 3),
        "reg": {
            "serving_default": (pair, reg_out),
            "encoded": (ids, reg_out),
            "regression": (examples, {"outputs": ("float32", (None,))}),
        },
        "cli": classifier_signatures(pair, 2),
    }
    for key, want in expected.items():
        got = exports["loaded"][key]["signatures"]
        assert set(got) == set(want), key
        for name, (inputs, outputs) in want.items():
            assert got[name]["inputs"] == inputs, (key, name)
            assert got[name]["outputs"] == outputs, (key, name)


@pytest.mark.slow
def test_method_names_in_saved_model_pb(exports):
    from tensorflow.core.protobuf import saved_model_pb2

    want = {
        "cls": {
            "serving_default": PREDICT_METHOD_NAME,
            "encoded": PREDICT_METHOD_NAME,
            "classification": "tensorflow/serving/classify",
        },
        "reg": {
            "serving_default": PREDICT_METHOD_NAME,
            "encoded": PREDICT_METHOD_NAME,
            "regression": "tensorflow/serving/regress",
        },
    }
    for key, methods in want.items():
        pb = (exports["dirs"][key] / "saved_model.pb").read_bytes()
        (meta_graph,) = saved_model_pb2.SavedModel.FromString(pb).meta_graphs
        got = {
            k: v.method_name for k, v in meta_graph.signature_def.items() if not k.startswith("__")
        }
        assert got == methods
    # The rewritten saved_model.pb keeps a matching fingerprint.
    fingerprint = tf.saved_model.experimental.read_fingerprint(str(exports["dirs"]["cls"]))
    from tensorflow.python.saved_model import fingerprinting_utils

    assert fingerprint.singleprint() == fingerprinting_utils.singleprint_from_saved_model_proto(
        str(exports["dirs"]["cls"])
    )


# ---- outputs equal the in-process model ---------------------------------------------------------


@pytest.mark.slow
def test_classification_outputs_match_in_process(exports):
    model, pre = exports["models"]["cls"], exports["preprocessor"]
    logits = _logits(model, exports["ids1"])
    assert np.ptp(logits[:, 0]) > 1e-2  # the texts give different outputs: not a constant model
    _assert_classification(_call(exports, "cls", "default"), logits, LABELS3)
    _assert_classification(_call(exports, "cls", "encoded"), logits, LABELS3)
    _assert_classification(_call(exports, "cls", "encoded_int64_fn"), logits, LABELS3)
    _assert_classification(
        _call(exports, "cls", "encoded_short"), _logits(model, exports["short"]), LABELS3
    )
    classify = _call(exports, "cls", "classify")
    np.testing.assert_allclose(classify["scores"], scipy.special.softmax(logits, -1), atol=ATOL)
    assert classify["classes"].tolist() == [[x.encode() for x in LABELS3]] * len(TEXTS)
    # The task's own predict on raw strings gives the served probabilities.
    np.testing.assert_allclose(
        model.predict(TEXTS), _call(exports, "cls", "default")["probabilities"], atol=ATOL
    )
    del pre


@pytest.mark.slow
def test_batch_one_keeps_batch_dim_and_batch_zero_is_empty(exports):
    b1 = _call(exports, "cls", "default_b1")
    assert b1["probabilities"].shape == (1, 3) and b1["label_ids"].shape == (1,)
    _assert_classification(
        b1,
        _logits(exports["models"]["cls"], {k: v[:1] for k, v in exports["ids1"].items()}),
        LABELS3,
    )
    b0 = _call(exports, "cls", "default_b0")
    assert b0["probabilities"].shape == (0, 3)
    assert b0["label_ids"].shape == (0,) and b0["labels"].shape == (0,)
    assert _call(exports, "reg", "default_b1")["scores"].shape == (1,)


@pytest.mark.slow
def test_encoded_rejects_too_long_and_out_of_range_ids(exports):
    kind, err, message = exports["loaded"]["cls"]["calls"]["encoded_too_long"]
    assert (kind, err) == ("error", "InvalidArgumentError")
    assert f"max_sequence_length={MAX_POSITIONS}" in message
    kind, err, message = exports["loaded"]["cls"]["calls"]["encoded_bad_id"]
    assert (kind, err) == ("error", "InvalidArgumentError")
    assert "input_word_ids: id >= vocab_size=30522" in message


@pytest.mark.slow
def test_pair_regression_outputs_match_in_process(exports):
    model, pre = exports["models"]["reg"], exports["preprocessor"]
    ids = exports["ids2"]
    assert ids["input_type_ids"].max() == 1  # text_b really reaches the model as segment B
    scores = _logits(model, ids)[:, 0]
    for call in ("default", "encoded"):
        out = _call(exports, "reg", call)["scores"]
        assert out.shape == (len(TEXTS),) and out.dtype == np.float32
        np.testing.assert_allclose(out, scores, atol=ATOL, rtol=0)
    np.testing.assert_allclose(_call(exports, "reg", "regress")["outputs"], scores, atol=ATOL)
    # Without text_b the scores differ: the pair input is not ignored.
    single = _logits(model, _text_ids(pre, TEXTS))[:, 0]
    assert np.abs(single - scores).max() > 1e-3


@pytest.mark.slow
def test_cli_pair_classification_export(exports):
    model = exports["models"]["cli"]
    logits = _logits(model, exports["ids2"])
    _assert_classification(_call(exports, "cli", "default"), logits, NLI)
    classify = _call(exports, "cli", "classify")
    np.testing.assert_allclose(classify["scores"], scipy.special.softmax(logits, -1), atol=ATOL)
    config = json.loads((exports["dirs"]["cli"] / "assets" / "export_config.json").read_text())
    assert config["is_pair"] is True and config["label_names"] == NLI
    assert config["tokenizer"] == "core" and config["requires_tensorflow_text"] is False


# ---- warmup records ----------------------------------------------------------------------------


@pytest.mark.slow
def test_warmup_records_parse_and_replay(exports):
    logs = read_warmup(exports["dirs"]["cls"])
    assert [log.WhichOneof("log_type") for log in logs] == [
        "predict_log",
        "predict_log",
        "predict_log",
        "classify_log",
    ]
    specs = [getattr(log, log.WhichOneof("log_type")).request.model_spec for log in logs]
    assert [(s.name, s.signature_name) for s in specs] == [
        ("cls", "serving_default"),
        ("cls", "serving_default"),
        ("cls", "encoded"),
        ("cls", "classification"),
    ]
    warm_a = [a for a, _ in WARMUP]
    model, pre = exports["models"]["cls"], exports["preprocessor"]
    logits = _logits(model, _text_ids(pre, warm_a))
    _assert_classification(_call(exports, "cls", "warmup_0"), logits[:1], LABELS3)
    _assert_classification(_call(exports, "cls", "warmup_1"), logits, LABELS3)
    _assert_classification(_call(exports, "cls", "warmup_2"), logits, LABELS3)
    np.testing.assert_allclose(
        _call(exports, "cls", "warmup_3")["scores"], scipy.special.softmax(logits, -1), atol=ATOL
    )

    reg_logs = read_warmup(exports["dirs"]["reg"])
    assert [log.WhichOneof("log_type") for log in reg_logs][-1] == "regress_log"
    assert set(reg_logs[0].predict_log.request.inputs) == {"text", "text_b"}
    scores = _logits(exports["models"]["reg"], _text_ids(pre, warm_a, [b for _, b in WARMUP]))[:, 0]
    np.testing.assert_allclose(_call(exports, "reg", "warmup_1")["scores"], scores, atol=ATOL)
    np.testing.assert_allclose(_call(exports, "reg", "warmup_3")["outputs"], scores, atol=ATOL)
    # The CLI used the default warmup sentences, all four records replay.
    assert all(f"warmup_{i}" in exports["loaded"]["cli"]["calls"] for i in range(4))
    for i in range(4):
        _call(exports, "cli", f"warmup_{i}")


# ---- layout, assets and versions -----------------------------------------------------------------


@pytest.mark.slow
def test_layout_versions_and_assets(exports, uncased_vocab):
    base = exports["base"]
    assert exports["dirs"]["cls"] == base / "cls" / "4"  # next after 3; .tmp-*/latest ignored
    assert sorted(p.name for p in (base / "cls").iterdir()) == [
        ".tmp-5-crashed",
        "3",
        "4",
        "latest",
    ]
    assert sorted(p.name for p in (base / "reg").iterdir()) == ["7"]
    assert sorted(p.name for p in (base / "rte").iterdir()) == ["1"]
    version = exports["dirs"]["cls"]
    assert {p.name for p in version.iterdir()} == {
        ".keras_bert_complete",  # fileio.COMPLETE_MARKER: published whole
        "saved_model.pb",
        "fingerprint.pb",
        "variables",
        "assets",
        "assets.extra",
    }
    assert (version / "assets" / "vocab.txt").read_bytes() == uncased_vocab.read_bytes()
    assert (version / "assets" / "labels.txt").read_text() == "negative\nneutral\npositive\n"
    assert not (exports["dirs"]["reg"] / "assets" / "labels.txt").exists()
    config = json.loads((version / "assets" / "export_config.json").read_text())
    assert config["label_names"] == LABELS3 and config["task_type"] == "classification"
    assert config["max_seq_length"] == 16 and config["input_id_dtype"] == "int32"
    assert config["bert_config"]["max_sequence_length"] == MAX_POSITIONS
    # The restored object's assets point into the version dir (not the source files).
    paths = exports["loaded"]["cls"]["asset_paths"]
    assert pathlib.Path(paths["vocab_file"]) == version / "assets" / "vocab.txt"


@pytest.mark.slow
def test_existing_version_is_never_overwritten(exports):
    target = exports["dirs"]["cls"]
    before = (target / "saved_model.pb").read_bytes()
    with pytest.raises(FileExistsError, match="version 4 already exists"):
        exports["models"]["cls"].export(exports["base"], "cls", version=4)
    assert (target / "saved_model.pb").read_bytes() == before
    assert sorted(p.name for p in (exports["base"] / "cls").iterdir()) == [
        ".tmp-5-crashed",
        "3",
        "4",
        "latest",
    ]


# ---- fast unit tests -------------------------------------------------------------------------------


def test_next_version_and_publish(tmp_path):
    model_dir = tmp_path / "m"
    assert versioning.existing_versions(model_dir) == [] and versioning.next_version(model_dir) == 1
    for name in ("2", "10", "0", "007x", ".tmp-11-abc", "latest"):
        (model_dir / name).mkdir(parents=True)
    (model_dir / "12").write_text("a file, not a version")
    assert versioning.existing_versions(model_dir) == [2, 10]
    assert versioning.next_version(model_dir) == 11
    tmp = model_dir / ".tmp-11-abc"
    (tmp / "saved_model.pb").write_text("x")
    assert versioning.publish(str(tmp), str(model_dir), 11) == str(model_dir / "11")
    assert (model_dir / "11" / "saved_model.pb").read_text() == "x" and not tmp.exists()
    other = model_dir / ".tmp-other"
    (other / "saved_model.pb").mkdir(parents=True)
    with pytest.raises(FileExistsError, match="version 10 already exists"):
        versioning.publish(other, model_dir, 10)
    assert other.exists() and not (model_dir / "10" / "saved_model.pb").exists()


def test_failed_export_leaves_no_version_and_no_temp_dir(tmp_path, monkeypatch, uncased_vocab):
    from tests.export.conftest import tiny_classifier

    def half_write(module, export_dir, signatures=None):
        (pathlib.Path(export_dir) / "saved_model.pb").write_text("half written")

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(ClassifierServingModule, "signatures", lambda self: {})
    monkeypatch.setattr(ClassifierServingModule, "warmup_logs", crash)
    monkeypatch.setattr(tf.saved_model, "save", half_write)
    monkeypatch.setattr(versioning, "set_method_names", lambda *a: None)
    model = tiny_classifier(2, ["0", "1"], "sst2", seed=0, vocab_file=uncased_vocab)
    with pytest.raises(OSError, match="disk full"):
        model.export(tmp_path, "sst2")
    assert list((tmp_path / "sst2").iterdir()) == []


def test_bad_arguments_raise_clear_errors(tmp_path, uncased_vocab):
    from tests.export.conftest import tiny_classifier

    model = tiny_classifier(2, ["0", "1"], "sst2", seed=0, vocab_file=uncased_vocab)
    with pytest.raises(ValueError, match="model_name must be a plain directory name, got 'a/b'"):
        model.export(tmp_path, "a/b")
    with pytest.raises(ValueError, match="version must be a positive integer, got 0"):
        model.export(tmp_path, "m", version=0)
    with pytest.raises(ValueError, match="tokenizer must be one of"):
        model.export(tmp_path, "m", tokenizer="spacy")
    assert not (tmp_path / "m").exists() or list((tmp_path / "m").iterdir()) == []
    bare = tiny_classifier(2, ["0", "1"], "sst2", seed=0)
    with pytest.raises(ValueError, match="export needs the task's preprocessor"):
        bare.export(tmp_path, "bare")


def test_too_long_max_seq_length_is_refused_before_any_version_is_written(tmp_path, uncased_vocab):
    from keras_bert.config import check_max_seq_length
    from keras_bert.tokenization import BertPreprocessor
    from tests.export.conftest import tiny_classifier

    model = tiny_classifier(2, ["0", "1"], "sst2", seed=0, vocab_file=uncased_vocab)
    message = (
        f"max_seq_length={MAX_POSITIONS + 1} exceeds the encoder's max_sequence_length="
        f"{MAX_POSITIONS} (the size of its position table)"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        model.preprocessor = BertPreprocessor(uncased_vocab, max_seq_length=MAX_POSITIONS + 1)
    assert model.preprocessor.max_seq_length == 16
    with pytest.raises(ValueError, match=re.escape(message)):
        apply_overrides(
            tiny_classifier(2, ["0", "1"], "sst2", 0, uncased_vocab),
            Overrides(max_seq_length=MAX_POSITIONS + 1),
        )
    with pytest.raises(
        ValueError,
        match=re.escape(
            "max_seq_length must be >= 3 for sentence pairs ([CLS] A [SEP] B [SEP]), got 2"
        ),
    ):
        check_max_seq_length(2, 512, is_pair=True)
    assert check_max_seq_length(2, 512) == 2


def test_set_method_names_rewrites_pb_and_fingerprint(tmp_path):
    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def f(self, inputs):
            return {"outputs": tf.strings.length(inputs)}

    m = M()
    tf.saved_model.save(m, str(tmp_path), signatures={"regression": m.f, "serving_default": m.f})
    versioning.set_method_names(tmp_path, {"regression": REGRESS_METHOD_NAME})
    from tensorflow.core.protobuf import saved_model_pb2

    (meta_graph,) = saved_model_pb2.SavedModel.FromString(
        (tmp_path / "saved_model.pb").read_bytes()
    ).meta_graphs
    assert meta_graph.signature_def["regression"].method_name == "tensorflow/serving/regress"
    assert meta_graph.signature_def["serving_default"].method_name == "tensorflow/serving/predict"
    loaded = tf.saved_model.load(str(tmp_path))
    assert loaded.signatures["regression"](inputs=tf.constant(["abc"]))["outputs"].numpy() == [3]
    with pytest.raises(KeyError, match="'classification' not in"):
        versioning.set_method_names(tmp_path, {"classification": CLASSIFY_METHOD_NAME})


def test_overrides_are_checked_against_the_task(uncased_vocab):
    from tests.export.conftest import tiny_classifier

    two = tiny_classifier(2, ["neg", "pos"], "sst2", seed=0, vocab_file=uncased_vocab)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "got 3 label names ['a', 'b', 'c'] but the task has 2 classes ['neg', 'pos']"
        ),
    ):
        apply_overrides(two, Overrides(label_names=["a", "b", "c"]))
    with pytest.raises(
        ValueError,
        match=re.escape("--is_pair=True but the task stored in the model has is_pair=False"),
    ):
        apply_overrides(two, Overrides(is_pair=True))
    with pytest.raises(
        ValueError,
        match=re.escape(
            "--task_type=regression but the task stored in the model has task_type=classification"
        ),
    ):
        apply_overrides(two, Overrides(task_type="regression"))
    with pytest.raises(
        ValueError,
        match=re.escape(
            "--do_lower_case=False but the task stored in the model has do_lower_case=True"
        ),
    ):
        apply_overrides(two, Overrides(do_lower_case=False))
    same = apply_overrides(
        two,
        Overrides(label_names=["bad", "good"], max_seq_length=8, is_pair=False, do_lower_case=True),
    )
    assert same.label_names == ["bad", "good"] and same.preprocessor.max_seq_length == 8
    assert same.preprocessor.vocabulary == two.preprocessor.vocabulary


def test_the_null_threshold_override_is_for_squad_v2_tasks_only(uncased_vocab):
    from tests.export.conftest import tiny_classifier
    from tests.tasks.test_span_question_answerer import tiny_task

    override = Overrides(null_score_diff_threshold=2.5)
    two = tiny_classifier(2, ["neg", "pos"], "sst2", seed=0, vocab_file=uncased_vocab)
    for task, kind in ((two, "classification"), (tiny_task(), "span_question_answering")):
        with pytest.raises(
            ValueError,
            match=re.escape(
                "--null_score_diff_threshold applies to a SQuAD v2.0 task (span question "
                f"answering with version_2_with_negative); this task is {kind}"
            ),
        ):
            apply_overrides(task, override)
    v2 = tiny_task(version_2_with_negative=True)
    with pytest.raises(ValueError, match="--null_score_diff_threshold must be a number, not NaN"):
        apply_overrides(v2, Overrides(null_score_diff_threshold=float("nan")))
    assert v2.null_score_diff_threshold == 0.0
    assert apply_overrides(v2, override).null_score_diff_threshold == 2.5
    assert v2.export_metadata()["null_score_diff_threshold"] == 2.5  # export_config.json's


@pytest.mark.slow
def test_cli_rejects_more_label_names_than_classes(exports):
    from tests.export.conftest import run_export

    run_dir = exports["base"].parent / "run"  # the conftest's 2-class rte fine-tuning output_dir
    base = exports["base"].parent / "rejected"
    proc = run_export(run_dir, base, "rte", "--label_names=a,b,c", timeout=300)
    assert proc.returncode == 2
    assert "got 3 label names ['a', 'b', 'c'] but the task has 2 classes" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (base / "rte" / "1").exists()


@pytest.mark.slow
def test_bfloat16_export_stores_bfloat16_variables_and_keeps_predictions(tmp_path, uncased_vocab):
    from tests.export.conftest import tiny_classifier

    model = tiny_classifier(3, LABELS3, None, seed=5, vocab_file=uncased_vocab)
    with pytest.raises(
        ValueError, match=r"dtype must be one of \['float32', 'bfloat16'\], got 'int8'"
    ):
        with_dtype(model, "int8")
    assert with_dtype(model, "float32") is model
    path = pathlib.Path(model.export(tmp_path, "cls", dtype="bfloat16"))
    assert (
        json.loads((path / "assets" / "export_config.json").read_text())["dtype_policy"]
        == "bfloat16"
    )
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o777 & ~umask  # readable by a server of another user
    loaded = tf.saved_model.load(str(path))
    dtypes = set(
        tf.train.load_checkpoint(str(path / "variables" / "variables"))
        .get_variable_to_dtype_map()
        .values()
    )
    assert (
        tf.bfloat16 in dtypes and tf.float32 in dtypes
    )  # dense/embedding tables bf16, LayerNorm float32
    out = loaded.signatures["serving_default"](text=tf.constant(TEXTS))
    probs = model.predict(TEXTS)
    assert out["probabilities"].dtype == tf.float32
    np.testing.assert_allclose(out["probabilities"].numpy(), probs, atol=0.02)
    np.testing.assert_array_equal(out["label_ids"].numpy(), probs.argmax(-1))
