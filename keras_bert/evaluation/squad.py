"""SQuAD scoring through the official evaluators shipped in tf-models-official.

`official.nlp.tools.squad_evaluate_v1_1` (EM, F1) and `squad_evaluate_v2_0` (EM, F1, HasAns /
NoAns splits, best null threshold) are called as they are, never rewritten. What this module adds:
- `dataset_of(examples)`: the official JSON `data` list for a subset of questions (e.g. held-out
  articles), so the evaluators score exactly the questions predicted;
- one unit for both versions: percentages (tf-models-official's v1.1 returns fractions);
- the v2.0 threshold sweep done right: the evaluator's `_find_best_thresh` adds a question's
  score when its null odds are at or below the threshold, which is only correct if the scored
  prediction is the best NON-NULL answer; `evaluate_v2` therefore sweeps on those, and scores
  the thresholded predictions (`keras_bert.data.squad_answers`) separately.
"""

from __future__ import annotations

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


def evaluate_v2(dataset: list, answers: dict) -> dict:
    """SQuAD v2.0 official metrics of thresholded predictions, plus the threshold sweep.

    Args:
        dataset: the official JSON's `data` list (or `dataset_of(examples)`).
        answers: qas_id -> the dict of `squad_answers.predict_example` (uses `text`,
            `best_non_null_text`, `null_odds`).

    Returns:
        dict in percent: `exact`, `f1`, `total`, `HasAns_exact`, `HasAns_f1`, `HasAns_total`,
        `NoAns_exact`, `NoAns_f1`, `NoAns_total` (those present) for the predictions as given;
        `best_exact`, `best_exact_thresh`, `best_f1`, `best_f1_thresh`: the scores at the best
        null-score-difference threshold found by the official sweep (predict "" when
        null_odds > thresh).
    """
    out = _v2_scores(dataset, {q: a["text"] for q, a in answers.items()})
    non_null = {q: a["best_non_null_text"] for q, a in answers.items()}
    null_odds = {q: float(a["null_odds"]) for q, a in answers.items()}
    sweep = squad_evaluate_v2_0.evaluate(dataset, non_null, na_probs=null_odds)
    out.update(
        {
            "best_exact": sweep["final_exact"],
            "best_exact_thresh": sweep["final_exact_thresh"],
            "best_f1": sweep["final_f1"],
            "best_f1_thresh": sweep["final_f1_thresh"],
        }
    )
    return out


def evaluate(dataset: list, answers: dict, version_2_with_negative: bool) -> dict:
    """`evaluate_v2(dataset, answers)` or `evaluate_v1` on the answers' texts."""
    if version_2_with_negative:
        return evaluate_v2(dataset, answers)
    return evaluate_v1(dataset, {q: a["text"] for q, a in answers.items()})


__all__ = [
    "dataset_of",
    "evaluate",
    "evaluate_v1",
    "evaluate_v2",
    "official_scores",
    "with_threshold",
]
