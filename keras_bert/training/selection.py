"""Which evaluation is the best: a NaN or infinite metric never wins while a finite one exists.

Comparisons with NaN are always false, so a naive `value > best` keeps a first NaN as the best
forever, and `numpy.argmax([0.5, nan])` picks the NaN (PITFALLS: training loop). A regressor with a
constant output gives Pearson NaN; a diverged run gives an infinite loss. One rule, used within a
run (`EvaluationCallback`) and across `--num_restarts` runs (`best_index`).
"""
from __future__ import annotations

import math


def is_finite(value) -> bool:
    """True for a real, finite number (None, NaN and +-inf are not)."""
    return value is not None and math.isfinite(float(value))


def is_better(value, best) -> bool:
    """Whether metric `value` beats `best` (higher is better; `best` None means no best yet).

    A finite value beats a non-finite one; a non-finite value never beats anything, and is taken
    only when there is no best yet.
    """
    if best is None:
        return True
    if not is_finite(value):
        return False
    return not is_finite(best) or float(value) > float(best)


def best_index(values) -> int:
    """Index of the best of `values` under `is_better` (the first on ties).

    Raises:
        ValueError: `values` is empty.
    """
    if not values:
        raise ValueError("best_index needs at least one value")
    best = 0
    for i, value in enumerate(values[1:], start=1):
        if is_better(value, values[best]):
            best = i
    return best
