"""Which evaluation is the best: a NaN or infinite metric never wins while a finite one exists.

Comparisons with NaN are always false, so a naive `value > best` keeps a first NaN as the best
forever, and `numpy.argmax([0.5, nan])` picks the NaN (PITFALLS: training loop). A regressor with a
constant output gives Pearson NaN; a diverged run gives an infinite loss. One rule, used within a
run (`EvaluationCallback`) and across `--num_restarts` runs (`best_index`), whose summary is the
core of metrics.json (`summarize_runs`, with `monitor_ties` when the dev metric saturated).
"""

from __future__ import annotations

import logging
import math
import statistics

logger = logging.getLogger(__name__)


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


def monitor_ties(run: dict, monitor: str) -> dict | None:
    """When several evaluations of a run share the best monitored value (a small dev set
    saturates, e.g. accuracy 1.0 from epoch 2 on): how many, and which was kept and why."""
    best = run["best"]
    if not best or not is_finite(best.get(monitor)):
        return None
    tied = [e for e in run["epochs"] if e.get(monitor) == best[monitor]]
    if len(tied) < 2:
        return None
    return {
        "value": best[monitor],
        "evaluations": len(tied),
        "epochs": [e["epoch"] for e in tied],
        "kept_epoch": best["epoch"],
        "tie_break": "the lowest dev loss, then the later evaluation",
    }


def summarize_runs(monitor: str, runs: list) -> dict:
    """metrics.json's core: per-run records, mean / std of the finite best scores, the best run.

    A run whose every evaluation was NaN or infinite is marked `"all_evaluations_non_finite":
    true` and logged; it is never the best while a run with a finite score exists. Ties between
    runs go to the lower dev loss.
    """
    scores = [r["best"][monitor] if r["best"] else None for r in runs]
    for run, score in zip(runs, scores):
        run["all_evaluations_non_finite"] = run["best"] is not None and not is_finite(score)
        if run["all_evaluations_non_finite"]:
            logger.warning(
                "run with seed %d: every dev %s was NaN or infinite (e.g. a regressor "
                "with constant output has Pearson NaN)",
                run["seed"],
                monitor,
            )
        ties = monitor_ties(run, monitor)
        if ties:
            run["monitor_ties"] = ties
            logger.warning(
                "dev %s was %s at %d evaluations (epochs %s): the dev set cannot tell "
                "them apart; kept epoch %s, the lowest dev loss",
                monitor,
                ties["value"],
                ties["evaluations"],
                ties["epochs"],
                ties["kept_epoch"],
            )
    finite = [float(s) for s in scores if is_finite(s)]
    losses = [(r["best"] or {}).get("loss") for r in runs]
    best_run = best_index(scores, losses)
    return {
        "monitor": monitor,
        "runs": runs,
        "mean": float(statistics.fmean(finite)) if finite else float("nan"),
        "std": float(statistics.stdev(finite)) if len(finite) > 1 else 0.0,
        "best_run": best_run,
        "best": runs[best_run]["best"],
        "monitor_ties": runs[best_run].get("monitor_ties"),
        "all_evaluations_non_finite": bool(runs[0]["best"] is not None and not finite),
    }
