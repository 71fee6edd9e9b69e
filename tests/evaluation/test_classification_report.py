"""Per-class metrics, confusion matrix and calibration against a hand-computed 3-class case."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

from keras_bert.evaluation import classification_report as cr
from keras_bert.evaluation import comparison, report_writer
from keras_bert.metrics import classification as glue_metrics
from keras_bert.evaluation.kinds import classification

NAMES = ["a", "b", "c"]
GOLD = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
PRED = np.array([0, 0, 1, 2, 1, 1, 0, 2, 2, 2])


def probabilities(gold=GOLD, pred=PRED):
    """Errors get top probability 0.55, correct predictions 0.95."""
    out = np.zeros((len(pred), 3))
    for i, p in enumerate(pred):
        top = 0.95 if p == gold[i] else 0.55
        out[i] = (1 - top) / 2
        out[i, p] = top
    return out


def test_hand_computed_three_class_case():
    m = cr.classification_metrics(GOLD, probabilities(), NAMES)
    assert m["confusion_matrix"] == [[2, 1, 1], [1, 2, 0], [0, 0, 3]]
    assert m["headline"]["accuracy"] == pytest.approx(0.7)
    a, b, c = (m["per_class"][n] for n in NAMES)
    assert (a["precision"], a["recall"], a["f1"], a["support"]) == pytest.approx(
        (2 / 3, 0.5, 4 / 7, 4)
    )
    assert (b["precision"], b["recall"], b["f1"], b["support"]) == pytest.approx(
        (2 / 3, 2 / 3, 2 / 3, 3)
    )
    assert (c["precision"], c["recall"], c["f1"], c["support"]) == pytest.approx(
        (0.75, 1.0, 6 / 7, 3)
    )
    assert m["headline"]["macro_f1"] == pytest.approx(44 / 63)
    assert m["headline"]["weighted_f1"] == pytest.approx(48 / 70)
    assert m["macro_avg"]["precision"] == pytest.approx((2 / 3 + 2 / 3 + 0.75) / 3)
    assert m["weighted_avg"]["recall"] == pytest.approx(0.7)  # weighted recall = accuracy


def test_expected_calibration_error_by_hand():
    # 3 errors at confidence 0.55 (bin (0.5, 0.6], accuracy 0), 7 correct at 0.95 (bin (0.9, 1]):
    # ECE = 0.3 * 0.55 + 0.7 * 0.05 = 0.2
    cal = cr.calibration(probabilities().max(1), GOLD == PRED, num_bins=10)
    assert cal["ece"] == pytest.approx(0.2)
    counts = [b["count"] for b in cal["bins"]]
    assert counts == [0, 0, 0, 0, 0, 3, 0, 0, 0, 7]
    assert cal["bins"][5]["accuracy"] == 0.0 and cal["bins"][9]["confidence"] == pytest.approx(0.95)
    assert cal["bins"][0]["accuracy"] is None


def test_calibration_edges_and_perfect_case():
    cal = cr.calibration([0.0, 1.0, 0.5], [False, True, True], num_bins=2)
    assert [b["count"] for b in cal["bins"]] == [2, 1]  # 0 and 0.5 in [0, 0.5], 1.0 in (0.5, 1]
    assert cr.calibration([1.0, 1.0], [True, True])["ece"] == 0.0


# Class c occurs neither in the gold labels nor in the predictions: a and b have F1 2/3 each, so
# scikit-learn's macro F1 (labels present in either) is 2/3; counting c as F1 0 would give 4/9.
ABSENT_GOLD = np.array([0, 0, 0, 1, 1, 1])
ABSENT_PRED = np.array([0, 0, 1, 1, 1, 0])


def test_a_class_absent_from_gold_and_predictions_is_listed_but_not_averaged():
    macro = skm.f1_score(ABSENT_GOLD, ABSENT_PRED, average="macro")
    assert macro == pytest.approx(2 / 3)
    m = cr.classification_metrics(ABSENT_GOLD, probabilities(ABSENT_GOLD, ABSENT_PRED), NAMES)
    assert m["headline"]["macro_f1"] == macro  # the headline
    assert (m["macro_avg"]["precision"], m["macro_avg"]["recall"], m["macro_avg"]["f1"]) == (
        skm.precision_recall_fscore_support(ABSENT_GOLD, ABSENT_PRED, average="macro")[:3]
    )
    assert m["per_class"]["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    # The per-class table of the report: c listed with support 0, the macro row.
    shown = m | {"model": {"name": "m", "label_names": NAMES}}
    markdown = report_writer.to_markdown("T", classification.per_class_blocks(shown))
    assert "| c | 0.0000 | 0.0000 | 0.0000 | 0 |" in markdown
    assert "| macro avg | 0.6667 | 0.6667 | 0.6667 | 6 |" in markdown
    assert f"Legend: {classification.MACRO_LEGEND}" in markdown
    # --compare's bootstrap point estimate and the fine-tuning metric.
    other = np.array([0, 0, 0, 1, 1, 1])
    boot = comparison.classification_bootstrap(ABSENT_GOLD, ABSENT_PRED, other, 3, samples=40)
    assert (boot["macro_f1"]["a"], boot["macro_f1"]["b"]) == (macro, 1.0)
    fine_tuning = glue_metrics.compute_metrics("text_classification", ABSENT_GOLD, ABSENT_PRED)
    assert fine_tuning["macro_f1"] == macro


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=30))
def test_every_macro_average_is_scikit_learns(pairs):
    gold, pred = (np.array(x) for x in zip(*pairs))
    expected = skm.f1_score(gold, pred, average="macro", zero_division=0)
    report = cr.per_class_report(gold, pred, ["a", "b", "c", "d"])
    assert report["macro_avg"]["f1"] == pytest.approx(expected, abs=1e-12)
    boot = comparison.classification_bootstrap(gold, pred, pred, 4, samples=1)
    assert boot["macro_f1"]["a"] == pytest.approx(expected, abs=1e-12)
    assert glue_metrics.macro_f1(gold, pred) == pytest.approx(expected, abs=1e-12)


def test_a_class_never_predicted_has_zero_precision():
    m = cr.per_class_report(np.array([0, 1, 2]), np.array([0, 0, 0]), NAMES)
    assert m["per_class"]["b"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="do not fit"):
        cr.classification_metrics(GOLD, probabilities()[:, :2], NAMES)


def test_regression_metrics():
    m = cr.regression_metrics([0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 5.0])
    assert m["headline"]["mse"] == pytest.approx(1.0) and m["headline"]["mae"] == pytest.approx(0.5)
    assert m["headline"]["spearman"] == pytest.approx(1.0)
