"""Classification and regression quality on a labelled set: the numbers of the evidence pack.

Per-class precision, recall, F1 and support, the weighted averages and the confusion matrix
come from scikit-learn (`precision_recall_fscore_support`, `confusion_matrix`); the macro average
is `metrics.macro_average` (scikit-learn's rule: over the classes in the gold labels or the
predictions). Calibration is the
expected calibration error of Guo et al. 2017 ("On Calibration of Modern Neural Networks", eq. 3):
confidences (the top softmax probability) in `num_bins` equal-width bins over [0, 1],
ECE = sum_b |B_b| / N * |accuracy(B_b) - mean confidence(B_b)|; the bins are also the
reliability diagram (ibid. figure 1).
"""

from __future__ import annotations

import numpy as np
from sklearn import metrics as skm

from keras_bert.metrics import classification as glue_metrics


def per_class_report(gold, predicted, label_names) -> dict:
    """Precision, recall, F1 and support of each class, and their macro / weighted averages.

    Every class of the model is listed, one absent from both the gold labels and the predictions
    too (support 0, scores 0); the macro average is over the classes that occur in either
    (`metrics.macro_average`, scikit-learn's `average="macro"` without `labels=`), the weighted
    one weighs each class by its support.

    Args:
        gold, predicted: int arrays [N] of label ids in [0, C).
        label_names: list of C str, in id order.

    Returns:
        {"per_class": {name: {"precision", "recall", "f1", "support"}}, "macro_avg": {...},
        "weighted_avg": {...}}; support is an int count of gold examples, the rest floats in
        [0, 1] (0 where undefined: a class never predicted has precision 0).
    """
    labels = list(range(len(label_names)))
    p, r, f, s, pred_counts = glue_metrics.class_counts(gold, predicted, len(labels))
    per_class = {
        name: {
            "precision": float(p[i]),
            "recall": float(r[i]),
            "f1": float(f[i]),
            "support": int(s[i]),
        }
        for i, name in enumerate(label_names)
    }
    averages = {
        "macro_avg": [glue_metrics.macro_average(v, s, pred_counts) for v in (p, r, f)],
        "weighted_avg": skm.precision_recall_fscore_support(
            gold, predicted, labels=labels, average="weighted", zero_division=0.0
        )[:3],
    }
    return {"per_class": per_class} | {
        key: {
            "precision": float(ap),
            "recall": float(ar),
            "f1": float(af),
            "support": int(len(gold)),
        }
        for key, (ap, ar, af) in averages.items()
    }


def confusion(gold, predicted, num_classes: int) -> list[list[int]]:
    """Confusion matrix as nested lists: row = gold id, column = predicted id, int counts."""
    return skm.confusion_matrix(gold, predicted, labels=list(range(num_classes))).tolist()


def calibration(confidence, correct, num_bins: int = 10) -> dict:
    """Expected calibration error and the reliability-diagram bins.

    Args:
        confidence: float [N] in [0, 1], the probability of the predicted class.
        correct: bool [N], prediction == gold.
        num_bins: int >= 1, equal-width bins; bin b holds (b/num_bins, (b+1)/num_bins]
            (the first also holds 0).

    Returns:
        {"ece": float, "num_bins": int, "bins": [{"lower", "upper", "count", "accuracy",
        "confidence"}]} (accuracy / confidence None for an empty bin).
    """
    confidence = np.asarray(confidence, np.float64)
    correct = np.asarray(correct, bool)
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, num_bins - 1)
    bins, ece = [], 0.0
    for b in range(num_bins):
        member = index == b
        count = int(member.sum())
        acc = float(correct[member].mean()) if count else None
        conf = float(confidence[member].mean()) if count else None
        if count:
            ece += count / len(confidence) * abs(acc - conf)
        bins.append(
            {
                "lower": float(edges[b]),
                "upper": float(edges[b + 1]),
                "count": count,
                "accuracy": acc,
                "confidence": conf,
            }
        )
    return {"ece": float(ece), "num_bins": int(num_bins), "bins": bins}


def classification_metrics(gold, probabilities, label_names, num_bins: int = 10) -> dict:
    """Everything the report shows for a classifier.

    Args:
        gold: int [N] label ids.
        probabilities: float [N, C] predicted class probabilities.
        label_names: list of C str.

    Returns:
        dict: "headline" (accuracy, macro_f1, weighted_f1, ece), per-class report fields,
        "confusion_matrix", "calibration".

    Raises:
        ValueError: shapes that do not agree, or no examples.
    """
    gold = np.asarray(gold, np.int64)
    probabilities = np.asarray(probabilities, np.float64)
    if (
        probabilities.ndim != 2
        or probabilities.shape != (len(gold), len(label_names))
        or not len(gold)
    ):
        raise ValueError(
            f"probabilities {probabilities.shape} do not fit {len(gold)} labels and "
            f"{len(label_names)} classes"
        )
    predicted = probabilities.argmax(axis=1)
    report = per_class_report(gold, predicted, label_names)
    cal = calibration(probabilities.max(axis=1), predicted == gold, num_bins)
    headline = {
        "accuracy": glue_metrics.accuracy(gold, predicted),
        "macro_f1": report["macro_avg"]["f1"],
        "weighted_f1": report["weighted_avg"]["f1"],
        "ece": cal["ece"],
    }
    return {
        "headline": headline,
        **report,
        "confusion_matrix": confusion(gold, predicted, len(label_names)),
        "calibration": cal,
    }


def regression_metrics(gold, scores) -> dict:
    """Pearson, Spearman, mean squared and mean absolute error of predicted scores [N]."""
    gold = np.asarray(gold, np.float64)
    scores = np.asarray(scores, np.float64)
    headline = glue_metrics.compute_metrics("text_regression", gold, scores)
    headline["mae"] = float(skm.mean_absolute_error(gold, scores))
    return {"headline": headline}
