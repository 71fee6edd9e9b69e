"""What every fine-tuning recipe leaves and prints when a run ends (shared by the recipe tests)."""

import json
import pathlib
import pickle
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


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


def served_in_fresh_process(tmp_path, name: str, version_dir, calls: dict, env: dict) -> dict:
    """Loads an exported version with plain TensorFlow in a fresh interpreter
    (tests/export/_load_and_call.py) and makes `calls` ({label: ("signature", key, inputs)});
    returns what it answered ({"modules": ..., name: {"calls": {label: outputs}}})."""
    spec, result = tmp_path / "spec.pkl", tmp_path / "result.pkl"
    spec.write_bytes(pickle.dumps({name: {"dir": str(version_dir), "calls": calls}}))
    loader = REPO / "tests" / "export" / "_load_and_call.py"
    proc = subprocess.run(
        [sys.executable, "-I", str(loader), str(spec), str(result)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return pickle.loads(result.read_bytes())
