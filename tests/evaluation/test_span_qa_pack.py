"""The span QA evidence pack: a SQuAD file read as training reads it, the official evaluators'
EM / F1 (v1.1, v2.0 with HasAns / NoAns) on constructed answers, buckets and failures (the
recipe test scores a reader's own answers)."""

import dataclasses
import json

import numpy as np
import pytest
from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0

from keras_bert.evaluation import comparison, report_sections, report_writer
from keras_bert.evaluation import evidence_pack as ep
from keras_bert.evaluation.kinds import span_question_answering as span_qa_pack
from keras_bert.evaluation.model_record import check_comparable, model_record
from keras_bert.evaluation.predictors import ModelInfo
from tests.evaluation.tiny_task import squad_json


def test_buckets():
    assert [span_qa_pack.bucket(n, span_qa_pack.ANSWER_BUCKETS) for n in (1, 2, 3, 4, 5, 11)] == [
        "1",
        "2",
        "3",
        "4-5",
        "4-5",
        ">10",
    ]
    assert span_qa_pack.question_word("In which year did it end?") == "which"
    assert span_qa_pack.question_word("Name the river.") == "other"


def official_by_hand(version_2, raw, predictions) -> dict:
    """exact match, F1 (percent) and the v2.0 splits from the official evaluators themselves."""
    if not version_2:
        v1 = squad_evaluate_v1_1.evaluate(raw["data"], predictions)
        return {"exact_match": 100 * v1["exact_match"], "f1": 100 * v1["final_f1"]}
    v2 = squad_evaluate_v2_0.evaluate(raw["data"], predictions)
    return {"exact_match": v2["exact"], "f1": v2["f1"]} | {
        k: v2[k] for k in ("HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_total")
    }


# Answers to the 8 questions of squad_json(version_2=True), in file order: exact, exact up to
# the official normalisation, wrong, partial, "" for an unanswerable one (right), exact, partial,
# an answer to an unanswerable one (wrong).
ANSWERS = ["Ada Lovelace", "1843.", "Paris", "the analytical engine", "", "Paris", "Seine", "fame"]


def test_pack_equals_the_official_evaluators(tmp_path, uncased_vocab):
    raw = squad_json(version_2=True)
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(raw))
    vocabulary = uncased_vocab.read_text(encoding="utf-8").split("\n")[:-1]
    settings = {"version_2_with_negative": True, "null_score_diff_threshold": 1.5}
    info = ModelInfo("reader", "span_question_answering", [], True, vocabulary, True, 32, settings)
    data = span_qa_pack.read_squad_data(str(path), info)
    qas = [(qa, p["context"]) for a in raw["data"] for p in a["paragraphs"] for qa in p["qas"]]
    assert [e.guid for e in data.examples] == [qa["id"] for qa, _ in qas]
    assert data.inputs == {
        "question": [q["question"] for q, _ in qas],
        "context": [c for _, c in qas],
    }
    assert data.gold_names.count("unanswerable") == 2
    outputs = {"answer_text": np.asarray([a.encode() for a in ANSWERS], object)}
    outputs["score"] = np.arange(len(ANSWERS), dtype=np.float32)
    result = ep.evaluate_outputs(info, "constructed", data, outputs)
    predicted = result.pop("predicted")
    assert predicted["shown"] == ANSWERS
    predictions = {qa["id"]: text for (qa, _), text in zip(qas, ANSWERS)}
    expected = official_by_hand(True, raw, predictions)
    assert result["headline"] == pytest.approx({k: expected[k] for k in ("exact_match", "f1")})
    assert result["headline"]["exact_match"] == pytest.approx(100 * 4 / 8)
    for key in ("HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_total"):
        assert result["squad"][key] == pytest.approx(expected[key])
    assert result["squad"]["null_score_diff_threshold"] == 1.5
    sums = np.append(predicted["counts"].sum(0), len(qas))
    assert span_qa_pack.squad_metrics(sums)["f1"] == pytest.approx(result["headline"]["f1"])
    buckets = {(b["family"], b["value"]): b for b in result["by_bucket"]}
    words = {v: b["questions"] for (f, v), b in buckets.items() if f == "question word"}
    assert words == {"what": 1, "which": 2, "who": 1, "when": 1, "where": 1, "how": 1, "why": 1}
    assert buckets[("question word", "which")]["exact_match"] == 0.0
    assert buckets[("answer length (words)", "no answer")]["exact_match"] == 50.0
    # lowest F1 first; among equal F1 the highest score (the most confident) first
    assert [f["guid"] for f in result["failures"]] == ["Paris-2", "Ada-2", "Ada-3", "Paris-1"]
    assert "label_issues" not in result and "weak_segments" in result
    result["latency"] = {"measured": False, "reason": "constructed answers"}
    title, blocks = report_sections.evaluation_report(result)
    report_writer.write_report(tmp_path / "report", title, result, blocks)
    md = (tmp_path / "report" / "report.md").read_text()
    assert "official evaluator" in md and "By question word" in md and "Threshold in use" in md

    # v1.1: the answers to the answerable questions, the file read as v1.1.
    raw1 = squad_json(version_2=False)
    path.write_text(json.dumps(raw1))
    info = dataclasses.replace(info, settings={"version_2_with_negative": False})
    data1 = span_qa_pack.read_squad_data(str(path), info)
    keep = [i for i, (qa, _) in enumerate(qas) if not qa["is_impossible"]]
    outputs = {"answer_text": np.asarray([ANSWERS[i] for i in keep], object)}
    outputs["score"] = np.zeros(len(keep))
    result1 = ep.evaluate_outputs(info, "constructed", data1, outputs)
    expected = official_by_hand(False, raw1, {qas[i][0]["id"]: ANSWERS[i] for i in keep})
    assert result1["headline"] == pytest.approx(expected)
    assert result1["squad"]["version"] == "1.1" and "HasAns_exact" not in result1["squad"]
    with pytest.raises(ep.DataError, match="unanswerable"):
        path.write_text(json.dumps(raw))
        span_qa_pack.read_squad_data(str(path), info)


def test_count_bootstrap_of_exact_match():
    rng = np.random.default_rng(1)
    a = np.stack([rng.integers(0, 2, 50) * 100.0, rng.uniform(0, 100, 50)], 1)
    b = np.stack([rng.integers(0, 2, 50) * 100.0, rng.uniform(0, 100, 50)], 1)
    out = comparison.count_bootstrap(a, b, span_qa_pack.squad_metrics, samples=40, seed=2)
    idx = np.random.default_rng(2).integers(0, 50, size=(40, 50))
    deltas = [b[i, 0].mean() - a[i, 0].mean() for i in idx]
    assert out["exact_match"]["delta"] == pytest.approx(b[:, 0].mean() - a[:, 0].mean())
    assert out["exact_match"]["ci_low"] == pytest.approx(np.percentile(deltas, 2.5))


def test_v1_and_v2_readers_cannot_be_compared():
    def record(version_2):
        settings = {"version_2_with_negative": version_2}
        info = ModelInfo("r", "span_question_answering", [], True, [], True, 32, settings)
        return model_record(info, "p")

    check_comparable(record(True), record(True))
    with pytest.raises(ValueError, match="differ in version_2_with_negative"):
        check_comparable(record(False), record(True))
