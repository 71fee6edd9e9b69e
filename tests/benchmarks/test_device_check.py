"""The device check's dry run (tools/device_check.py through scripts/device_check.sh): on the
CPU, tiny sizes, it writes the table with every row and column the GPU run fills in, and the rows
it runs hold numbers, not errors. Timings are never asserted."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO_ROOT

COLUMNS = ["measurement", "contender", "precision", "XLA", "result", "unit", "seconds", "note"]
NUMBER = re.compile(r"^[\d,]+(\.\d+)?$")


def _table(text: str) -> list[dict]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == COLUMNS, header
    assert set(lines[1]) <= set("|-"), lines[1]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert all(len(r) == len(COLUMNS) for r in rows), rows
    return [dict(zip(COLUMNS, r)) for r in rows]


def _find(rows, measurement, contender, precision="-", xla="-"):
    found = [
        r
        for r in rows
        if (r["measurement"], r["contender"], r["precision"], r["XLA"])
        == (measurement, contender, precision, xla)
    ]
    assert len(found) == 1, (measurement, contender, precision, xla, found)
    return found[0]


@pytest.mark.slow
def test_the_dry_run_writes_every_row_and_column_of_the_table(tmp_path):
    output = tmp_path / "nested" / "device_check.md"
    env = dict(os.environ, PY=os.environ.get("PY", ".venv/bin/python"))
    proc = subprocess.run(
        ["bash", "scripts/device_check.sh", "--dry_run", f"--output={output}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = output.read_text()
    assert text.startswith("# Device check (DRY RUN on the CPU"), text[:200]
    assert "finished in" in text and "--dry_run" in text
    rows = _table(text)

    assert _find(rows, "device", "GPU")["result"] == "none visible to TensorFlow"
    assert _find(rows, "device", "CPU")["result"]
    assert "CUDA" in _find(rows, "build", "tensorflow")["note"]
    tests = [r for r in rows if r["measurement"] == "gpu test"]
    assert len(tests) >= 3 and all(r["result"] == "skipped" for r in tests), tests
    assert all("needs a GPU" in r["note"] for r in tests)

    for precision in ("float32", "mixed_float16", "mixed_bfloat16"):
        for xla in ("on", "off"):
            row = _find(rows, "fine-tuning", "ours", precision, xla)
            assert row["result"].startswith("not run in the dry run") or NUMBER.match(
                row["result"]
            ), row
    ran = _find(rows, "fine-tuning", "ours", "mixed_float16", "off")
    assert NUMBER.match(ran["result"]) and ran["unit"].startswith("examples/s"), ran
    assert "LossScaleOptimizer" in ran["note"], ran
    for precision, xla in [("float32", "on"), ("mixed_float16", "on"), ("mixed_bfloat16", "on")]:
        for shape in ("encoder 4 x 16", "encoder 1 x 8"):
            _find(rows, shape, "ours", precision, xla)
    assert NUMBER.match(_find(rows, "encoder 4 x 16", "ours", "float32", "off")["result"])
    assert _find(rows, "encoder 4 x 16", "ours", "float32", "off")["unit"] == "sequences/s"
    assert _find(rows, "encoder 1 x 8", "ours", "float32", "off")["unit"] == "ms p50"
    mirrored = _find(
        rows, "fine-tuning", "ours, MirroredStrategy (1 replica)", "mixed_bfloat16", "off"
    )
    assert NUMBER.match(mirrored["result"]), mirrored

    for peer in ("keras-hub", "pytorch"):
        peer_rows = [r for r in rows if r["contender"] == peer]
        assert peer_rows, peer
        skipped = [r for r in peer_rows if r["result"].startswith("skipped: not installed")]
        if not skipped:  # installed: its float32 rows ran
            measured = [r for r in peer_rows if r["precision"] == "float32"]
            assert len(measured) == 3 and all(NUMBER.match(r["result"]) for r in measured), measured


def _children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(c) for c in f.read().split()]
    return found


@pytest.mark.slow
def test_a_sigterm_stops_the_pytest_child_and_the_table_says_so(tmp_path):
    """SIGTERM while the `gpu` tests run in their child: the child is gone when the run ends
    (exit 143), and the table, written whole, says the measurement stopped: SIGTERM."""
    output = tmp_path / "device_check.md"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tools.device_check",
            "--dry_run",
            "--nopeers",
            f"--output={output}",
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline, children = time.monotonic() + 60, []
        while time.monotonic() < deadline and not children and proc.poll() is None:
            time.sleep(0.2)
            running = output.exists() and "| pytest -m gpu | - | - | running" in output.read_text()
            children = _children(proc.pid) if running else []
        assert children, "the gpu tests' child never started"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143, proc.stderr.read()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not [c for c in children if os.path.exists(f"/proc/{c}")], children
    text = output.read_text()
    assert "(SIGTERM)" in text.splitlines()[3], text
    assert _find(_table(text), "gpu tests", "pytest -m gpu")["result"] == "stopped: SIGTERM"


def test_a_table_cell_holds_no_terminal_escape():
    """Keras's wrapped exceptions carry colours; a cell keeps their words only (the module is
    run in its own process: importing it defines its flags)."""
    cell = "\x1b[1m\x1b[31mValueError:\x1b[0m bad | \x1b]8;;u\x07link\x1b]8;;\x07\n  x"
    code = f"from tools.device_check import _cell; print(repr(_cell({cell!r})))"
    got = subprocess.check_output([sys.executable, "-c", code], cwd=REPO_ROOT, text=True)
    assert got.strip() == repr("ValueError: bad / link x")
