"""Weak-segment discovery: groups of rows, defined by a text property, where the model does worse.

Every row gets text properties (`text_properties`): length in WordPiece pieces, truncated or not,
[UNK] rate, contains a digit, upper-case ratio, contains a question mark, contains a negation word,
dominant script, and the user's slice column. A *segment* is one value of a categorical property or
one quantile bin of a numeric one (quartiles; tied edges merged, so a mostly-zero property gives
fewer bins). A segment is weak when its accuracy is significantly below the whole set's: a
one-sided exact binomial test of its correct rows against the whole set's accuracy
(scipy.stats.binomtest, H1: the segment's success probability is lower), the p-values of all
segments of at least `min_size` rows corrected for multiple testing with Benjamini-Hochberg
(scipy.stats.false_discovery_control), and the adjusted p-value below `alpha` (the false discovery
rate). The interval is the Wilson score interval of the segment's accuracy (95%).

Family-independent: it needs per-row correctness (bool [N]) and texts; span QA (exact match), NER
(sentence fully right) and multiple choice give the same.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import scipy.stats

ALPHA = 0.05
MIN_SIZE = 10
QUANTILES = (0.25, 0.5, 0.75)
EXAMPLE_ROWS = 3
NEGATIONS = frozenset(
    "not no never nothing nobody none neither nor nowhere without cannot isn't aren't wasn't "
    "weren't don't doesn't didn't won't wouldn't can't couldn't shouldn't hasn't haven't hadn't "
    "n't".split()
)


def dominant_script(text: str) -> str:
    """The Unicode script of most letters ("LATIN", "CJK", "CYRILLIC", ...; "none": no letter),
    from the first word of each letter's Unicode name."""
    counts: dict = {}
    for ch in text:
        if ch.isalpha():
            script = unicodedata.name(ch, "UNKNOWN").split()[0]
            counts[script] = counts.get(script, 0) + 1
    return max(sorted(counts), key=counts.get) if counts else "none"


def has_negation(text: str) -> bool:
    words = text.lower().replace("’", "'").split()
    return any(w.strip('.,;:!?"()') in NEGATIONS or w.endswith("n't") for w in words)


def upper_case_ratio(text: str) -> float:
    letters = [ch for ch in text if ch.isalpha()]
    return sum(ch.isupper() for ch in letters) / len(letters) if letters else 0.0


def text_properties(texts, pieces, truncated, unknown, user_values=None, user_column=None) -> dict:
    """Property name -> ("numeric" | "categorical", list of N values).

    Args:
        texts: list of N str (a pair: both segments joined).
        pieces: int [N] WordPiece pieces with [CLS] / [SEP], before truncation.
        truncated: bool [N].
        unknown: int [N] [UNK] pieces.
        user_values: optional list of N values of the user's slice column `user_column`.
    """
    pieces = np.asarray(pieces, np.int64)
    unknown = np.asarray(unknown, np.int64)
    props = {
        "length (pieces)": ("numeric", pieces.tolist()),
        "truncated": ("categorical", ["yes" if t else "no" for t in truncated]),
        "[UNK] rate": ("numeric", (unknown / np.maximum(pieces, 1)).tolist()),
        "contains a digit": ("categorical", [_yes(any(c.isdigit() for c in t)) for t in texts]),
        "upper-case ratio": ("numeric", [upper_case_ratio(t) for t in texts]),
        "contains '?'": ("categorical", [_yes("?" in t) for t in texts]),
        "negation word": ("categorical", [_yes(has_negation(t)) for t in texts]),
        "script": ("categorical", [dominant_script(t) for t in texts]),
    }
    if user_values is not None:
        props[f"column {user_column}"] = ("categorical", [str(v) for v in user_values])
    return props


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _fmt(x: float) -> str:
    return f"{x:g}" if float(x).is_integer() else f"{x:.3g}"


def segments(properties: dict) -> list[tuple[str, str, np.ndarray]]:
    """(property, description, member bool [N]) of every segment."""
    out = []
    for name, (kind, values) in properties.items():
        values = np.asarray(values, object if kind == "categorical" else np.float64)
        if kind == "categorical":
            for value in sorted(set(values.tolist())):
                out.append((name, f"{name} = {value}", values == value))
            continue
        edges = np.unique(np.quantile(values, QUANTILES))
        bins = np.searchsorted(edges, values, side="left")  # bin k: (edges[k-1], edges[k]]
        for k in np.unique(bins):
            member = bins == k
            low, high = values[member].min(), values[member].max()
            span = _fmt(low) if low == high else f"{_fmt(low)} to {_fmt(high)}"
            out.append((name, f"{name} {'=' if low == high else 'in'} {span}", member))
    return out


def find_weak_segments(
    properties: dict,
    correct,
    texts,
    metric: str = "accuracy",
    alpha: float = ALPHA,
    min_size: int = MIN_SIZE,
) -> list[dict]:
    """The segments whose `metric` (the mean of `correct`) is significantly below the whole set's.

    Args:
        properties: from `text_properties`.
        correct: bool [N], the row's prediction is right.
        texts: list of N str, for the examples shown.
        alpha: false discovery rate of the Benjamini-Hochberg correction.
        min_size: smallest segment tested (smaller ones are neither tested nor counted in the
            correction); a segment of every row is not a segment.

    Returns:
        list of {"property", "description", "size", "correct", metric, "ci_low", "ci_high",
        "overall", "p_value", "adjusted_p_value", "examples": up to 3 wrong rows [{"row",
        "text"}]}, worst first (lowest metric, then lowest adjusted p-value).
    """
    correct = np.asarray(correct, bool)
    n, overall = len(correct), float(correct.mean()) if len(correct) else 0.0
    tested = []
    for name, description, member in segments(properties):
        size = int(member.sum())
        if size < min_size or size == n:
            continue
        hits = int(correct[member].sum())
        test = scipy.stats.binomtest(hits, size, overall, alternative="less")
        ci = test.proportion_ci(0.95, method="wilson")
        wrong = np.flatnonzero(member & ~correct)[:EXAMPLE_ROWS]
        tested.append(
            {
                "property": name,
                "description": description,
                "size": size,
                "correct": hits,
                metric: hits / size,
                "ci_low": float(ci.low),
                "ci_high": float(ci.high),
                "overall": overall,
                "p_value": float(test.pvalue),
                "examples": [{"row": int(i), "text": texts[i]} for i in wrong],
            }
        )
    if not tested:
        return []
    adjusted = scipy.stats.false_discovery_control([s["p_value"] for s in tested], method="bh")
    weak = []
    for s, p in zip(tested, adjusted):
        if p < alpha and s[metric] < overall:
            s["adjusted_p_value"] = float(p)
            weak.append(s)
    return sorted(weak, key=lambda s: (s[metric], s["adjusted_p_value"], s["description"]))
