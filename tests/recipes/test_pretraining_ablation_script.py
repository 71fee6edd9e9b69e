"""scripts/pretraining_ablation.sh refuses bad settings before any work (no files written)."""

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "env, message",
    [
        ({"VARIANTS": "full bogus"}, "unknown variant bogus (use full, no_nsp, ltr, none)"),
        ({"FT_POOLING": "max"}, "FT_POOLING must be cls or mean, got max"),
    ],
)
def test_bad_settings_fail_before_any_work(tmp_path, env, message):
    work = tmp_path / "work"
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "pretraining_ablation.sh")],
        env=dict(os.environ, WORK_DIR=str(work), **env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not work.exists()
