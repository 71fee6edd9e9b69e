"""What every fine-tuning recipe leaves and prints when a run ends (shared by the recipe tests)."""
import json


def assert_finished_run_dir(out) -> None:
    """The best weights kept once (best_model.keras); the step checkpoints and best.weights.h5
    deleted; checkpoint.json records the run as complete."""
    assert (out / "best_model.keras").is_file() and not (out / "best.weights.h5").exists()
    assert not list((out / "checkpoints").glob("*.weights.h5"))
    state = json.loads((out / "checkpoints" / "checkpoint.json").read_text())
    assert state["complete"] is True and state["weights"] is None


def result_line(stdout: str) -> str:
    """The one line a finished recipe prints about its result (no JSON dump on stdout)."""
    assert "{" not in stdout, stdout
    lines = [line for line in stdout.splitlines() if "(all metrics: " in line]
    assert len(lines) == 1, stdout
    return lines[0]
