"""GLUE metrics as the benchmark defines them (Wang et al. 2018, Table 1), from scikit-learn/scipy.

=====================  =============================================  ===================
task                   metrics                                        primary (best ckpt)
=====================  =============================================  ===================
cola                   matthews_corrcoef                              matthews_corrcoef
sst2 qnli rte wnli     accuracy                                       accuracy
mrpc qqp               accuracy, f1 (positive class = label "1")      f1
stsb                   pearson, spearman                              pearson
mnli                   accuracy per dev split (matched, mismatched)   accuracy
own data               accuracy, macro_f1 (classification);           accuracy / pearson
                       pearson, spearman, mse (regression)
=====================  =============================================  ===================
"""

from __future__ import annotations

import numpy as np
import scipy.stats
from sklearn import metrics as skm

_BY_TASK = {
    "cola": ("matthews_corrcoef",),
    "sst2": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
    "mnli": ("accuracy",),
    "mrpc": ("accuracy", "f1"),
    "qqp": ("accuracy", "f1"),
    "stsb": ("pearson", "spearman"),
    "text_classification": ("accuracy", "macro_f1"),
    "text_pair_classification": ("accuracy", "macro_f1"),
    "text_regression": ("pearson", "spearman", "mse"),
}
_PRIMARY = {
    "cola": "matthews_corrcoef",
    "mrpc": "f1",
    "qqp": "f1",
    "stsb": "pearson",
    "text_regression": "pearson",
}


def _canonical(task_name: str) -> str:
    key = task_name.lower().replace("-", "")
    if key not in _BY_TASK:
        raise ValueError(f"no metrics defined for task {task_name!r}; known: {sorted(_BY_TASK)}")
    return key


def primary_metric(task_name: str) -> str:
    """Name of the metric that selects the best checkpoint (higher is better for all of them)."""
    key = _canonical(task_name)
    return _PRIMARY.get(key, "accuracy")


def present_classes(gold_counts, predicted_counts) -> np.ndarray:
    """The classes a macro average counts: bool [..., C], True where a class occurs among the gold
    labels or the predictions (counts [..., C] each).

    scikit-learn's rule (`f1_score(average="macro")` without `labels=`): a class in neither has
    no defined precision, recall or F1, so it is listed per class (support 0) but averaged nowhere.
    """
    return (np.asarray(gold_counts) + np.asarray(predicted_counts)) > 0


def macro_average(values, gold_counts, predicted_counts) -> np.ndarray:
    """The mean of per-class `values` [..., C] over the `present_classes` (0 where none is).

    The one macro average of the project: the fine-tuning metric (`compute_metrics`), the
    evidence pack's headline and macro row (`classification_report.per_class_report`) and
    `--compare`'s bootstrap (`comparison.classification_bootstrap`) all take it.
    """
    present = present_classes(gold_counts, predicted_counts)
    count = present.sum(-1)
    total = np.where(present, np.asarray(values, np.float64), 0.0).sum(-1)
    return np.divide(total, count, out=np.zeros(np.shape(total)), where=count > 0)


def class_counts(labels, predictions, num_classes: int):
    """(precision, recall, F1, gold support, predicted count), each float / int [C], of label ids
    [N] in [0, num_classes); 0 where undefined (scikit-learn's `zero_division=0`)."""
    p, r, f, support = skm.precision_recall_fscore_support(
        labels, predictions, labels=list(range(num_classes)), zero_division=0.0
    )
    predicted = np.bincount(np.asarray(predictions, np.int64), minlength=num_classes)
    return p, r, f, support, predicted


def macro_f1(labels, predictions) -> float:
    """Macro F1 of label ids [N] over the classes that occur in either (`macro_average`)."""
    labels, predictions = np.asarray(labels, np.int64), np.asarray(predictions, np.int64)
    num_classes = int(max(labels.max(), predictions.max())) + 1
    _, _, f, support, predicted = class_counts(labels, predictions, num_classes)
    return float(macro_average(f, support, predicted))


def accuracy(labels, predictions) -> float:
    """Fraction of equal entries; labels, predictions: int arrays [N]."""
    return float(skm.accuracy_score(labels, predictions))


def f1(labels, predictions, positive_label=1) -> float:
    """Binary F1 of the positive class (GLUE MRPC/QQP: label 1 = paraphrase / duplicate)."""
    return float(
        skm.f1_score(
            labels, predictions, pos_label=positive_label, average="binary", zero_division=0.0
        )
    )


def matthews_corrcoef(labels, predictions) -> float:
    """Matthews correlation coefficient (CoLA), in [-1, 1]; 0 when a row/column sum is 0."""
    return float(skm.matthews_corrcoef(labels, predictions))


def pearson(labels, scores) -> float:
    """Pearson r between gold and predicted scores (float arrays [N])."""
    return float(scipy.stats.pearsonr(np.asarray(labels, float), np.asarray(scores, float))[0])


def spearman(labels, scores) -> float:
    """Spearman rank correlation (ties get average ranks)."""
    return float(scipy.stats.spearmanr(np.asarray(labels, float), np.asarray(scores, float))[0])


def compute_metrics(task_name: str, labels, predictions, positive_label=1) -> dict[str, float]:
    """All metrics of a task.

    Args:
        task_name: a GLUE task or one of the own-data task types.
        labels: gold label ids int [N] (classification) or scores float [N] (regression).
        predictions: predicted label ids int [N] (argmax of logits) or scores float [N].
        positive_label: the id of the positive class for F1 (MRPC/QQP: the id of label "1").

    Returns:
        dict metric name -> float.

    Raises:
        ValueError: unknown task, or labels and predictions of different lengths or empty.
    """
    key = _canonical(task_name)
    labels = np.asarray(labels)
    predictions = np.asarray(predictions)
    if labels.shape != predictions.shape or labels.ndim != 1 or labels.size == 0:
        raise ValueError(
            f"labels {labels.shape} and predictions {predictions.shape} must be "
            "non-empty 1-D arrays of the same length"
        )
    out = {}
    for name in _BY_TASK[key]:
        if name == "f1":
            out[name] = f1(labels, predictions, positive_label)
        elif name == "macro_f1":
            out[name] = macro_f1(labels, predictions)
        elif name == "mse":
            out[name] = float(skm.mean_squared_error(labels, predictions))
        else:
            out[name] = globals()[name](labels, predictions)
    return out
