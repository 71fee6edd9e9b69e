"""tools/soak.py at a CI size: about 20 s of 4 clients (gRPC and REST, good and bad
requests) on a tiny core-op model while every event of the cycle runs (version swap, config
reload adding and removing a model, a version that fails to load, the serving version's directory
deleted, request logs rotated on a full disk), disk-full faults during an export and a training
run (a child process), then a SIGKILL as the server applies a changed config file and a restart.

The small disks are tmpfs mounts where the test may mount (root), else RLIMIT_FSIZE: what must
hold is the same. Latencies and memory are reported, never asserted (SPEC section 10)."""

import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from tests.recipes.recipe_process import REPO
from tools import soak
from tests.serving import saved_models


@pytest.mark.slow
def test_small_soak_fails_no_good_request_and_every_fault_leaves_whole_files(tmp_path):
    saved_models.build_classifier(str(tmp_path / "model"), seed=0)
    kind = soak.disk_kind("auto")
    # tmpfs: room for two checkpoints and not a third (the run stops at step 3, the checkpoint of
    # step 2 on disk); fsize: no checkpoint fits (it stops at step 1, nothing on disk).
    multiple = 2.5 if kind == "tmpfs" else 0.5
    result = soak.run_soak(
        tmp_path / "model",
        tmp_path / "run",
        minutes=0.3,
        clients=4,
        interval_s=0.5,
        poll_s=0.3,
        sample_s=5.0,
        disk=kind,
        export_fractions=(0.5,),
        checkpoint_multiples=(multiple,),
        log_disk_bytes=64 << 10,  # full within a second of traffic, whatever the machine's pace
    )
    assert result["good"] > 0 and dict(result["failed_good"]) == {}
    assert result["bad_5xx"] == 0 and result["bad_unanswered"] == 0
    # Every target the run states holds, but memory's (reported, never asserted, at this size).
    memory = ("RSS", "threads", "file descriptors")
    assert [m for m in soak.missed_targets(result) if not m.startswith(memory)] == []
    answered = {k for k, _ in result["bad_status"]}
    assert answered == set(soak.BAD_GRPC) | set(soak.BAD_REST)
    assert all(400 <= status < 500 for _, status in result["bad_status"])
    assert set(result["events"]) == set(soak.EVENTS)
    assert result["rows"] and all(row[7] == 0 and row[9] == 0 for row in result["rows"])

    # Every request log file reads to its last complete record, before and after the SIGKILL.
    for logs in (result["request_logs"], result["restart"]["logs_after_kill"]):
        assert logs["corrupt"] == 0 and logs["records"] > 0
    full = "No space left on device" if kind == "tmpfs" else "File too large"
    assert any(
        line.startswith("request log of model soak: cannot write") and full in line
        for line in result["server_errors"]
    )
    assert any(
        "failed to load soak version N: DecodeError" in line for line in result["server_errors"]
    )
    restart = result["restart"]
    assert set(restart["models"]) - {soak.SECOND} == {soak.MODEL, soak.EXPORTED, soak.KILLED}
    n = len(restart["models"]) * len(soak.SENTENCES)
    assert restart["good_after_restart"] == f"{n} of {n}"

    # The export with half its room fails with the disk's error and publishes nothing; with the
    # room back the next one publishes version 2. No staging directory is left, no version is
    # incomplete, and the server loaded every version it saw.
    faults = result["faults"]
    first, last = faults["export"]
    assert full in first["outcome"] and first["versions"] == [1]
    assert last["outcome"] == "published 2" and last["versions"] == [1, 2]
    for attempt in faults["export"]:
        assert attempt["incomplete"] == [] and attempt["hidden"] == []
    assert result["exported_states"] == {2: "AVAILABLE", 1: "END"}

    # The training run stops at a checkpoint save with one OSError; what is on disk is a
    # complete checkpoint or none, and the rerun resumes from it to the end.
    (attempt,) = faults["checkpoint"]
    assert attempt["outcome"].startswith(f"OSError: [Errno {28 if kind == 'tmpfs' else 27}] ")
    assert "ckpt-" in attempt["outcome"] and attempt["outcome"].endswith(" MiB")
    assert attempt["weights_present"] and attempt["hidden"] == []
    assert attempt["resumed_from"] == (attempt["state_step"] or 0)
    assert attempt["final_step"] == 6
    assert attempt["state_step"] == (2 if kind == "tmpfs" else None)

    text = soak.report(result)
    assert "| minute | RSS MiB | threads | fds |" in text
    assert len(result["cycle_rss"]) >= 1 and all(rss > 0 for rss in result["cycle_rss"])
    assert f"RSS after each whole cycle of events ({len(result['cycle_rss'])} cycles)" in text
    assert "failed good 0 (target 0)" in text and "answered 5xx 0 (target 0)" in text


def test_sigterm_runs_the_cleanup(tmp_path):
    """A soak stopped by SIGTERM (a timeout, a scheduler) runs its `finally` blocks, where the
    small disks are unmounted and the server stopped: here a small disk's `close` is seen to run
    (a tmpfs mount where this may mount, as root, is also gone from /proc/mounts)."""
    disk, closed = tmp_path / "disk", tmp_path / "closed"
    code = (
        "import pathlib, sys, time; from benchmarks import common; from tools import soak\n"
        "common.exit_on_sigterm()\n"
        "disk = soak.SmallDisk(sys.argv[1], soak.disk_kind('auto'), 1 << 20)\n"
        "try:\n"
        "    print(disk.kind, flush=True); time.sleep(60)\n"
        "finally:\n"
        "    disk.close(); pathlib.Path(sys.argv[2]).write_text('closed')\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(disk), str(closed)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        kind = proc.stdout.readline().strip()
        assert kind in ("tmpfs", "fsize")
        assert (str(disk) in pathlib.Path("/proc/mounts").read_text()) == (kind == "tmpfs")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    assert closed.read_text() == "closed"
    assert str(disk) not in pathlib.Path("/proc/mounts").read_text()


def children_of(pid: int) -> list[int]:
    return [
        int(p.name)
        for p in pathlib.Path("/proc").iterdir()
        if p.name.isdigit()
        and (p / "stat").exists()
        and int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid
    ]


def cmdline(pid: int) -> str:
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


@pytest.mark.slow
def test_sigterm_during_the_disk_faults_stops_their_child_before_the_disk_goes(tmp_path):
    """The disk-faults child must not outlive the run: once its small disk is unmounted it would
    write into the directory under the mount (and size its fills from that file system)."""
    saved_models.build_classifier(str(tmp_path / "model"), seed=0)
    code = (
        "import pathlib, sys; from benchmarks import common; from tools import soak\n"
        "common.exit_on_sigterm()\n"
        "work = pathlib.Path(sys.argv[1])\n"
        "soak.run_soak(work / 'model', work / 'run', minutes=5, clients=1, interval_s=5,\n"
        "    poll_s=0.5, sample_s=60, export_fractions=(0.5,), checkpoint_multiples=(0.5,))\n"
    )
    run = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=REPO)
    child = None
    try:
        for _ in range(1200):  # the server starts, then the child
            found = [p for p in children_of(run.pid) if "soak.disk_faults" in cmdline(p)]
            if found:
                child = found[0]
                break
            assert run.poll() is None, "the soak ended before its disk-faults child started"
            time.sleep(0.1)
        assert child is not None
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=120) == 128 + signal.SIGTERM
        assert cmdline(child) == ""  # gone (killed and reaped) before the run ended
    finally:
        run.kill()
        if child is not None and cmdline(child):
            os.kill(child, signal.SIGKILL)
