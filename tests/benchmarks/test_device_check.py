"""The device check's dry run (tools/device_check.py through scripts/device_check.sh): on the
CPU, tiny sizes, it writes the table with every row and column the GPU run fills in, and the rows
it runs hold numbers, not errors. Timings are never asserted."""

import os
import re
import subprocess

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
