"""Suspected label errors in a held-out set, from the model's own probabilities (cleanlab).

Confident learning (Northcutt, Jiang & Chuang 2021, "Confident Learning: Estimating Uncertainty in
Dataset Labels", JAIR 70) as cleanlab 2.9 implements it: `cleanlab.filter.find_label_issues` with
its default filter (`prune_by_noise_rate`, per-class thresholds = the mean self-confidence of the
class), ranked by self-confidence (the probability the model gives the *given* label; lower = more
suspect). The method expects out-of-sample probabilities (cross-validated, so the model never saw
the row); here they are the evaluated model's probabilities on a held-out set it was not trained
on, which is out of sample for that model, but a row the model is simply wrong about looks the
same as a mislabelled row: the list is a list of rows to look at, not of errors.

Family-independent: any model with per-row class probabilities [N, C] and given labels [N].
"""

from __future__ import annotations

import warnings

import numpy as np

CAVEAT = (
    "Scored with the evaluated model's own probabilities on this held-out set (not out-of-sample "
    "cross-validated ones from models trained without each row): a row the model is wrong about "
    "looks like a mislabelled row, so each suspect needs a human look."
)


def find_label_issues(given, probabilities, label_names) -> list[dict]:
    """Rows whose given label confident learning suspects, most suspect first.

    Args:
        given: int [N] label ids in [0, C).
        probabilities: float [N, C] predicted class probabilities (rows sum to 1).
        label_names: list of C str.

    Returns:
        list of {"row": 0-based data row, "given": label name, "suggested": the most probable
        other label's name, "score": self-confidence, the probability of the given label in
        [0, 1], ascending}. Empty when fewer than 2 classes occur among the given labels (nothing
        to confuse them with).

    Raises:
        ValueError: shapes that do not agree.
    """
    # cleanlab imports pandas and scikit-learn: imported on use, not with the evaluation package.
    from cleanlab.filter import find_label_issues as cleanlab_find

    given = np.asarray(given, np.int64)
    probabilities = np.asarray(probabilities, np.float64)
    if probabilities.shape != (len(given), len(label_names)) or not len(given):
        raise ValueError(
            f"probabilities {probabilities.shape} do not fit {len(given)} labels and "
            f"{len(label_names)} classes"
        )
    if len(np.unique(given)) < 2:
        return []
    probabilities = probabilities / probabilities.sum(axis=1, keepdims=True)
    with warnings.catch_warnings():  # "too few examples in class k": expected on small sets
        warnings.simplefilter("ignore", UserWarning)
        rows = cleanlab_find(
            given, probabilities, return_indices_ranked_by="self_confidence", n_jobs=1
        )
    others = probabilities.copy()
    others[np.arange(len(given)), given] = -1.0
    return [
        {
            "row": int(i),
            "given": label_names[given[i]],
            "suggested": label_names[int(others[i].argmax())],
            "score": float(probabilities[i, given[i]]),
        }
        for i in rows
    ]


def recall_precision(issues: list[dict], flipped) -> tuple[float, float]:
    """(recall, precision) of the suspects against the rows known to be flipped."""
    found = {r["row"] for r in issues}
    flipped = {int(i) for i in flipped}
    hits = len(found & flipped)
    return hits / max(len(flipped), 1), hits / max(len(found), 1)
