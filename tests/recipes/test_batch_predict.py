"""recipes/batch_predict.py and keras_bert.batch_prediction on the DirectRunner in this process (one
worker): outputs equal the export's own serving_default, malformed rows dead-lettered with reasons
and every other row predicted once, a failing batch retried row by row, counts that add up, files
on ram://, usage errors, and evaluate.py --predictions equal to evaluate.py --model."""

import base64
import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf
from seqeval import metrics as sm
from tensorflow_serving.apis import prediction_log_pb2

from keras_bert import beam, fileio
from keras_bert.batch_prediction import model_handler, pipeline
from keras_bert.batch_prediction.rows import InputRow
from keras_bert.evaluation import recorded_predictions
from keras_bert.evaluation.evidence_pack import DataError
from keras_bert.data.conll import read_conll, to_iob2
from tests.evaluation.tiny_task import (
    CONLL,
    TEXTS,
    heldout_rows,
    tiny_classifier,
    tiny_tagger,
    write_jsonl,
)
from tests.recipes.beam_logs import beam_info_lines
from tests.recipes.recipe_process import run_recipe

# Each test runs a pipeline or a recipe (5-40 s on a 2-core CPU).
pytestmark = pytest.mark.slow
# Long and short texts mixed, so the length buckets (characters) split them into several batches.
BOUNDARIES = (16, 40)


def direct_options():
    return beam.pipeline_options(beam.pipeline_args("DirectRunner", "", 1, False))


@pytest.fixture(scope="module")
def export(tmp_path_factory, uncased_vocab):
    """A tiny 3-class TextClassifier exported as <base>/tiny/1, and its serving_default."""
    base = tmp_path_factory.mktemp("export")
    version_dir = tiny_classifier(uncased_vocab, seed=1).export(base, "tiny")
    loaded = tf.saved_model.load(version_dir)
    return {"base": base / "tiny", "version_dir": version_dir, "loaded": loaded}


def serving_default(export, texts):
    out = export["loaded"].signatures["serving_default"](text=tf.constant(texts))
    return {k: v.numpy() for k, v in out.items()}


def read_jsonl_shards(directory, kind):
    lines = []
    for path in sorted(fileio.glob(fileio.join(str(directory), f"{kind}-*.jsonl"))):
        lines += fileio.read_jsonl(path)
    return lines


def test_outputs_equal_serving_default_with_and_without_buckets(export, tmp_path):
    texts = TEXTS * 2  # 24 rows, lengths 9..80 characters
    data = tmp_path / "in.tsv"
    data.write_text("id\tsentence\n" + "".join(f"k{i}\t{t}\n" for i, t in enumerate(texts)))
    want = serving_default(export, texts)
    for name, boundaries in (("bucketed", BOUNDARIES), ("plain", ())):
        config = pipeline.BatchPredictConfig(
            model=str(export["base"]),  # a base dir: its newest complete version is taken
            input=str(tmp_path / "*.tsv"),
            output_dir=str(tmp_path / name),
            text_column="sentence",
            key_column="id",
            eval_batch_size=4,
            bucket_boundaries=boundaries,
            num_shards=2,
        )
        summary = pipeline.run(config, direct_options())
        assert summary["model_dir"] == export["version_dir"]
        assert summary["counts"] == {"rows_read": 24, "predicted": 24, "errors": 0}
        out = tmp_path / name
        assert sorted(p.name for p in out.iterdir()) == [
            ".keras_bert_complete",
            "batch_predict.json",
            "errors-00000-of-00002.jsonl",
            "errors-00001-of-00002.jsonl",
            "prediction_logs-00000-of-00002.tfrecord",
            "prediction_logs-00001-of-00002.tfrecord",
            "predictions-00000-of-00002.jsonl",
            "predictions-00001-of-00002.jsonl",
        ]
        assert json.loads((out / "batch_predict.json").read_text())["counts"] == summary["counts"]
        records = {r["id"]: r for r in read_jsonl_shards(out, "predictions")}
        assert sorted(records) == sorted(f"k{i}" for i in range(24))
        for i in range(24):
            r = records[f"k{i}"]
            assert r["input_row"] == i and r["input_file"] == str(data)
            np.testing.assert_allclose(r["probabilities"], want["probabilities"][i], atol=1e-5)
            assert r["label_ids"] == want["label_ids"][i]
            assert r["labels"] == want["labels"][i].decode()
        assert read_jsonl_shards(out, "errors") == []
        logs = []
        for path in sorted(out.glob("prediction_logs-*.tfrecord")):
            for raw in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
                logs.append(prediction_log_pb2.PredictionLog.FromString(raw).predict_log)
        assert len(logs) == 24
        for log in logs:
            text = tf.make_ndarray(log.request.inputs["text"])[0].decode()
            i = texts.index(text)  # a repeated text has the same outputs
            assert log.request.model_spec.name == "tiny"
            assert log.request.model_spec.version.value == 1
            assert log.request.model_spec.signature_name == "serving_default"
            assert set(log.response.outputs) == {"probabilities", "label_ids", "labels"}
            probabilities = tf.make_ndarray(log.response.outputs["probabilities"])
            assert probabilities.shape == (1, 3)
            np.testing.assert_allclose(probabilities[0], want["probabilities"][i], atol=1e-5)


def test_buckets_that_never_fill_a_batch_are_flushed_at_the_end(export, tmp_path):
    """No bucket holds eval_batch_size rows: every batch is flushed at the end of the input. Beam's
    DirectRunner would run this on its bundle-based runner, which fails here (apache/beam#28716);
    keras_bert.beam.create_pipeline runs it on the FnApiRunner."""
    texts = TEXTS[:6]
    data = write_jsonl(tmp_path / "in.jsonl", [{"text": t} for t in texts])
    config = pipeline.BatchPredictConfig(
        model=export["version_dir"],
        input=str(data),
        output_dir=str(tmp_path / "out"),
        eval_batch_size=64,
    )
    assert config.bucket_boundaries == pipeline.DEFAULT_BUCKET_BOUNDARIES
    summary = pipeline.run(config, direct_options())
    assert summary["counts"] == {"rows_read": 6, "predicted": 6, "errors": 0}
    want = serving_default(export, texts)
    records = sorted(
        read_jsonl_shards(tmp_path / "out", "predictions"), key=lambda r: r["input_row"]
    )
    assert [r["input_row"] for r in records] == list(range(6))
    np.testing.assert_allclose(
        [r["probabilities"] for r in records], want["probabilities"], atol=1e-5
    )


def test_the_recipe_on_two_worker_processes(export, tmp_path):
    """recipes/batch_predict.py with --num_workers=2: Beam's FnApiRunner in two worker processes
    (direct_num_workers, multi_processing), the outputs those of the export's serving_default,
    and no log line of Beam's at INFO (79 before: its workers' start-up, gRPC channels and
    shutdown)."""
    texts = TEXTS * 2
    data = write_jsonl(
        tmp_path / "in.jsonl", [{"id": f"k{i}", "text": t} for i, t in enumerate(texts)]
    )
    proc = run_recipe(
        "batch_predict.py",
        f"--model={export['base']}",
        f"--input={data}",
        "--key_column=id",
        "--batch_size=4",
        "--num_workers=2",
        f"--output_dir={tmp_path / 'out'}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1].startswith("rows read 24, predicted 24, errors 0")
    # Beam's own logs stay at warnings here and in the worker processes (keras_bert.beam_worker)
    assert beam_info_lines(proc.stdout + proc.stderr) == []
    summary = json.loads((tmp_path / "out" / "batch_predict.json").read_text())
    # The older spelling's value, recorded under the flag's name only.
    assert summary["config"]["eval_batch_size"] == 4 and "batch_size" not in summary["config"]
    assert summary["pipeline_options"]["direct_num_workers"] == 2
    assert summary["pipeline_options"]["direct_running_mode"] == "multi_processing"
    want = serving_default(export, texts)
    for r in read_jsonl_shards(tmp_path / "out", "predictions"):
        i = int(r["id"][1:])
        assert r["input_row"] == i
        np.testing.assert_allclose(r["probabilities"], want["probabilities"][i], atol=1e-5)
    assert len(read_jsonl_shards(tmp_path / "out", "predictions")) == 24


def _example(**features):
    feature = {
        k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[v])) for k, v in features.items()
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_malformed_rows_go_to_errors_with_reasons_on_ram_uris(export):
    base = "ram://batch_predict_malformed"
    fileio.makedirs(base)
    jsonl = [
        b'{"id": "j0", "text": "a great film"}',
        b'{"id": "j1", "text": "dull and',  # not JSON
        b'{"id": "j2", "text": "caf\xe9 au lait"}',  # Latin-1 byte: not UTF-8
        b"",  # blank: not a row
        b'{"id": "j3", "txt": "no text key"}',
        b'{"id": "j4", "text": "   "}',
        b'["j5", "a list"]',
        b'{"text": "no key"}',
        b'{"id": "j7", "text": "wonderful cast"}',
    ]
    fileio.write_bytes(f"{base}/a.jsonl", b"\n".join(jsonl) + b"\n")
    csv_rows = b'id,text\nc0,brilliant\nc1\nc2,too,many\nc3,"na\xefve"\nc4,not good\n'
    fileio.write_bytes(f"{base}/b.csv", csv_rows)
    tfrecord = f"{base}/c.tfrecord"
    with tf.io.TFRecordWriter(tfrecord) as writer:
        writer.write(_example(id=b"t0", text=b"okay i guess"))
        writer.write(_example(id=b"t1", sentence=b"wrong feature"))
        writer.write(b"\x08not an example")
        writer.write(_example(id=b"t3", text=b"boring"))
    config = pipeline.BatchPredictConfig(
        model=export["version_dir"],
        input=f"{base}/a.jsonl,{base}/b.csv,{base}/c.tfrecord",
        output_dir=f"{base}/out",
        key_column="id",
        eval_batch_size=3,
        bucket_boundaries=BOUNDARIES,
    )
    summary = pipeline.run(config, direct_options())
    assert summary["counts"] == {"rows_read": 17, "predicted": 6, "errors": 11}
    predicted = read_jsonl_shards(f"{base}/out", "predictions")
    assert [(r["id"], r["input_row"]) for r in predicted] == [
        ("j0", 0),
        ("j7", 7),
        ("c0", 0),
        ("c4", 4),
        ("t0", 0),
        ("t3", 3),
    ]
    want = serving_default(
        export,
        ["a great film", "wonderful cast", "brilliant", "not good", "okay i guess", "boring"],
    )
    np.testing.assert_allclose(
        [r["probabilities"] for r in predicted], want["probabilities"], atol=1e-5
    )
    errors = [
        (fileio.basename(e["input_file"]), e["input_row"], e["id"], e["reason"])
        for e in read_jsonl_shards(f"{base}/out", "errors")
    ]
    reasons = [
        ("a.jsonl", 1, None, "not JSON"),
        ("a.jsonl", 2, "j2", "text column 'text' is not UTF-8"),
        ("a.jsonl", 3, "j3", "missing text column 'text'"),
        ("a.jsonl", 4, "j4", "empty text in column 'text'"),
        ("a.jsonl", 5, None, "not a JSON object but list"),
        ("a.jsonl", 6, None, "missing key column 'id'"),
        ("b.csv", 1, "c1", "missing text column 'text'"),
        ("b.csv", 2, "c2", "3 fields; the header has 2"),
        ("b.csv", 3, "c3", "text column 'text' is not UTF-8"),
        ("c.tfrecord", 1, "t1", "missing text column 'text'"),
        ("c.tfrecord", 2, None, "record is not a tf.train.Example"),
    ]
    assert [e[:3] for e in errors] == [r[:3] for r in reasons]
    for got, expected in zip(errors, reasons):
        assert got[3].startswith(expected[3]), (got, expected)
    raw = {
        (fileio.basename(e["input_file"]), e["input_row"]): e["raw"]
        for e in read_jsonl_shards(f"{base}/out", "errors")
    }
    assert raw[("a.jsonl", 2)] == {"id": "j2", "text": "caf\\xe9 au lait"}
    assert raw[("b.csv", 3)] == {"id": "c3", "text": "na\\xefve"}
    assert base64.b64decode(raw[("c.tfrecord", 2)]) == b"\x08not an example"
    assert fileio.is_complete(f"{base}/out")
    assert [n for n in fileio.listdir(base) if n.startswith(".")] == []  # no staging dir left
    fileio.rmtree(base)


class PoisonedSignature:
    """The real signature, failing (as a model would) on any batch holding `poison`."""

    def __init__(self, loaded, poison):
        self.real, self.poison = loaded.signatures["serving_default"], poison

    def __call__(self, text):
        if self.poison.encode() in text.numpy().tolist():
            raise tf.errors.InvalidArgumentError(None, None, "poisoned row in batch")
        return self.real(text=text)


def test_a_failed_batch_is_retried_row_by_row(export):
    handler = model_handler.TextSignatureHandler(
        model_handler.ExportSignature.read(export["version_dir"]), eval_batch_size=4
    )
    assert "length_fn" not in handler.batch_elements_kwargs()  # no buckets asked for
    bucketed = model_handler.TextSignatureHandler(handler.export, 4, BOUNDARIES)
    kwargs = bucketed.batch_elements_kwargs()  # Beam's length-keyed stateful batching
    assert kwargs["bucket_boundaries"] == list(BOUNDARIES) and kwargs["max_batch_size"] == 4
    assert kwargs["length_fn"](InputRow(0, "f", 0, None, "abc", "de", {})) == 5
    model = handler.load_model()
    model.signature = PoisonedSignature(model.saved_model, "awful acting")
    rows = [InputRow(0, "f", i, f"k{i}", t, None, {}) for i, t in enumerate(TEXTS[:6])]
    results = list(handler.run_inference(rows, model))
    assert [r.example for r in results] == rows
    failed = [r for r in results if isinstance(r.inference, model_handler.PredictionFailure)]
    assert [r.example.text for r in failed] == ["awful acting"]
    assert "poisoned row in batch" in failed[0].inference.reason
    want = serving_default(export, TEXTS[:6])
    for i, r in enumerate(results):
        if r not in failed:
            np.testing.assert_allclose(
                r.inference["probabilities"], want["probabilities"][i], atol=1e-5
            )


def test_newest_complete_version_and_usage_errors(export, tmp_path):
    base = tmp_path / "models"
    (base / "3").mkdir(parents=True)  # no saved_model.pb: being written by someone else
    os.symlink(export["version_dir"], base / "2")
    assert model_handler.resolve_model_dir(str(base)) == str(base / "2")
    data = tmp_path / "in.csv"
    data.write_text("id,sentence\n1,a great film\n")
    proc = run_recipe(
        "batch_predict.py",
        f"--model={base}",
        f"--input={data}",
        f"--output_dir={tmp_path / 'out'}",
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"batch_predict.py: error: {data}: no column(s) ['text']; columns present: "
        "['id', 'sentence']"
    )
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="takes one text; --text_b_column does not apply"):
        pipeline.prepare(
            pipeline.BatchPredictConfig(str(base), str(data), str(tmp_path / "o"), "sentence", "id")
        )
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ValueError, match="exists and is not empty"):
        pipeline.prepare(
            pipeline.BatchPredictConfig(str(base), str(data), str(tmp_path / "full"), "sentence")
        )


def test_a_run_that_predicts_no_row_exits_1_and_keeps_its_errors(export, tmp_path):
    data = tmp_path / "in.csv"
    data.write_text('id,text\n1,"   "\n2,\n3,"a", "b"\n')
    out = tmp_path / "out"
    proc = run_recipe(
        "batch_predict.py",
        f"--model={export['version_dir']}",
        f"--input={data}",
        f"--output_dir={out}",
        "--key_column=id",
        "--eval_batch_size=4",
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    config = json.loads((out / "batch_predict.json").read_text())["config"]
    assert config["eval_batch_size"] == 4 and "batch_size" not in config
    assert proc.stderr.strip().splitlines()[-1] == (
        f"batch_predict.py: error: no row was predicted: 3 rows read, 3 in {out}/errors-*.jsonl "
        "with their reasons"
    )
    errors = sorted(read_jsonl_shards(str(out), "errors"), key=lambda e: e["input_row"])
    assert [(e["id"], e["reason"]) for e in errors] == [
        ("1", "empty text in column 'text'"),
        ("2", "empty text in column 'text'"),
        ("3", "3 fields; the header has 2"),  # a malformed row keeps the key it has
    ]


def assert_same_metrics(a, b, path=""):
    """Equal structure and values; floats within float32 rounding (rows are batched differently,
    so their padding, and the last bits of a probability, differ)."""
    if isinstance(a, dict):
        assert sorted(a) == sorted(b), path
        for k in a:
            assert_same_metrics(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_metrics(x, y, f"{path}.{i}")
    elif isinstance(a, float) and not isinstance(b, str):
        assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7), (path, a, b)
    else:
        assert a == b, path


def test_evaluate_predictions_equals_evaluate_model(export, tmp_path):
    rows = [dict(r, id=f"r{i}") for i, r in enumerate(heldout_rows())]
    labelled = write_jsonl(tmp_path / "heldout.jsonl", rows)
    # The batch prediction reads the rows in another order: the key column joins them back.
    write_jsonl(
        tmp_path / "unlabelled.jsonl", [{"id": r["id"], "text": r["text"]} for r in rows[::-1]]
    )
    common = ("--noprogress", f"--data={labelled}", "--slice_column=source")
    config = pipeline.BatchPredictConfig(
        model=export["version_dir"],
        input=str(tmp_path / "unlabelled.jsonl"),
        output_dir=str(tmp_path / "preds"),
        key_column="id",
        eval_batch_size=3,
        bucket_boundaries=BOUNDARIES,
    )
    pipeline.run(config, direct_options())
    live = run_recipe(
        "evaluate.py",
        *common,
        f"--model={export['version_dir']}",
        f"--output_dir={tmp_path / 'live'}",
    )
    assert live.returncode == 0, live.stderr[-3000:]
    recorded = run_recipe(
        "evaluate.py",
        *common,
        f"--predictions={tmp_path / 'preds'}",
        f"--output_dir={tmp_path / 'rec'}",
    )
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    a = json.loads((tmp_path / "live" / "metrics.json").read_text())
    b = json.loads((tmp_path / "rec" / "metrics.json").read_text())
    assert b["model"]["path"] == f"batch predictions {tmp_path / 'preds'}"
    assert b["latency"]["measured"] is False and "p50_ms" not in b["latency"]
    assert a["latency"]["mean_ms"] > 0
    assert "behaviour" in a and "behaviour" not in b  # behavioural tests need a model to run
    assert f"--predictions={tmp_path / 'preds'}" in b["provenance"]["command"]
    for m in (a, b):
        m["model"].pop("path")
        m.pop("latency")
        m.pop("behaviour", None)
        m["provenance"].pop("command")
    assert_same_metrics(a, b)  # the same data hash and model fingerprint too
    assert a["data"]["examples"] == 12 and a["confusion_matrix"] != [[0] * 3] * 3
    assert (
        "Not measured: scored from recorded batch predictions"
        in (tmp_path / "rec" / "report.md").read_text()
    )
    # A labelled row the batch prediction did not predict: a usage error naming it.
    write_jsonl(tmp_path / "more.jsonl", rows + [dict(rows[0], id="r99")])
    proc = run_recipe(
        "evaluate.py",
        "--noprogress",
        f"--data={tmp_path / 'more.jsonl'}",
        f"--predictions={tmp_path / 'preds'}",
        f"--output_dir={tmp_path / 'x'}",
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "data row 12 (id 'r99') has no prediction in "
            f"{tmp_path / 'preds'}: the batch prediction did not read it"
        )
    )


def test_ner_batch_predictions_evaluate_as_the_model_does(tmp_path, uncased_vocab):
    """A tagger's batch prediction (sentences as their words joined by a space, rows joined to
    the CoNLL file by order) scores exactly as evaluate.py --model on the same file, though its
    tags were padded per batch to different widths."""
    tagger = tiny_tagger(uncased_vocab, seed=2)
    version_dir = tagger.export(tmp_path / "export", "tagger")
    conll = tmp_path / "test.txt"
    conll.write_text(CONLL)
    sentences = read_conll(str(conll))
    write_jsonl(tmp_path / "sentences.jsonl", [{"text": " ".join(s.words)} for s in sentences])
    config = pipeline.BatchPredictConfig(
        model=version_dir,
        input=str(tmp_path / "sentences.jsonl"),
        output_dir=str(tmp_path / "preds"),
        eval_batch_size=2,
        bucket_boundaries=BOUNDARIES,
    )
    assert pipeline.run(config, direct_options())["counts"]["predicted"] == len(sentences)
    widths = {len(r["tags"]) for r in read_jsonl_shards(tmp_path / "preds", "predictions")}
    assert len(widths) > 1, widths  # batches padded to different widths
    runs = {}
    for name, model in (  # --invariance_rows acts only with a model to run
        ("live", (f"--model={version_dir}", "--invariance_rows=0")),
        ("rec", (f"--predictions={tmp_path / 'preds'}",)),
    ):
        proc = run_recipe(
            "evaluate.py",
            "--noprogress",
            *model,
            f"--data={conll}",
            f"--output_dir={tmp_path / name}",
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[name] = json.loads((tmp_path / name / "metrics.json").read_text())
    # The reference scorer (seqeval, both sides in IOB2 as the pack scores) on the tagger's own tags.
    own = [to_iob2(t) for t in tagger.predict_word_lists([list(s.words) for s in sentences])]
    gold = [to_iob2(list(s.tags)) for s in sentences]
    assert runs["rec"]["headline"]["accuracy"] == pytest.approx(sm.accuracy_score(gold, own))
    assert runs["rec"]["headline"]["f1"] == pytest.approx(sm.f1_score(gold, own))
    for m in runs.values():
        m["model"].pop("path")
        m.pop("latency")
        m["provenance"].pop("command")
    assert_same_metrics(runs["live"], runs["rec"])


def test_row_order_join_without_a_key(export, tmp_path):
    rows = heldout_rows()
    labelled = write_jsonl(
        tmp_path / "heldout.jsonl", rows[:3] + [{"text": "", "label": "neg"}] + rows[3:]
    )
    config = pipeline.BatchPredictConfig(
        model=export["version_dir"],
        input=str(labelled),
        output_dir=str(tmp_path / "preds"),
        eval_batch_size=5,
    )
    assert pipeline.run(config, direct_options())["counts"] == {
        "rows_read": 13,
        "predicted": 12,
        "errors": 1,
    }
    recorded = recorded_predictions.read(str(tmp_path / "preds"))
    assert (
        recorded.errors[0]["input_row"] == 3
        and recorded.errors[0]["reason"] == "empty text in column 'text'"
    )
    with pytest.raises(
        DataError,
        match=r"data row 3 \(input_row '3'\) has no prediction .*: it is in errors-\*.jsonl: empty text",
    ):
        recorded_predictions.aligned_outputs(recorded, str(labelled), 13)
    write_jsonl(tmp_path / "good.jsonl", rows)  # the same rows without the empty one: row i = row i
    recorded.summary["input_files"] = [str(tmp_path / "good.jsonl")]
    recorded.records = [r for r in recorded.records if r["input_row"] != 3]
    for r in recorded.records:
        r["input_row"] -= r["input_row"] > 3
    recorded.errors = []
    outputs = recorded_predictions.aligned_outputs(recorded, str(tmp_path / "good.jsonl"), 12)
    np.testing.assert_allclose(
        outputs["probabilities"], serving_default(export, TEXTS)["probabilities"], atol=1e-5
    )
