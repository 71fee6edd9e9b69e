"""The multiple-choice evidence pack: a SWAG CSV read as training reads it; accuracy, slices and
failures of constructed probabilities (the recipe test scores a model's own choices)."""

import dataclasses

import numpy as np
import pytest

from keras_bert.data.swag import read_swag
from keras_bert.evaluation import comparison, report_sections, report_writer
from keras_bert.evaluation import evidence_pack as ep
from keras_bert.evaluation.kinds import multiple_choice as multiple_choice_pack
from keras_bert.evaluation.predictors import ModelInfo
from tests.evaluation.tiny_task import SWAG_CSV


# Probabilities of the 4 choices of each SWAG_CSV row (labels 0, 0, 0, 1, 0, 0): rows 1 and 3
# wrong, row 3 the more confident.
PROBABILITIES = np.array(
    [
        [0.7, 0.1, 0.1, 0.1],
        [0.2, 0.5, 0.2, 0.1],
        [0.4, 0.3, 0.2, 0.1],
        [0.1, 0.1, 0.1, 0.7],
        [0.9, 0.0, 0.05, 0.05],
        [0.3, 0.3, 0.2, 0.2],
    ]
)


def test_pack_on_swag_rows(tmp_path, uncased_vocab):
    path = tmp_path / "val.csv"
    path.write_text(SWAG_CSV)
    vocabulary = uncased_vocab.read_text(encoding="utf-8").split("\n")[:-1]
    info = ModelInfo(
        "chooser", "multiple_choice", [], False, vocabulary, True, 16, {"num_choices": 4}
    )
    data = multiple_choice_pack.read_swag_data(str(path), info, "gold-source")
    examples = read_swag(path)
    assert data.inputs == {
        "context": [e.context for e in examples],
        "endings": [e.second_segments() for e in examples],
    }
    contexts, endings = data.inputs["context"], data.inputs["endings"]
    lengths = np.stack(
        [
            ep.token_counts(vocabulary, True, 16, contexts, [c[k] for c in endings])[0]
            for k in range(4)
        ],
        1,
    )  # [N, 4]: [CLS] context [SEP] choice [SEP]
    assert data.token_lengths.tolist() == lengths.max(1).tolist()
    assert data.truncated.tolist() == (lengths > 16).any(1).tolist()
    assert 0 < data.truncated.sum() < 6
    result = ep.evaluate_outputs(info, "constructed", data, {"probabilities": PROBABILITIES})
    predicted = result.pop("predicted")
    assert predicted["correct"].tolist() == [True, False, True, False, True, True]
    assert result["headline"] == pytest.approx(
        {"accuracy": 4 / 6, "mean_gold_probability": (0.7 + 0.2 + 0.4 + 0.1 + 0.9 + 0.3) / 6}
    )
    by_source = {s["value"]: s for s in result["slices"] if s["family"] == "column gold-source"}
    assert (by_source["gold"]["errors"], by_source["gen"]["errors"]) == (0, 2)
    assert [f["guid"] for f in result["failures"]] == ["v4-4", "v2-2"]
    assert result["failures"][0]["gold"] == "1: One kicks the ball hard."
    assert "label_issues" not in result and "weak_segments" in result
    result["latency"] = {"measured": False, "reason": "constructed probabilities"}
    title, blocks = report_sections.evaluation_report(result)
    report_writer.write_report(tmp_path / "report", title, result, blocks)
    assert "By position of the right choice" in (tmp_path / "report" / "report.md").read_text()
    with pytest.raises(ep.DataError, match="missing SWAG columns"):
        (tmp_path / "bad.csv").write_text("sent1,label\nx,0\n")
        multiple_choice_pack.read_swag_data(str(tmp_path / "bad.csv"), info)
    with pytest.raises(ep.DataError, match="4 endings per row, the model takes 5"):
        multiple_choice_pack.read_swag_data(
            str(path), dataclasses.replace(info, settings={"num_choices": 5})
        )


def test_accuracy_bootstrap():
    rng = np.random.default_rng(4)
    a, b = rng.integers(0, 2, (60, 1)), rng.integers(0, 2, (60, 1))
    out = comparison.count_bootstrap(a, b, multiple_choice_pack.accuracy_of, samples=40, seed=1)
    idx = np.random.default_rng(1).integers(0, 60, size=(40, 60))
    deltas = [b[i].mean() - a[i].mean() for i in idx]
    assert out["accuracy"]["a"] == pytest.approx(a.mean())
    assert out["accuracy"]["ci_high"] == pytest.approx(np.percentile(deltas, 97.5))
