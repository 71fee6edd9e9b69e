"""Kill a recipe with SIGKILL at a crash point (`keras_bert.faults`), rerun it with the same flags,
and check it ends as an uninterrupted run with those flags does (shared by the recipe tests)."""

import json
import signal

import numpy as np

from keras_bert.tasks import load_task
from tests.recipes.finished_run import assert_finished_run_dir
from tests.recipes.recipe_process import run_recipe

# What a resumed run may not repeat: wall-clock timings, the step it resumed from (asserted on
# its own), and an evaluation's running training loss (lost with the killed process: null).
UNREPEATABLE = frozenset(
    {
        "train_seconds",
        "predict_seconds",
        "predict_questions_per_second",
        "resumed_from_step",
        "train_loss",
    }
)


def repeatable(record):
    """metrics.json without the `UNREPEATABLE` fields, at any depth."""
    if isinstance(record, dict):
        return {k: repeatable(v) for k, v in record.items() if k not in UNREPEATABLE}
    if isinstance(record, list):
        return [repeatable(v) for v in record]
    return record


def differences(got, want, path="") -> list[str]:
    """The paths (e.g. "runs/0/epochs/1/accuracy") where two JSON records differ, with values."""
    if isinstance(got, dict) and isinstance(want, dict) and got.keys() == want.keys():
        return [d for k in got for d in differences(got[k], want[k], f"{path}/{k}")]
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        return [
            d for i, (g, w) in enumerate(zip(got, want)) for d in differences(g, w, f"{path}/{i}")
        ]
    return [] if got == want else [f"{path}: {got!r} != {want!r}"]


def assert_killed_and_resumed_like_uninterrupted(
    tmp_path, recipe: str, flags, crash_at: str, resumed_from_step: int, epochs: list, steps: int
) -> dict:
    """Runs `recipe` with `flags` uninterrupted, and killed at `crash_at` (a point before
    metrics.json is written, e.g. "evaluation:2") then rerun; asserts the
    rerun resumed at `resumed_from_step` and ended with the same metrics.json (evaluations, best,
    steps, the family's scores) and the same kept weights (best_model.keras); the uninterrupted
    run evaluated at `epochs` and trained `steps` batches. Returns its metrics.json."""
    ref, out = tmp_path / "uninterrupted", tmp_path / "killed"
    proc = run_recipe(recipe, *flags, f"--output_dir={ref}", timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    killed = run_recipe(recipe, *flags, f"--output_dir={out}", crash_at=crash_at, timeout=400)
    assert killed.returncode == -signal.SIGKILL, (crash_at, killed.stderr[-3000:])
    assert not (out / "metrics.json").exists()
    resumed = run_recipe(recipe, *flags, f"--output_dir={out}", timeout=400)
    assert resumed.returncode == 0, (crash_at, resumed.stderr[-3000:])
    assert_finished_run_dir(out)
    want = json.loads((ref / "metrics.json").read_text())
    got = json.loads((out / "metrics.json").read_text())
    assert [r["resumed_from_step"] for r in got["runs"]] == [resumed_from_step]
    assert [r["resumed_from_step"] for r in want["runs"]] == [0]
    assert [e["epoch"] for e in want["runs"][0]["epochs"]] == epochs
    assert want["runs"][0]["steps"] == steps
    assert repeatable(got) == repeatable(want), (
        crash_at,
        differences(repeatable(got), repeatable(want)),
    )
    want_weights, got_weights = load_task(ref).get_weights(), load_task(out).get_weights()
    assert len(got_weights) == len(want_weights)
    for a, b in zip(got_weights, want_weights):
        np.testing.assert_array_equal(a, b, err_msg=crash_at)
    return want
