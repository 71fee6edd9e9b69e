"""Reading a held-out file against a model, and one model evaluated end to end in process."""

import os

import numpy as np
import pytest

from keras_bert.evaluation import evidence_pack as ep
from keras_bert.evaluation import report_writer
from keras_bert.evaluation.kinds import classification
from keras_bert.evaluation.predictors import TaskPredictor
from tests.evaluation.tiny_task import heldout_rows, tiny_classifier, write_jsonl


@pytest.fixture(scope="module")
def predictor(uncased_vocab):
    return TaskPredictor(tiny_classifier(uncased_vocab, seed=1), name="tiny")


def test_token_counts_and_truncation(uncased_vocab, predictor):
    lengths, truncated = ep.token_counts(
        predictor.info.vocabulary, True, 8, ["hello world", "a b c d e f g"], ["x", "y"]
    )
    assert lengths.tolist() == [2 + 2 + 1 + 1, 7 + 2 + 1 + 1]  # [CLS] a [SEP] b [SEP]
    assert truncated.tolist() == [False, True]


def test_data_errors_name_the_problem(tmp_path, predictor):
    info = predictor.info
    with pytest.raises(
        ep.DataError,
        match=r"missing key\(s\) \['sentence'\]; keys present: "
        r"\['label', 'source', 'text'\]",
    ):
        classification.read_eval_data(
            write_jsonl(tmp_path / "a.jsonl", heldout_rows()), info, "sentence"
        )
    (tmp_path / "empty.csv").write_text("text,label\n")
    with pytest.raises(ep.DataError, match="empty file"):
        classification.read_eval_data(tmp_path / "empty.csv", info)
    rows = heldout_rows()
    rows[3]["label"] = "positive"
    with pytest.raises(
        ep.DataError,
        match=r"a.jsonl: data row 3 \(0-based\): label 'positive' "
        r"is neither a label name nor an id; ",
    ):
        classification.read_eval_data(write_jsonl(tmp_path / "a.jsonl", rows), info)
    with pytest.raises(ep.DataError, match="takes one text"):
        classification.read_eval_data(
            write_jsonl(tmp_path / "a.jsonl", heldout_rows()), info, "text", "source"
        )


def test_evaluate_matches_the_task_and_sklearn(tmp_path, predictor):
    from sklearn.metrics import confusion_matrix, f1_score

    path = write_jsonl(tmp_path / "heldout.jsonl", heldout_rows())
    data = classification.read_eval_data(path, predictor.info, slice_column="source")
    result = ep.evaluate(predictor, data, batch_size=5, machine_cost_per_hour=2.0, progress=False)
    expected = predictor.task.predict([r["text"] for r in heldout_rows()], batch_size=4)
    pred = expected.argmax(1)
    gold = np.arange(len(pred)) % 3
    np.testing.assert_array_equal(result.pop("predicted"), pred)
    assert result["headline"]["accuracy"] == pytest.approx(np.mean(pred == gold))
    assert result["headline"]["macro_f1"] == pytest.approx(
        f1_score(gold, pred, average="macro", zero_division=0)
    )
    assert result["confusion_matrix"] == confusion_matrix(gold, pred, labels=[0, 1, 2]).tolist()
    errors = [i for i in range(len(pred)) if pred[i] != gold[i]]
    assert sorted(f["guid"] for f in result["failures"]) == sorted(
        f"heldout.jsonl-{i + 1}" for i in errors
    )
    assert sorted(f["row"] for f in result["failures"]) == errors  # 0-based data rows
    confidences = [f["confidence"] for f in result["failures"]]
    assert confidences == sorted(confidences, reverse=True)
    np.testing.assert_allclose(sorted(confidences), sorted(expected.max(1)[errors]), rtol=1e-5)
    web = next(s for s in result["slices"] if s["value"] == "web")
    assert web["error_rate"] == pytest.approx(
        np.mean([pred[i] != gold[i] for i in range(1, 12, 2)])
    )
    lat = result["latency"]
    assert lat["num_batches"] == 3 and lat["examples"] == 12 and lat["batch_size"] == 5
    assert lat["cost_per_1000"] == pytest.approx(2.0 / 3600 * 1000 / lat["throughput_per_s"])
    assert result["data"]["truncated"] == 1  # the one text longer than 16 tokens
    title, blocks = __import__(
        "keras_bert.evaluation.report_sections", fromlist=["x"]
    ).evaluation_report(result)
    paths = report_writer.write_report(tmp_path / "out", title, result, blocks)
    assert {os.path.basename(p) for p in paths.values()} >= {
        "metrics.json",
        "report.md",
        "report.html",
        "confusion_matrix.png",
        "reliability.png",
    }


def test_regression_evidence_by_hand():
    from keras_bert.data.glue import InputExample
    from keras_bert.evaluation import report_sections
    from keras_bert.evaluation.predictors import ModelInfo

    gold = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    scores = np.array([0.5, 1.0, 2.0, 3.0, 4.0, 2.0])  # errors 0.5 and 3.0
    examples = [InputExample(f"f-{i}", f"t{i}", None, str(g)) for i, g in enumerate(gold)]
    data = ep.EvalData(
        "f",
        examples,
        gold,
        None,
        ["a", "a", "a", "b", "b", "b"],
        "src",
        np.array([4, 4, 4, 4, 4, 40]),
        np.array([False] * 5 + [True]),
    )
    info = ModelInfo("reg", "regression", [], False, [], True, 16)
    r = classification.evaluate_regression(data, {"scores": scores}, info)
    assert r["headline"]["mse"] == pytest.approx((0.25 + 9.0) / 6)
    assert r["headline"]["mae"] == pytest.approx(3.5 / 6)
    assert [(f["guid"], f["abs_error"]) for f in r["failures"][:2]] == [("f-5", 3.0), ("f-0", 0.5)]
    rows = {(s["family"], s["value"]): s for s in r["slices"]}
    assert rows[("column src", "b")]["error_rate"] == pytest.approx(1.0)
    assert rows[("truncated", "yes")]["error_rate"] == pytest.approx(3.0)
    r.pop("predicted")
    r |= {
        "model": {
            "name": "reg",
            "task_type": "regression",
            "path": "p",
            "label_names": [],
            "max_seq_length": 16,
        },
        "data": {"file": "f", "examples": 6, "truncated": 1, "slice_column": "src"},
        "latency": {
            "path": "p",
            "batch_size": 2,
            "num_batches": 3,
            "p50_ms": 1.0,
            "p95_ms": 2.0,
            "p99_ms": 2.0,
            "throughput_per_s": 10.0,
            "cost_per_1000": None,
            "machine_cost_per_hour": None,
        },
    }
    title, blocks = report_sections.evaluation_report(r)
    page = report_writer.to_html(title, blocks)
    assert (
        'data-key="headline.mse">1.5417<' in page
        and 'data-key="failures.0.abs_error">3.0000<' in page
    )
    assert "Per-class" not in page and "Calibration" not in page
