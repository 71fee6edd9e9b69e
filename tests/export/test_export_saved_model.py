"""SavedModel export: round trip in a fresh TensorFlow-only process, layout, versions, warmup.

The slow tests share the session fixture `exports` (tests/export/conftest.py): three tiny
exports loaded once by `_load_and_call.py` under `python -I`.
"""
import json
import os
import pathlib

import numpy as np
import pytest
import scipy.special
import tensorflow as tf

import export.export_saved_model as esm
from export import signatures as sigs
from tests.export.conftest import (LABELS3, MAX_POSITIONS, NLI, TEXTS, TEXTS_B, WARMUP,
                                   read_warmup)

ATOL = 1e-5


def _logits(model, ids):
    return model({k: tf.constant(v) for k, v in ids.items()}, training=False).numpy()


def _text_ids(pre, a, b=None):
    out = pre({"text": tf.constant(a), "text_b": tf.constant(b)} if b is not None else tf.constant(a))
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
    ids = {n: ("int32", (None, None)) for n in sigs.INPUT_NAMES}
    examples = {"inputs": ("string", (None,))}

    def cls_out(c):
        return {"probabilities": ("float32", (None, c)), "label_ids": ("int64", (None,)),
                "labels": ("string", (None,))}

    reg_out = {"scores": ("float32", (None,))}
    expected = {
        "cls": {"serving_default": (text, cls_out(3)), "encoded": (ids, cls_out(3)),
                "classification": (examples, {"classes": ("string", (None, 3)),
                                              "scores": ("float32", (None, 3))})},
        "reg": {"serving_default": (pair, reg_out), "encoded": (ids, reg_out),
                "regression": (examples, {"outputs": ("float32", (None,))})},
        "cli": {"serving_default": (pair, cls_out(2)), "encoded": (ids, cls_out(2)),
                "classification": (examples, {"classes": ("string", (None, 2)),
                                              "scores": ("float32", (None, 2))})},
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
    want = {"cls": {"serving_default": sigs.PREDICT_METHOD_NAME, "encoded": sigs.PREDICT_METHOD_NAME,
                    "classification": "tensorflow/serving/classify"},
            "reg": {"serving_default": sigs.PREDICT_METHOD_NAME, "encoded": sigs.PREDICT_METHOD_NAME,
                    "regression": "tensorflow/serving/regress"}}
    for key, methods in want.items():
        pb = (exports["dirs"][key] / "saved_model.pb").read_bytes()
        meta_graph, = saved_model_pb2.SavedModel.FromString(pb).meta_graphs
        got = {k: v.method_name for k, v in meta_graph.signature_def.items()
               if not k.startswith("__")}
        assert got == methods
    # The rewritten saved_model.pb keeps a matching fingerprint.
    fingerprint = tf.saved_model.experimental.read_fingerprint(str(exports["dirs"]["cls"]))
    from tensorflow.python.saved_model import fingerprinting_utils
    assert fingerprint.singleprint() == fingerprinting_utils.singleprint_from_saved_model_proto(
        str(exports["dirs"]["cls"]))


# ---- outputs equal the in-process model ---------------------------------------------------------

@pytest.mark.slow
def test_classification_outputs_match_in_process(exports):
    model, pre = exports["models"]["cls"], exports["preprocessor"]
    logits = _logits(model, exports["ids1"])
    assert np.ptp(logits[:, 0]) > 1e-2  # the texts give different outputs: not a constant model
    _assert_classification(_call(exports, "cls", "default"), logits, LABELS3)
    _assert_classification(_call(exports, "cls", "encoded"), logits, LABELS3)
    _assert_classification(_call(exports, "cls", "encoded_int64_fn"), logits, LABELS3)
    _assert_classification(_call(exports, "cls", "encoded_short"),
                           _logits(model, exports["short"]), LABELS3)
    classify = _call(exports, "cls", "classify")
    np.testing.assert_allclose(classify["scores"], scipy.special.softmax(logits, -1), atol=ATOL)
    assert classify["classes"].tolist() == [[x.encode() for x in LABELS3]] * len(TEXTS)
    del pre


@pytest.mark.slow
def test_batch_one_keeps_batch_dim_and_batch_zero_is_empty(exports):
    b1 = _call(exports, "cls", "default_b1")
    assert b1["probabilities"].shape == (1, 3) and b1["label_ids"].shape == (1,)
    _assert_classification(b1, _logits(exports["models"]["cls"],
                                       {k: v[:1] for k, v in exports["ids1"].items()}), LABELS3)
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
    model, pre = exports["models"]["cli"], exports["preprocessor"]
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
        "predict_log", "predict_log", "predict_log", "classify_log"]
    specs = [getattr(log, log.WhichOneof("log_type")).request.model_spec for log in logs]
    assert [(s.name, s.signature_name) for s in specs] == [
        ("cls", "serving_default"), ("cls", "serving_default"), ("cls", "encoded"),
        ("cls", "classification")]
    warm_a = [a for a, _ in WARMUP]
    model, pre = exports["models"]["cls"], exports["preprocessor"]
    logits = _logits(model, _text_ids(pre, warm_a))
    _assert_classification(_call(exports, "cls", "warmup_0"), logits[:1], LABELS3)
    _assert_classification(_call(exports, "cls", "warmup_1"), logits, LABELS3)
    _assert_classification(_call(exports, "cls", "warmup_2"), logits, LABELS3)
    np.testing.assert_allclose(_call(exports, "cls", "warmup_3")["scores"],
                               scipy.special.softmax(logits, -1), atol=ATOL)

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
    assert sorted(p.name for p in (base / "cls").iterdir()) == [".tmp-5-crashed", "3", "4", "latest"]
    assert sorted(p.name for p in (base / "reg").iterdir()) == ["7"]
    assert sorted(p.name for p in (base / "rte").iterdir()) == ["1"]
    version = exports["dirs"]["cls"]
    assert {p.name for p in version.iterdir()} == {
        "saved_model.pb", "fingerprint.pb", "variables", "assets", "assets.extra"}
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
def test_existing_version_is_never_overwritten(exports, uncased_vocab):
    target = exports["dirs"]["cls"]
    before = (target / "saved_model.pb").read_bytes()
    with pytest.raises(FileExistsError, match="version 4 already exists"):
        esm.export_classifier(exports["models"]["cls"], exports["base"], "cls", LABELS3,
                              uncased_vocab, True, 16, task_type="classification", version=4)
    assert (target / "saved_model.pb").read_bytes() == before
    assert sorted(p.name for p in (exports["base"] / "cls").iterdir()) == [
        ".tmp-5-crashed", "3", "4", "latest"]


# ---- fast unit tests -------------------------------------------------------------------------------

def test_next_version_and_publish(tmp_path):
    model_dir = tmp_path / "m"
    assert esm.existing_versions(model_dir) == [] and esm.next_version(model_dir) == 1
    for name in ("2", "10", "0", "007x", ".tmp-11-abc", "latest"):
        (model_dir / name).mkdir(parents=True)
    (model_dir / "12").write_text("a file, not a version")
    assert esm.existing_versions(model_dir) == [2, 10]
    assert esm.next_version(model_dir) == 11
    tmp = model_dir / ".tmp-11-abc"
    (tmp / "saved_model.pb").write_text("x")
    assert esm.publish(tmp, model_dir, 11) == model_dir / "11"
    assert (model_dir / "11" / "saved_model.pb").read_text() == "x" and not tmp.exists()
    other = model_dir / ".tmp-other"
    (other / "saved_model.pb").mkdir(parents=True)
    with pytest.raises(FileExistsError, match="version 10 already exists"):
        esm.publish(other, model_dir, 10)
    assert other.exists() and not (model_dir / "10" / "saved_model.pb").exists()


def test_failed_export_leaves_no_version_and_no_temp_dir(tmp_path, monkeypatch, uncased_vocab):
    from tests.export.conftest import tiny_classifier

    def half_write(module, export_dir, signatures=None):
        (pathlib.Path(export_dir) / "saved_model.pb").write_text("half written")

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(sigs.ClassifierServingModule, "signatures", lambda self: {})
    monkeypatch.setattr(tf.saved_model, "save", half_write)
    monkeypatch.setattr(esm, "set_method_names", lambda *a: None)
    monkeypatch.setattr(esm, "warmup_logs", crash)
    model = tiny_classifier(2, ["0", "1"], "sst2", seed=0)
    with pytest.raises(OSError, match="disk full"):
        esm.export_classifier(model, tmp_path, "sst2", None, uncased_vocab, True, 16,
                              preprocessor=object())
    assert list((tmp_path / "sst2").iterdir()) == []


def test_bad_arguments_raise_clear_errors(tmp_path, uncased_vocab):
    from tests.export.conftest import tiny_classifier
    model = tiny_classifier(2, ["0", "1"], "sst2", seed=0)
    with pytest.raises(ValueError, match="model_name"):
        esm.export_classifier(model, tmp_path, "a/b", None, uncased_vocab, True, 16, preprocessor=1)
    with pytest.raises(ValueError, match="positive integer"):
        esm.export_classifier(model, tmp_path, "m", None, uncased_vocab, True, 16, version=0,
                              preprocessor=1)
    with pytest.raises(ValueError, match="tokenizer must be one of"):
        esm.make_preprocessor(uncased_vocab, True, 16, tokenizer="spacy")
    with pytest.raises(ValueError, match="task_type"):
        sigs.ClassifierServingModule(model, None, ["0", "1"], task_type="ner")
    with pytest.raises(ValueError, match=">= 2 label_names"):
        sigs.ClassifierServingModule(model, None, ["0"])
    import keras
    with pytest.raises(ValueError, match="holds no BertEncoder"):
        sigs.find_encoder(keras.Sequential([keras.layers.Dense(2)]))


def test_task_inference_from_the_model():
    assert esm.infer_is_pair("mrpc") and esm.infer_is_pair("STS-B")
    assert esm.infer_is_pair("text_pair_classification")
    assert not esm.infer_is_pair("sst2") and not esm.infer_is_pair("cola")
    assert not esm.infer_is_pair(None) and not esm.infer_is_pair("my_task")


def test_resolve_model_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a directory or .keras file"):
        esm.resolve_model_dir(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="holds 0 .keras files"):
        esm.resolve_model_dir(tmp_path)
    (tmp_path / "best_model.keras").write_text("x")
    (tmp_path / "other.keras").write_text("x")
    (tmp_path / "config.json").write_text(json.dumps({"vocab_file": "v.txt", "max_seq_length": 64}))
    (tmp_path / "labels.json").write_text(json.dumps({"labels": ["0", "1"], "is_pair": False}))
    path, meta = esm.resolve_model_dir(tmp_path)
    assert path == tmp_path / "best_model.keras"
    assert meta == {"vocab_file": "v.txt", "max_seq_length": 64, "labels": ["0", "1"],
                    "is_pair": False}
    path, meta = esm.resolve_model_dir(tmp_path / "other.keras")
    assert path == tmp_path / "other.keras" and meta["max_seq_length"] == 64


def test_set_method_names_rewrites_pb_and_fingerprint(tmp_path):
    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def f(self, inputs):
            return {"outputs": tf.strings.length(inputs)}

    m = M()
    tf.saved_model.save(m, str(tmp_path), signatures={"regression": m.f, "serving_default": m.f})
    esm.set_method_names(tmp_path, {"regression": sigs.REGRESS_METHOD_NAME})
    from tensorflow.core.protobuf import saved_model_pb2
    meta_graph, = saved_model_pb2.SavedModel.FromString(
        (tmp_path / "saved_model.pb").read_bytes()).meta_graphs
    assert meta_graph.signature_def["regression"].method_name == "tensorflow/serving/regress"
    assert meta_graph.signature_def["serving_default"].method_name == "tensorflow/serving/predict"
    loaded = tf.saved_model.load(str(tmp_path))
    assert loaded.signatures["regression"](inputs=tf.constant(["abc"]))["outputs"].numpy() == [3]
    with pytest.raises(KeyError, match="'classification' not in"):
        esm.set_method_names(tmp_path, {"classification": sigs.CLASSIFY_METHOD_NAME})


def test_label_names_must_match_num_classes_and_stored_names():
    from tests.export.conftest import tiny_classifier
    two = tiny_classifier(2, ["neg", "pos"], "sst2", seed=0)
    with pytest.raises(ValueError, match=r"got 3 label names \['a', 'b', 'c'\] but the model has "
                                         r"num_classes=2"):
        esm.resolve_label_names(two, ["a", "b", "c"], "classification")
    unnamed = tiny_classifier(2, None, "sst2", seed=0)
    with pytest.raises(ValueError, match="got 1 label names .* num_classes=2"):
        esm.resolve_label_names(unnamed, ["a"], "classification")
    # a model whose stored names disagree in count with the ones given (num_classes not checked)
    two.num_classes = None
    with pytest.raises(ValueError, match=r"got 3 label names .* but the model stores 2 label_names "
                                         r"\['neg', 'pos'\]"):
        esm.resolve_label_names(two, ["a", "b", "c"], "classification")
    two.num_classes = 2
    assert esm.resolve_label_names(two, ["bad", "good"], "classification") == ["bad", "good"]
    assert esm.resolve_label_names(two, None, "classification") == ["neg", "pos"]
    assert esm.resolve_label_names(unnamed, (0, 1), "classification") == ["0", "1"]
    assert esm.resolve_label_names(two, ["x"], "regression") == []


@pytest.mark.slow
def test_cli_rejects_more_label_names_than_classes(exports):
    import subprocess
    import sys
    from tests.export.conftest import REPO
    run_dir = exports["base"].parent / "run"  # the conftest's 2-class rte fine-tuning output_dir
    base = exports["base"].parent / "rejected"
    proc = subprocess.run([sys.executable, "-m", "export", f"--model_dir={run_dir}",
                           f"--export_base={base}", "--model_name=rte", "--label_names=a,b,c"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "got 3 label names ['a', 'b', 'c'] but the model has num_classes=2" in proc.stderr
    assert not (base / "rte" / "1").exists()


@pytest.mark.slow
def test_bfloat16_export_stores_bfloat16_variables_and_keeps_predictions(tmp_path, uncased_vocab):
    from tests.export.conftest import tiny_classifier
    model = tiny_classifier(3, LABELS3, None, seed=5)
    with pytest.raises(ValueError, match=r"dtype must be one of \['float32', 'bfloat16'\], got 'int8'"):
        esm.with_dtype(model, "int8")
    assert esm.with_dtype(model, "float32") is model
    path = esm.export_classifier(model, tmp_path, "cls", LABELS3, uncased_vocab, True, 16, dtype="bfloat16")
    assert json.loads((path / "assets" / "export_config.json").read_text())["dtype_policy"] == "bfloat16"
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o777 & ~umask  # readable by a server of another user
    loaded = tf.saved_model.load(str(path))
    dtypes = set(tf.train.load_checkpoint(str(path / "variables" / "variables")).get_variable_to_dtype_map().values())
    assert tf.bfloat16 in dtypes and tf.float32 in dtypes  # dense/embedding tables bf16, LayerNorm float32
    out = loaded.signatures["serving_default"](text=tf.constant(TEXTS))
    pre = esm.make_preprocessor(uncased_vocab, True, 16, "core")
    probs = scipy.special.softmax(_logits(model, _text_ids(pre, TEXTS)).astype(np.float64), axis=-1)
    assert out["probabilities"].dtype == tf.float32
    np.testing.assert_allclose(out["probabilities"].numpy(), probs, atol=0.02)
    np.testing.assert_array_equal(out["label_ids"].numpy(), probs.argmax(-1))
