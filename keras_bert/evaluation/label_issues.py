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

NER (`find_token_label_issues`): cleanlab's token-classification module
(`cleanlab.token_classification.filter.find_label_issues`, the same confident learning over all
tokens of all sentences, flattened) on per-word tag probabilities, with the token score of
`cleanlab.token_classification.rank.get_label_quality_scores` (self-confidence, the probability of
the given tag). Same caveat: the model's own probabilities.
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


def find_token_label_issues(given_tags, probabilities, label_names, words) -> list[dict]:
    """Words whose given tag confident learning suspects (cleanlab token classification), most
    suspect first.

    Args:
        given_tags: per sentence, a list of str tags (in `label_names`; a sentence with a tag
            the model does not know is left out).
        probabilities: per sentence, float [W, C] tag probabilities of its W words.
        label_names: list of C str tags.
        words: per sentence, its W words.

    Returns:
        list of {"row": 0-based sentence, "token": 0-based word in it, "word", "given",
        "suggested" (the most probable other tag), "score" (probability of the given tag)}.
        Empty when fewer than 2 tags occur among the given ones.
    """
    from cleanlab.token_classification.filter import find_label_issues as cleanlab_find
    from cleanlab.token_classification.rank import get_label_quality_scores

    index = {name: i for i, name in enumerate(label_names)}
    kept = [i for i, tags in enumerate(given_tags) if tags and all(t in index for t in tags)]
    labels = [np.asarray([index[t] for t in given_tags[i]], np.int64) for i in kept]
    probs = []
    for i in kept:
        p = np.asarray(probabilities[i], np.float64)
        if p.shape != (len(given_tags[i]), len(label_names)):
            raise ValueError(
                f"sentence {i}: probabilities {p.shape} do not fit {len(given_tags[i])} words and "
                f"{len(label_names)} tags"
            )
        probs.append(p / p.sum(axis=1, keepdims=True))
    if len({int(x) for tags in labels for x in tags}) < 2:
        return []
    with warnings.catch_warnings():  # "too few examples in class k": expected on small sets
        warnings.simplefilter("ignore", UserWarning)
        found = cleanlab_find(labels, probs, return_indices_ranked_by="self_confidence", n_jobs=1)
        _, token_scores = get_label_quality_scores(labels, probs)
    issues = []
    for s, t in found:
        others = probs[s][t].copy()
        others[labels[s][t]] = -1.0
        issues.append(
            {
                "row": kept[s],
                "token": int(t),
                "word": words[kept[s]][t],
                "given": label_names[labels[s][t]],
                "suggested": label_names[int(others.argmax())],
                "score": float(token_scores[s][t]),
            }
        )
    return issues


def recall_precision(issues: list[dict], flipped) -> tuple[float, float]:
    """(recall, precision) of the suspects against the rows known to be flipped (rows: ints;
    NER: (sentence, word) pairs, matched to the issues' (row, token))."""
    found = {(r["row"], r["token"]) if "token" in r else r["row"] for r in issues}
    flipped = {tuple(int(x) for x in i) if np.ndim(i) else int(i) for i in flipped}
    hits = len(found & flipped)
    return hits / max(len(flipped), 1), hits / max(len(found), 1)
