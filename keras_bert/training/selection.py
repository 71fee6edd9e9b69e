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


def is_better(value, best, loss=None, best_loss=None, on_tie: bool = False) -> bool:
    """Whether metric `value` beats `best` (higher is better; `best` None means no best yet).

    A finite value beats a non-finite one; a non-finite value never beats anything, and is taken
    only when there is no best yet. Equal values are told apart by the dev loss (lower wins, when
    both are finite and differ), else by `on_tie` (True: the newer one wins, as a later epoch of
    the same dev score and loss: a small dev set that saturates must not keep the least-trained
    model).
    """
    if best is None:
        return True
    if not is_finite(value):
        return False
    if not is_finite(best) or float(value) > float(best):
        return True
    if float(value) < float(best):
        return False
    if is_finite(loss) and is_finite(best_loss) and float(loss) != float(best_loss):
        return float(loss) < float(best_loss)
    return on_tie


def best_index(values, losses=None) -> int:
    """Index of the best of `values` under `is_better`; ties go to the lower loss (`losses`,
    parallel to values, None entries allowed), then the first.

    Raises:
        ValueError: `values` is empty.
    """
    if not values:
        raise ValueError("best_index needs at least one value")
    losses = list(losses) if losses is not None else [None] * len(values)
    best = 0
    for i, value in enumerate(values[1:], start=1):
        if is_better(value, values[best], losses[i], losses[best]):
            best = i
    return best
