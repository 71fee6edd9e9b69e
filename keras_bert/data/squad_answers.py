"""SQuAD post-processing: window logits -> answers cut from the original context.

google-research/bert `run_squad.py::write_predictions`, on character offsets:
- per window, the `n_best_size` best start and end positions are paired; a pair is a candidate
  when both are context pieces, the start is in its max-context window, end >= start and the
  span has at most `max_answer_length` pieces; its score is start_logit + end_logit;
- candidates of all windows of a question are sorted by score (stable: window, then start,
  then end order); the n-best list keeps the first `n_best_size` distinct texts, each
  `context[char_start:char_end]` (whitespace, accents and punctuation exactly as written);
- v2.0: null score = min over windows of start_logit[CLS] + end_logit[CLS]; the answer is
  empty when null score - best non-null score > `null_score_diff_threshold` (strict; both sides
  as float32, the serving graph's arithmetic: `predicts_null`);
- the best non-null answer is the best valid span of all windows, taken before the n-best
  cut (so a null answer filling the n-best alone does not hide it);
- a question whose every candidate is invalid gets "" at any threshold (no exception).

One deliberate difference: positions that cannot start (or end) an answer are removed before
taking the `n_best_size` best, so [CLS], question and padding logits never crowd valid
positions out. The in-graph serving path
(`keras_bert.saved_model.span_question_answerer_signatures`) applies the same rule, so both
return the same answer.
"""

from __future__ import annotations

import dataclasses

import numpy as np

N_BEST_SIZE = 20
MAX_ANSWER_LENGTH = 30
# null_odds of a question with no valid non-null candidate: always predicted empty.
NO_ANSWER_ODDS = 1e9


def predicts_null(null_odds: float, threshold: float) -> bool:
    """The v2.0 rule: no answer when `null_odds` (null score - best non-null score) exceeds
    `threshold`, strictly, both rounded to float32 as the serving graph compares them
    (`keras_bert.saved_model.span_question_answerer_signatures`), so Python and graph agree on
    every value (beyond float32's range a value is +-inf, as TensorFlow converts it)."""
    with np.errstate(over="ignore"):
        return bool(np.float32(null_odds) > np.float32(threshold))


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A scored answer span; text "" is the null answer (char_start = char_end = 0)."""

    text: str
    char_start: int
    char_end: int
    start_logit: float
    end_logit: float

    @property
    def score(self) -> float:
        """start_logit + end_logit, summed in float32 like the serving graph."""
        return float(np.float32(self.start_logit) + np.float32(self.end_logit))


def top_valid(logits: np.ndarray, valid: np.ndarray, k: int) -> list[int]:
    """Indices of the `k` largest `logits` among `valid` positions, best first (ties: lower
    index first, as tf.math.top_k)."""
    idx = np.flatnonzero(valid)
    order = np.argsort(-logits[idx], kind="stable")[:k]
    return idx[order].tolist()


def window_candidates(
    start_logits, end_logits, feature, n_best_size: int, max_answer_length: int
) -> list[tuple[float, int, int]]:
    """Valid (score, start position, end position) of one window, in pairing order.

    Args:
        start_logits, end_logits: float [T] (T may be shorter than the feature: trimmed padding).
        feature: a `keras_bert.data.squad.SquadFeature`.
    """
    t = min(len(start_logits), len(feature.token_start))
    start_logits = np.asarray(start_logits[:t], np.float32)
    end_logits = np.asarray(end_logits[:t], np.float32)
    is_context = feature.token_start[:t] >= 0
    starts = top_valid(start_logits, is_context & feature.token_is_max_context[:t], n_best_size)
    ends = top_valid(end_logits, is_context, n_best_size)
    out = []
    for s in starts:
        for e in ends:
            if s <= e < s + max_answer_length:
                out.append((float(start_logits[s] + end_logits[e]), s, e))
    return out


def _candidates(context, features, results, n_best_size, max_answer_length):
    """All candidates of one question, sorted best first, and the null (CLS) candidate."""
    prelim, null = [], None
    for feature, (start_logits, end_logits) in zip(features, results):
        cls = Candidate("", 0, 0, float(start_logits[0]), float(end_logits[0]))
        if null is None or cls.score < null.score:
            null = cls
        for _, s, e in window_candidates(
            start_logits, end_logits, feature, n_best_size, max_answer_length
        ):
            a, b = int(feature.token_start[s]), int(feature.token_end[e])
            prelim.append(
                Candidate(context[a:b], a, b, float(start_logits[s]), float(end_logits[e]))
            )
    prelim.sort(key=lambda c: -c.score)  # stable
    return prelim, null


def _softmax(scores) -> list[float]:
    x = np.asarray(scores, np.float64)
    x = np.exp(x - x.max())
    return (x / x.sum()).tolist()


def predict_example(
    context: str,
    features,
    results,
    n_best_size: int = N_BEST_SIZE,
    max_answer_length: int = MAX_ANSWER_LENGTH,
    version_2_with_negative: bool = False,
    null_score_diff_threshold: float = 0.0,
) -> dict:
    """The answer of one question from the logits of its windows.

    Args:
        context: the example's original context.
        features: its `SquadFeature`s (all windows, in order).
        results: per feature, (start_logits, end_logits) float [T].

    Returns:
        dict: `text` (the prediction), `start`, `end` (character offsets, `text ==
        context[start:end]`; 0, 0 when empty), `score` (start + end logit of the chosen span;
        the null score when empty), `null_score`, `best_non_null_text` (the best valid span
        of all windows, "" if none), `null_odds` (null score - its score, `NO_ANSWER_ODDS`
        when there is none),
        `nbest` (list of dicts text / start / end / start_logit / end_logit / probability).

    Raises:
        ValueError: no features, or features and results of different lengths.
    """
    if not features or len(features) != len(results):
        raise ValueError(
            f"need one result per feature and at least one feature; got "
            f"{len(features)} features and {len(results)} results"
        )
    prelim, null = _candidates(context, features, results, n_best_size, max_answer_length)
    # The best valid span of all windows, before the n-best cut (which the null answer may fill
    # alone when n_best_size is 1), as the serving graph takes it.
    best = prelim[0] if prelim else None
    if version_2_with_negative:
        prelim = sorted(prelim + [null], key=lambda c: -c.score)
    nbest, seen = [], set()
    for c in prelim:
        if len(nbest) >= n_best_size:
            break
        if c.text in seen:
            continue
        seen.add(c.text)
        nbest.append(c)
    if (version_2_with_negative and "" not in seen) or not nbest:
        nbest.append(null)
    odds = (
        NO_ANSWER_ODDS if best is None else float(np.float32(null.score) - np.float32(best.score))
    )
    answer = (
        best
        if best is not None
        and not (version_2_with_negative and predicts_null(odds, null_score_diff_threshold))
        else null
    )
    probabilities = _softmax([c.score for c in nbest])
    return {
        "text": answer.text,
        "start": answer.char_start,
        "end": answer.char_end,
        "score": answer.score,
        "null_score": null.score,
        "best_non_null_text": "" if best is None else best.text,
        "null_odds": odds,
        "nbest": [
            {
                "text": c.text,
                "start": c.char_start,
                "end": c.char_end,
                "start_logit": c.start_logit,
                "end_logit": c.end_logit,
                "probability": p,
            }
            for c, p in zip(nbest, probabilities)
        ],
    }


def predict_examples(examples, features, results, **kwargs) -> dict:
    """`predict_example` for every example; qas_id -> its result dict.

    Args:
        examples: list of `SquadExample`.
        features: `SquadFeature`s of those examples (`example_index` into `examples`).
        results: per feature, (start_logits, end_logits).
        **kwargs: n_best_size, max_answer_length, version_2_with_negative,
            null_score_diff_threshold.

    Raises:
        ValueError: an example without features.
    """
    by_example: dict[int, list] = {}
    for feature, result in zip(features, results):
        by_example.setdefault(feature.example_index, []).append((feature, result))
    out = {}
    for index, example in enumerate(examples):
        pairs = by_example.get(index)
        if not pairs:
            raise ValueError(f"example {example.qas_id} has no features")
        out[example.qas_id] = predict_example(
            example.context, [f for f, _ in pairs], [r for _, r in pairs], **kwargs
        )
    return out


def with_threshold(answers: dict, threshold: float) -> dict:
    """qas_id -> prediction text with another v2.0 null threshold (`predicts_null` -> "")."""
    return {
        q: "" if predicts_null(a["null_odds"], threshold) else a["best_non_null_text"]
        for q, a in answers.items()
    }
