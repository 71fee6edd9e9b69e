"""Reading a held-out file against a model, and one model evaluated end to end in process."""
import numpy as np
import pytest

from keras_bert.evaluation import evidence_pack as ep
from keras_bert.evaluation import report_writer
from keras_bert.evaluation.predictors import TaskPredictor
from tests.evaluation.tiny_task import LABELS, heldout_rows, tiny_classifier, write_jsonl


@pytest.fixture(scope="module")
def predictor(uncased_vocab):
    return TaskPredictor(tiny_classifier(uncased_vocab, seed=1), name="tiny")


def test_labels_by_name_or_by_id():
    assert ep.map_labels(["pos", "neg", "neutral"], LABELS, "f").tolist() == [2, 0, 1]
    assert ep.map_labels(["2", "0"], LABELS, "f").tolist() == [2, 0]
    with pytest.raises(ep.DataError, match=r"f: label 'great' \(row 1\) is not one of the "
                                           r"model's labels \['neg', 'neutral', 'pos'\]$"):
        ep.map_labels(["pos", "great"], LABELS, "f")  # names used: ids are not accepted
    with pytest.raises(ep.DataError, match="label '3' .* nor an id 0..2"):
        ep.map_labels(["0", "3"], LABELS, "f")


def test_token_counts_and_truncation(uncased_vocab, predictor):
    lengths, truncated = ep.token_counts(predictor.info.vocabulary, True, 8,
                                         ["hello world", "a b c d e f g"], ["x", "y"])
    assert lengths.tolist() == [2 + 2 + 1 + 1, 7 + 2 + 1 + 1]  # [CLS] a [SEP] b [SEP]
    assert truncated.tolist() == [False, True]


def test_data_errors_name_the_problem(tmp_path, predictor):
    info = predictor.info
    with pytest.raises(ep.DataError, match=r"missing key\(s\) \['sentence'\]; keys present: "
                                           r"\['label', 'source', 'text'\]"):
        ep.read_eval_data(write_jsonl(tmp_path / "a.jsonl", heldout_rows()), info, "sentence")
    (tmp_path / "empty.csv").write_text("text,label\n")
    with pytest.raises(ep.DataError, match="empty file"):
        ep.read_eval_data(tmp_path / "empty.csv", info)
    rows = heldout_rows()
    rows[3]["label"] = "positive"
    with pytest.raises(ep.DataError, match="label 'positive'.*a.jsonl-4"):
        ep.read_eval_data(write_jsonl(tmp_path / "a.jsonl", rows), info)
    with pytest.raises(ep.DataError, match="takes one text"):
        ep.read_eval_data(write_jsonl(tmp_path / "a.jsonl", heldout_rows()), info, "text", "source")


def test_evaluate_matches_the_task_and_sklearn(tmp_path, predictor):
    from sklearn.metrics import confusion_matrix, f1_score

    path = write_jsonl(tmp_path / "heldout.jsonl", heldout_rows())
    data = ep.read_eval_data(path, predictor.info, slice_column="source")
    result = ep.evaluate(predictor, data, batch_size=5, machine_cost_per_hour=2.0, progress=False)
    expected = predictor.task.predict([r["text"] for r in heldout_rows()], batch_size=4)
    pred = expected.argmax(1)
    gold = np.arange(len(pred)) % 3
    np.testing.assert_array_equal(result.pop("predicted"), pred)
    assert result["headline"]["accuracy"] == pytest.approx(np.mean(pred == gold))
    assert result["headline"]["macro_f1"] == pytest.approx(
        f1_score(gold, pred, average="macro", labels=[0, 1, 2], zero_division=0))
    assert result["confusion_matrix"] == confusion_matrix(gold, pred, labels=[0, 1, 2]).tolist()
    errors = [i for i in range(len(pred)) if pred[i] != gold[i]]
    assert sorted(f["guid"] for f in result["failures"]) == sorted(f"heldout.jsonl-{i + 1}" for i in errors)
    confidences = [f["confidence"] for f in result["failures"]]
    assert confidences == sorted(confidences, reverse=True)
    np.testing.assert_allclose(sorted(confidences), sorted(expected.max(1)[errors]), rtol=1e-5)
    web = next(s for s in result["slices"] if s["value"] == "web")
    assert web["error_rate"] == pytest.approx(np.mean([pred[i] != gold[i] for i in range(1, 12, 2)]))
    lat = result["latency"]
    assert lat["num_batches"] == 3 and lat["examples"] == 12 and lat["batch_size"] == 5
    assert lat["cost_per_1000"] == pytest.approx(2.0 / 3600 * 1000 / lat["throughput_per_s"])
    assert result["data"]["truncated"] == 1  # the one text longer than 16 tokens
    title, blocks = __import__("keras_bert.evaluation.report_sections",
                               fromlist=["x"]).evaluation_report(result)
    paths = report_writer.write_report(tmp_path / "out", title, result, blocks)
    assert {p.name for p in paths.values()} >= {"metrics.json", "report.md", "report.html",
                                                "confusion_matrix.png", "reliability.png"}
