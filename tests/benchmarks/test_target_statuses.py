"""Every program of tools/ and benchmarks/ that states targets exits 1 when one is missed (each
missed target one stderr line), 0 when all are met, and 3 when the program itself failed (an
exception, never read as a missed target); 2 stays a usage error. k6 #1526: a load test whose
thresholds failed exited 0, and CI took it as a pass."""

import collections
import subprocess
import sys

import pytest

from benchmarks import bench_serving, common
from tests.recipes.recipe_process import REPO
from tools import soak


def _soak_result(**changes):
    """A soak result that meets every target."""
    result = {
        "requests": 90,
        "good": 72,
        "failed_good": collections.Counter(),
        "bad_5xx": 0,
        "bad_unanswered": 0,
        "cycle_rss": [300.0, 301.0, 302.5],
        "rows": [(1, 300, 40, 60), (2, 301, 40, 61), (3, 302, 39, 60)],
        "request_logs": {"files": 3, "records": 90, "cut": 0, "corrupt": 0, "empty": 0},
        "restart": {
            "logs_after_kill": {"files": 3, "records": 88, "cut": 1, "corrupt": 0, "empty": 0},
            "good_after_restart": "12 of 12",
        },
        "faults": {
            "export": [{"free": 10, "incomplete": [], "hidden": []}],
            "checkpoint": [
                {"free": 10, "hidden": [], "weights_present": True, "final_step": 6, "steps": 6}
            ],
        },
    }
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = result[key] | value
        else:
            result[key] = value
    return result


def test_a_soak_that_meets_its_targets_misses_none():
    assert soak.missed_targets(_soak_result()) == []
    assert soak.missed_targets(_soak_result(requests=0, good=0)) == [
        "0 requests, none of them a good one answered"
    ]


def test_the_reported_failing_soak_names_each_missed_target():
    """The report's run: 12 unanswered requests, RSS +40 %, 2 corrupt request logs, 0 of 12 good
    requests after the restart; it exited 0."""
    result = _soak_result(
        bad_unanswered=12,
        cycle_rss=[300.0, 420.0],
        request_logs={"files": 3, "records": 90, "cut": 0, "corrupt": 2, "empty": 0},
        restart={"good_after_restart": "0 of 12"},
    )
    assert soak.missed_targets(result) == [
        "12 bad requests unanswered (target 0)",
        "RSS after a whole cycle +40.0% of the first (target at most +5%)",
        "2 corrupt request logs at the end (target 0)",
        "0 of 12 good requests answered after the restart (target all)",
    ]


def test_every_other_soak_target_is_one_line():
    result = _soak_result(
        failed_good=collections.Counter({0: 2}),
        bad_5xx=1,
        rows=[(i, 300, 40, 60) for i in range(soak.WINDOW)] + [(9, 300, 50, 75)],
        faults={
            "crashed": "MemoryError",
            "export": [{"free": 10, "incomplete": [3], "hidden": [".3"]}],
            "checkpoint": [
                {
                    "free": 9,
                    "hidden": [".tmp"],
                    "weights_present": False,
                    "final_step": 4,
                    "steps": 6,
                }
            ],
        },
    )
    assert soak.missed_targets(result) == [
        "2 good requests failed (target 0): {0: 2}",
        "1 bad requests answered 5xx (target 0)",
        "threads 50 at the end, above the first spans' highest 40 (target: flat, within 10% + 2)",
        "file descriptors 75 at the end, above the first spans' highest 60 (target: flat, within "
        "10% + 2)",
        "the disk-faults process crashed: MemoryError",
        "an export with 10 bytes free left incomplete versions [3] and hidden ones ['.3'] "
        "(target none)",
        "training with 9 bytes free left hidden files ['.tmp'], its checkpoint's weights "
        "present False (target: whole or absent)",
        "training with 9 bytes free resumed to step 4 of 6",
    ]


def test_a_reload_run_of_bench_serving_misses_failed_requests_and_a_slow_swap():
    assert bench_serving.reload_missed({"failed": 0, "requests": 90, "p99_ratio": 1.4}, 2) == []
    assert bench_serving.reload_missed({"failed": 3, "requests": 90, "p99_ratio": 2.5}, 2) == [
        "2 clients: 3 of 90 failed",
        "2 clients: p99 inside swap windows 2.50x",
    ]
    assert bench_serving.reload_missed({"failed": 0, "requests": 9, "p99_ratio": None}, 1) == []


def test_statuses_a_missed_target_a_met_one_and_a_failed_tool(capsys):
    assert common.targets_status([], "soak") == common.TARGETS_MET == 0
    assert common.targets_status(["a", "b"], "soak") == common.TARGET_MISSED == 1
    assert capsys.readouterr().err == "soak: target missed: a\nsoak: target missed: b\n"

    def broken(argv):
        raise RuntimeError("the tool's own fault")

    assert common.failing_as_tool(broken)(["x"]) == common.TOOL_FAILED == 3
    assert "RuntimeError: the tool's own fault" in capsys.readouterr().err
    from absl import app

    def usage(argv):
        raise app.UsageError("bad flag")

    with pytest.raises(app.UsageError):
        common.failing_as_tool(usage)(["x"])


def test_a_program_that_fails_itself_exits_3_not_1(tmp_path):
    """bench_serving over a --model_dir that holds no model: its own failure is status 3, with
    its traceback."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_serving",
            f"--model_dir={tmp_path}",
            "--clients=1",
            "--seconds=1",
            "--noappend",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == common.TOOL_FAILED, done.stderr[-2000:]
    assert "Traceback" in done.stderr and "target missed" not in done.stderr
