"""GLUE metrics against values computed by hand."""

import math

import pytest

from keras_bert.metrics import classification as metrics

LABELS = [1, 1, 1, 0, 0, 0, 1, 0]
PREDS = [1, 0, 1, 0, 1, 0, 1, 1]  # TP=3 FN=1 FP=2 TN=2


def test_classification_metrics_by_hand():
    assert metrics.accuracy(LABELS, PREDS) == 5 / 8
    assert metrics.f1(LABELS, PREDS) == pytest.approx(2 / 3)  # P=3/5, R=3/4
    assert metrics.matthews_corrcoef(LABELS, PREDS) == pytest.approx(4 / math.sqrt(240))
    # F1 of the other class: TP'=2 FP'=1 FN'=2 -> P=2/3 R=1/2 -> 4/7.
    assert metrics.f1(LABELS, PREDS, positive_label=0) == pytest.approx(4 / 7)


def test_correlations_by_hand():
    assert metrics.pearson([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(11 / math.sqrt(130))
    assert metrics.spearman([1, 2, 3, 4], [2, 5, 4, 9]) == pytest.approx(0.8)  # 1 - 6*2/(4*15)


def test_compute_metrics_per_task():
    assert metrics.compute_metrics("CoLA", LABELS, PREDS) == {
        "matthews_corrcoef": pytest.approx(4 / math.sqrt(240))
    }
    assert metrics.compute_metrics("mrpc", LABELS, PREDS) == {
        "accuracy": 0.625,
        "f1": pytest.approx(2 / 3),
    }
    assert metrics.compute_metrics("qqp", LABELS, PREDS, positive_label=0)["f1"] == pytest.approx(
        4 / 7
    )
    assert metrics.compute_metrics("sst2", LABELS, PREDS) == {"accuracy": 0.625}
    assert metrics.compute_metrics("rte", [0, 1, 1], [0, 1, 0]) == {
        "accuracy": pytest.approx(2 / 3)
    }
    out = metrics.compute_metrics("sts-b", [1, 2, 3, 4], [2, 5, 4, 9])
    assert out == {"pearson": pytest.approx(0.8770580193), "spearman": pytest.approx(0.8)}
    # pearson by hand for [2,5,4,9]: dy=[-3,0,-1,4], sum dxdy=4.5+0-0.5+6=10, sum dy2=26 -> 10/sqrt(130)
    assert out["pearson"] == pytest.approx(10 / math.sqrt(130))
    assert metrics.compute_metrics("text_regression", [0, 2], [1, 2])["mse"] == 0.5
    assert metrics.compute_metrics("text_classification", [0, 1, 2, 2], [0, 1, 2, 1]) == {
        "accuracy": 0.75,
        "macro_f1": pytest.approx((1 + 2 / 3 + 2 / 3) / 3),
    }


def test_primary_metric_and_errors():
    assert [metrics.primary_metric(t) for t in ("cola", "mrpc", "qqp", "stsb", "sst2", "mnli")] == [
        "matthews_corrcoef",
        "f1",
        "f1",
        "pearson",
        "accuracy",
        "accuracy",
    ]
    with pytest.raises(ValueError, match="no metrics defined for task 'squad'"):
        metrics.compute_metrics("squad", [1], [1])
    with pytest.raises(ValueError, match="same length"):
        metrics.compute_metrics("sst2", [1, 0], [1])
    with pytest.raises(ValueError, match="non-empty"):
        metrics.compute_metrics("sst2", [], [])
