"""Failure catalogue: every error of a model on a labelled set, and error rates by slice.

A slice is a named group of examples: input length in WordPiece tokens (bucket edges
`LENGTH_BUCKETS`, counted with [CLS]/[SEP] before truncation), gold label, a user column, and
truncated vs not (the input did not fit `max_seq_length`). Each slice gets its error rate
(classification: fraction misclassified; regression: mean absolute error) and a flag when it is
far above the overall rate: at least `min_support` examples and a one-sided binomial test
(scipy.stats.binomtest, H1: the slice's error probability exceeds the overall rate) with
p < `alpha`. Regression slices are flagged when their mean absolute error is at least twice the
overall one (no binomial model applies).
"""

from __future__ import annotations

import numpy as np
import scipy.stats

LENGTH_BUCKETS = (8, 16, 32, 64, 128, 256, 512)  # upper edges, inclusive, in tokens
MIN_SUPPORT = 5
ALPHA = 0.05


def length_bucket(tokens: int) -> str:
    """ "<=8", "9-16", ..., ">512" for a token count."""
    lower = 0
    for upper in LENGTH_BUCKETS:
        if tokens <= upper:
            return f"<={upper}" if lower == 0 else f"{lower + 1}-{upper}"
        lower = upper
    return f">{LENGTH_BUCKETS[-1]}"


def slice_columns(
    token_lengths, truncated, gold_names, user_values=None, user_column: str | None = None
) -> dict[str, list[str]]:
    """Slice family name -> the slice value of every example (lists of N str)."""
    columns = {
        "length (tokens)": [length_bucket(int(n)) for n in token_lengths],
        "truncated": ["yes" if t else "no" for t in truncated],
    }
    if gold_names is not None:
        columns["gold label"] = [str(g) for g in gold_names]
    if user_values is not None:
        columns[f"column {user_column}"] = [str(v) for v in user_values]
    return columns


def is_flagged(
    errors: int,
    count: int,
    overall_rate: float,
    min_support: int = MIN_SUPPORT,
    alpha: float = ALPHA,
) -> tuple[bool, float]:
    """(flag, p-value) of a classification slice with `errors` out of `count` examples."""
    if count == 0:
        return False, 1.0
    p = float(
        scipy.stats.binomtest(
            int(errors), int(count), min(max(overall_rate, 0.0), 1.0), alternative="greater"
        ).pvalue
    )
    return bool(count >= min_support and errors / count > overall_rate and p < alpha), p


def slice_table(
    columns: dict,
    error,
    regression: bool = False,
    min_support: int = MIN_SUPPORT,
    alpha: float = ALPHA,
) -> list[dict]:
    """Error rate per slice.

    Args:
        columns: from `slice_columns`.
        error: classification: bool [N] (misclassified); regression: float [N] absolute errors.

    Returns:
        list of {"family", "value", "count", "errors" (classification), "error_rate" (or mean
        absolute error), "p_value" (classification), "flagged"}, families in `columns` order, values
        sorted by descending error rate.
    """
    error = np.asarray(error, np.float64)
    overall = float(error.mean())
    by_family = {family: [] for family in columns}
    for family, value, member in slice_members(columns):
        count = int(member.sum())
        rate = float(error[member].mean())
        row = {"family": family, "value": value, "count": count, "error_rate": rate}
        if regression:
            row["flagged"] = bool(count >= min_support and rate >= 2 * overall > 0)
        else:
            errors = int(error[member].sum())
            flagged, p = is_flagged(errors, count, overall, min_support, alpha)
            row.update(errors=errors, p_value=p, flagged=flagged)
        by_family[family].append(row)
    return [
        row
        for rows in by_family.values()
        for row in sorted(rows, key=lambda r: (-r["error_rate"], r["value"]))
    ]


def slice_members(columns: dict):
    """Yields (family, value, bool mask [N]) for every slice of `columns` (`slice_columns`),
    families in order, values sorted."""
    for family, values in columns.items():
        values = np.asarray(values, object)
        for value in sorted(set(values.tolist())):
            yield family, value, values == value


def catalogue(examples, gold_names, predicted_names, confidence, extra=None) -> list[dict]:
    """Every misclassified example, the most confident error first.

    Args:
        examples: list of InputExample (guid, text_a, text_b).
        gold_names, predicted_names: list of N str.
        confidence: float [N], probability of the predicted class.
        extra: optional dict name -> list of N values added to each row (slices, token counts).

    Returns:
        list of {"row" (0-based index in `examples`), "guid", "text", "text_b", "gold",
        "predicted", "confidence", **extra}.
    """
    rows = []
    for i, e in enumerate(examples):
        if gold_names[i] == predicted_names[i]:
            continue
        row = {
            "row": i,
            "guid": e.guid,
            "text": e.text_a,
            "text_b": e.text_b,
            "gold": gold_names[i],
            "predicted": predicted_names[i],
            "confidence": float(confidence[i]),
        }
        row.update({k: v[i] for k, v in (extra or {}).items()})
        rows.append(row)
    return sorted(rows, key=lambda r: -r["confidence"])


def regression_catalogue(examples, gold, scores, extra=None, limit: int = 100) -> list[dict]:
    """The `limit` examples of largest absolute error, largest first."""
    gold, scores = np.asarray(gold, float), np.asarray(scores, float)
    order = np.argsort(-np.abs(gold - scores), kind="stable")[:limit]
    return [
        {
            "row": int(i),
            "guid": examples[i].guid,
            "text": examples[i].text_a,
            "text_b": examples[i].text_b,
            "gold": float(gold[i]),
            "predicted": float(scores[i]),
            "abs_error": float(abs(gold[i] - scores[i])),
            **{k: v[i] for k, v in (extra or {}).items()},
        }
        for i in order
    ]


def outcome(columns, correct, failures, counts, metrics_of, shown, gold_shown) -> dict:
    """The per-example part of a span QA / NER / multiple-choice result (`evidence_pack`).

    Args:
        columns: `slice_columns` (plus the family's own), correct: bool [N] (an error is not
            correct), failures: the catalogue rows, counts: float [N, K] additive per-example
            counts, metrics_of: sums [..., K + 1] (the last: examples) -> {metric: value}, shown /
            gold_shown: N str, each example's prediction and gold as shown to a reader.

    Returns:
        {"slices", "failures", "correct" (for `diagnostics.add_diagnostics`), "predicted" (for
        `comparison.compare`: counts, metrics_of, correct, shown, gold_shown)}.
    """
    correct = np.asarray(correct, bool)
    return {
        "slices": slice_table(columns, ~correct),
        "failures": failures,
        "correct": correct,
        "predicted": {
            "counts": np.asarray(counts, np.float64),
            "metrics_of": metrics_of,
            "correct": correct,
            "shown": list(shown),
            "gold_shown": list(gold_shown),
        },
    }
