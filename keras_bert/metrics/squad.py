"""SQuAD scoring through the official evaluators shipped in tf-models-official.

`official.nlp.tools.squad_evaluate_v1_1` (EM, F1) and `squad_evaluate_v2_0` (EM, F1, HasAns /
NoAns splits, best null threshold) are called as they are, never rewritten. What this module adds:
- `dataset_of(examples)`: the official JSON `data` list for a subset of questions (e.g. held-out
  articles), so the evaluators score exactly the questions predicted;
- one unit for both versions: percentages (tf-models-official's v1.1 returns fractions);
- the v2.0 threshold sweep done right (`best_threshold`). The evaluator's `_find_best_thresh`
  reports points no threshold of ours reaches: all-null (nothing answered) at its starting
  threshold 0.0, which answers every question whose null odds are at or below 0; and a point
  inside a run of equal null odds, which a threshold answers all or none of. Ours walks only
  the points our rule (`squad_answers.predicts_null`: null odds > threshold, strict, float32)
  reaches: nothing answered (a threshold just below the lowest odds), then each run of equal
  odds added whole (the threshold = those odds). The per-question scores are the official
  scorer's (of the best NON-NULL answer and of ""), summed exactly; the best EM / F1 reported
  are the official evaluator's on the predictions thresholded at the chosen value, so applying
  the threshold (`with_threshold`, `SpanQuestionAnswerer.predict`, the export) reproduces them.
"""

from __future__ import annotations

import fractions
import itertools

import numpy as np
from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0

from keras_bert.data.squad_answers import with_threshold


def dataset_of(examples) -> list:
    """Official SQuAD `data` list (one article per question) for `SquadExample`s."""
    return [
        {
            "title": e.title,
            "paragraphs": [
                {
                    "context": e.context,
                    "qas": [
                        {
                            "id": e.qas_id,
                            "question": e.question,
                            "is_impossible": e.is_impossible,
                            "answers": [{"text": t, "answer_start": s} for t, s in e.answers],
                        }
                    ],
                }
            ],
        }
        for e in examples
    ]


def evaluate_v1(dataset: list, predictions: dict) -> dict:
    """SQuAD v1.1 official metrics.

    Args:
        dataset: the official JSON's `data` list (or `dataset_of(examples)`).
        predictions: qas_id -> answer text.

    Returns:
        {"exact_match": float, "f1": float} in percent (0-100), over every question of
        `dataset` (a missing prediction scores 0, as the official script does).
    """
    raw = squad_evaluate_v1_1.evaluate(dataset, predictions)
    return {"exact_match": 100.0 * raw["exact_match"], "f1": 100.0 * raw["final_f1"]}


def _v2_scores(dataset: list, predictions: dict) -> dict:
    """The v2.0 evaluator's exact / f1 / total and HasAns / NoAns splits of answer texts."""
    scored = squad_evaluate_v2_0.evaluate(dataset, predictions)
    return {
        k: v
        for k, v in scored.items()
        if k.split("_")[0] in ("exact", "f1", "total", "HasAns", "NoAns")
    }


def official_scores(dataset: list, predictions: dict, version_2_with_negative: bool) -> dict:
    """Official metrics of answer texts (qas_id -> text, "" = no answer), in percent.

    Returns:
        {"exact_match", "f1"} (v1.1 `evaluate_v1`); v2.0 adds the evaluator's "total",
        "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_..." (those present) for the
        predictions as given (no threshold sweep: that needs `evaluate_v2`'s null odds).
    """
    if not version_2_with_negative:
        return evaluate_v1(dataset, predictions)
    scored = _v2_scores(dataset, predictions)
    return {"exact_match": scored.pop("exact"), "f1": scored.pop("f1")} | scored


def _raw_scores(dataset: list, predictions: dict) -> tuple[dict, dict]:
    """Per question of `dataset` that `predictions` answers: the official v2.0 scorer's exact
    (0 or 1) and F1 (0-1) of its prediction, as `squad_evaluate_v2_0.evaluate` computes them."""
    kept = [
        {"paragraphs": [{"qas": [qa]}]}
        for article in dataset
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
        if qa["id"] in predictions
    ]
    return squad_evaluate_v2_0._get_raw_scores(kept, predictions)


def best_threshold(null_odds: dict, answered: dict, unanswered: dict) -> float:
    """The lowest null threshold of the best score, among those our rule can reach.

    Args:
        null_odds: qas_id -> null score - best non-null score (finite as float32).
        answered: qas_id -> the question's score when answered (its best non-null answer).
        unanswered: qas_id -> its score when not ("" predicted); the questions scored are
            these keys.

    Returns:
        float32 value T: `predicts_null(odds, T)` answers exactly the questions of the best
        set. Nothing answered (no run of odds adds to the all-null score): the largest float32
        below the lowest odds; else the odds of the last run answered. Scores are summed
        exactly (fractions), so equal totals are equal and the lowest threshold wins.

    Raises:
        ValueError: a scored question's null odds is NaN or infinite (as float32).
    """
    with np.errstate(over="ignore"):  # what predicts_null compares
        odds = {q: np.float32(null_odds[q]) for q in unanswered}
    bad = [q for q in odds if not np.isfinite(odds[q])]
    if bad:
        raise ValueError(
            f"null odds must be finite float32 numbers; question {bad[0]!r} has {null_odds[bad[0]]}"
        )
    if not odds:
        return 0.0
    order = sorted(unanswered, key=odds.__getitem__)
    gain = {q: fractions.Fraction(answered[q]) - fractions.Fraction(unanswered[q]) for q in order}
    lowest = odds[order[0]]
    best_thresh = np.nextafter(lowest, np.float32(-np.inf))
    score = best = fractions.Fraction(0)  # relative to answering nothing
    for value, run in itertools.groupby(order, key=odds.__getitem__):
        score += sum(gain[q] for q in run)
        if score > best:
            best, best_thresh = score, value
    return float(best_thresh)


def evaluate_v2(dataset: list, answers: dict) -> dict:
    """SQuAD v2.0 official metrics of thresholded predictions, plus the threshold sweep.

    Args:
        dataset: the official JSON's `data` list (or `dataset_of(examples)`).
        answers: qas_id -> the dict of `squad_answers.predict_example` (uses `text`,
            `best_non_null_text`, `null_odds`).

    Returns:
        dict in percent: `exact`, `f1`, `total`, `HasAns_exact`, `HasAns_f1`, `HasAns_total`,
        `NoAns_exact`, `NoAns_f1`, `NoAns_total` (those present) for the predictions as given;
        `best_exact_thresh`, `best_f1_thresh`: the null thresholds of the best EM and the
        best F1 (`best_threshold`; predict "" when `predicts_null(null_odds, thresh)`), and
        `best_exact`, `best_f1`: the official evaluator's EM and F1 of the predictions
        thresholded there (`with_threshold`), i.e. what that threshold gives.

    Raises:
        ValueError: a null odds that is NaN or infinite.
    """
    out = _v2_scores(dataset, {q: a["text"] for q, a in answers.items()})
    null_odds = {q: float(a["null_odds"]) for q, a in answers.items()}
    exact_on, f1_on = _raw_scores(dataset, {q: a["best_non_null_text"] for q, a in answers.items()})
    exact_off, f1_off = _raw_scores(dataset, {q: "" for q in answers})
    for key, on, off in (("exact", exact_on, exact_off), ("f1", f1_on, f1_off)):
        threshold = best_threshold(null_odds, on, off)
        out[f"best_{key}"] = _v2_scores(dataset, with_threshold(answers, threshold))[key]
        out[f"best_{key}_thresh"] = threshold
    return out


def evaluate(dataset: list, answers: dict, version_2_with_negative: bool) -> dict:
    """`evaluate_v2(dataset, answers)` or `evaluate_v1` on the answers' texts."""
    if version_2_with_negative:
        return evaluate_v2(dataset, answers)
    return evaluate_v1(dataset, {q: a["text"] for q, a in answers.items()})


__all__ = [
    "best_threshold",
    "dataset_of",
    "evaluate",
    "evaluate_v1",
    "evaluate_v2",
    "official_scores",
    "with_threshold",
]
