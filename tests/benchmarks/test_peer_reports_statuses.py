"""Reports from the peers that own load and test tools' exit statuses and outputs (k6, locust,
pytest, hyperfine, wrk and load-test harnesses built on them), each checked against ours: the
statuses of `benchmarks.common` (0 every target met, 1 a target missed with one stderr line each,
3 the tool itself failed, 2 a usage error, 143 a SIGTERM), `tools.soak.missed_targets` and its
clients, `tools.fuzz_live_server`'s run and summary, `benchmarks.bench_serving`'s reload figures.

Each test names its report (repo#number) and the value it expects. A test marked xfail(strict)
is a report that shows a fault of ours; its reason says what the fault is.

`fuzz_live_server.main` runs in this process with its server, builds and attackers replaced by
fakes; a fresh Python runs only where the exit status of a real process is the point (a signal,
`run_with_targets` under absl's `app.run`)."""

import collections
import http.server
import json
import signal
import socket
import subprocess
import sys
import threading
import types

import pytest

from benchmarks import bench_serving, common
from tests.fuzz import live
from tests.recipes.recipe_process import REPO, recipe_env
from tools import fuzz_live_server, soak

# A tool run in a fresh Python through `common.run_with_targets` (absl's app.run and our flag
# parsing), its `main` doing what argv[1] says; "wait" prints "ready", then sleeps inside a
# `finally` that writes argv[2].
CHILD = """
import pathlib, sys, time
from benchmarks import common
mode, out = sys.argv[1], sys.argv[2]
def main(argv):
    common.exit_on_sigterm()
    if mode == "crash":
        raise RuntimeError("the tool's own fault")
    if mode == "missed":
        return common.targets_status(["2 of 90 failed"], "tool")
    if mode == "met":
        return common.targets_status([], "tool")
    if mode == "usage":
        from absl import app
        raise app.UsageError("give --clients")
    try:
        print("ready", flush=True)
        time.sleep(120)
    finally:
        pathlib.Path(out).write_text("stopped")
sys.argv = ["tool.py"]
common.run_with_targets(main)
"""


def _tool(mode: str, out) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, mode, str(out)],
        cwd=REPO,
        env=recipe_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finished(mode: str, out) -> tuple[int, str, str]:
    proc = _tool(mode, out)
    stdout, stderr = proc.communicate(timeout=120)
    return proc.returncode, stdout, stderr


def _signalled(sig, out) -> tuple[int, str]:
    proc = _tool("wait", out)
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    return proc.returncode, stderr


# ----------------------------------------------------------------- a failed tool, a met run
def test_pytest_993_the_tool_failing_itself_is_3_not_a_missed_target(tmp_path):
    """pytest-dev/pytest#993 (an ImportError in a plugin returned EXIT_TESTSFAILED, not
    EXIT_INTERNALERROR), pytest-dev/pytest-xdist#1017 and pytest#15047 (internal errors exited
    0). Expected: an exception out of a tool's main is status 3 with its traceback and no
    "target missed" line; a missed target is 1 with its line; all met is 0 and silent."""
    code, _, err = _finished("crash", tmp_path / "x")
    assert code == common.TOOL_FAILED == 3
    assert err.splitlines()[-1] == "RuntimeError: the tool's own fault"
    assert "Traceback (most recent call last):" in err and "target missed" not in err
    assert _finished("missed", tmp_path / "x") == (1, "", "tool: target missed: 2 of 90 failed\n")
    assert _finished("met", tmp_path / "x") == (0, "", "")


def test_locust_560_a_usage_error_is_not_a_missed_target_nor_a_failed_tool(tmp_path):
    """locustio/locust#560 (and #992): one exit status for a misconfiguration and for errors seen
    under load, so CI could not tell them apart. Expected: absl's UsageError from a tool's main is
    one line and status 2, distinct from 1 (missed) and 3 (failed)."""
    assert _finished("usage", tmp_path / "x") == (2, "", "tool.py: error: give --clients\n")
    statuses = {common.TARGETS_MET, common.TARGET_MISSED, common.TOOL_FAILED, 2, 128 + 15}
    assert statuses == {0, 1, 3, 2, 143}


# ------------------------------------------------------------------------------------ signals
def test_pytest_5243_sigterm_runs_the_finally_blocks_and_exits_143(tmp_path):
    """pytest-dev/pytest#5243: on SIGTERM pytest's finalizers did not run (resources left
    behind). Expected: a tool that called `exit_on_sigterm` runs its `finally` blocks and ends
    with status 143, no traceback, never 3 (a SIGTERM is not the tool failing)."""
    code, err = _signalled(signal.SIGTERM, tmp_path / "stopped")
    assert (code, err) == (143, "")
    assert (tmp_path / "stopped").read_text() == "stopped"


def test_codex_4721_ctrl_c_is_an_interruption_not_success(tmp_path):
    """openai/codex#4721: Ctrl-C (SIGINT) in exec mode exited 0. Expected: a tool interrupted by
    SIGINT dies by SIGINT (the shell's 130), after its `finally` blocks, neither 0, 1 nor 3."""
    code, err = _signalled(signal.SIGINT, tmp_path / "stopped")
    assert code == -signal.SIGINT
    assert err.splitlines()[-1] == "KeyboardInterrupt"
    assert (tmp_path / "stopped").read_text() == "stopped"


# ------------------------------------------------------------- fuzz_live_server, in process
class _Server:
    """Stands in for the live server process (`tests.serving.conftest.ServerProcess`)."""

    def __init__(self, flags, log_path, alive=True):
        self.proc = types.SimpleNamespace(pid=1, poll=lambda: None if alive else -9)
        self.grpc_target, self.rest_url, self.stops = "127.0.0.1:1", "http://127.0.0.1:2", 0

    def wait_serving(self):
        pass

    def stop(self):
        self.stops += 1


def _fuzz(tmp_path, monkeypatch, rounds, alive=True, requests=40):
    """`fuzz_live_server.main` over fakes: `rounds[i]` is (schemathesis's (status, output) or an
    exception to raise, the gRPC run or an exception) of round i; each round counts 10 REST cases
    and the run's gRPC requests. Returns (main's status or the exception it raised, the fake
    server, the out dir)."""
    servers = []

    def server(*a):
        servers.append(_Server(*a, alive=alive))
        return servers[-1]

    def outcome(value):
        if isinstance(value, BaseException):
            raise value
        return value

    monkeypatch.setattr(common, "exit_on_sigterm", lambda: None)  # pytest keeps its handlers
    monkeypatch.setattr(fuzz_live_server, "build", lambda base, vocab: base / "models.config")
    monkeypatch.setattr(fuzz_live_server, "ServerProcess", server)
    monkeypatch.setattr(fuzz_live_server, "_rss_bytes", lambda pid: 300 << 20)
    monkeypatch.setattr(fuzz_live_server, "_metrics_bytes", lambda s: 1000)
    monkeypatch.setattr(fuzz_live_server, "_still_answers", lambda s: 0.01)
    monkeypatch.setattr(live, "write_schemathesis_config", lambda path, *a: path)
    monkeypatch.setattr(
        live, "run_schemathesis", lambda url, cfg, n, seed: outcome(rounds[seed][0])
    )
    monkeypatch.setattr(live, "mutate_grpc", lambda t, n, seed, extra: outcome(rounds[seed][1]))
    monkeypatch.setattr("sys.argv", ["fuzz_live_server.py"])
    out = tmp_path / "out"
    argv = [f"--out={out}", f"--vocab_file={REPO / 'README.md'}", f"--requests={requests}"]
    try:
        status = common.failing_as_tool(fuzz_live_server.main)(argv)
    except SystemExit as e:
        status = e
    return status, servers[0] if servers else None, out


def _clean_round():
    return (0, "10 generated, 10 passed"), live.GrpcRun(sent=10, codes=collections.Counter(OK=10))


def _summary(out) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    del summary["seconds"]
    return summary


def test_k6_1526_a_finding_is_status_1_with_its_line(tmp_path, monkeypatch, capsys):
    """grafana/k6#1526: a run whose thresholds failed exited 0 and CI passed it. Expected: a
    schemathesis round that fails is a finding: status 1 and one stderr line "fuzz_live_server:
    target missed: finding schemathesis round 1"; a clean run is 0 with no such line."""
    status, server, out = _fuzz(tmp_path, monkeypatch, [_clean_round()] * 2)
    assert status == 0 and "target missed" not in capsys.readouterr().err
    failing = [_clean_round(), ((1, "10 generated, 9 passed, 1 failed"), _clean_round()[1])]
    status, server, out = _fuzz(tmp_path, monkeypatch, failing)
    assert status == common.TARGET_MISSED
    err = capsys.readouterr().err
    assert err == "fuzz_live_server: target missed: finding schemathesis round 1\n"
    assert _summary(out)["findings"] == ["schemathesis round 1"]


def test_k6_1526_a_server_that_died_is_a_missed_target(tmp_path, monkeypatch, capsys):
    """grafana/k6#1526 (a failed run read as a pass), the server side: the server died under the
    attack but every request batch came back. Expected: status 1, "the server died during the
    run", and server_alive false in the summary."""
    status, server, out = _fuzz(tmp_path, monkeypatch, [_clean_round()] * 2, alive=False)
    assert status == 1
    assert capsys.readouterr().err == (
        "fuzz_live_server: target missed: the server died during the run\n"
    )
    assert _summary(out)["server_alive"] is False


def test_pytest_12350_a_sigterm_mid_run_still_writes_the_summary(tmp_path, monkeypatch):
    """pytest-dev/pytest#12350 and #7087 (a SIGTERM from a CI timeout lost the junit-xml of the
    tests already run), sharkdp/hyperfine#9 (show results when interrupted). Expected: a SIGTERM
    (SystemExit 143 from `exit_on_sigterm`'s handler) in round 2 ends the run with 143, the server
    stopped, and summary.json holding round 1's counts, written whole."""
    rounds = [_clean_round(), (SystemExit(143), None)]
    status, server, out = _fuzz(tmp_path, monkeypatch, rounds)
    assert isinstance(status, SystemExit) and status.code == 143
    assert server.stops == 1
    assert _summary(out) == {
        "requests": {"rest": 10, "grpc": 10},
        "grpc_codes": {"OK": 10},
        "findings": [],
        "rss_mb": [300, 300],
        "metrics_bytes": [1000, 1000],
        "server_alive": True,
    }


def test_pytest_993_a_crash_mid_fuzz_is_3_with_the_summary(tmp_path, monkeypatch, capsys):
    """pytest-dev/pytest#993 (an internal error read as failed tests), on the fuzz: the gRPC
    attacker raising is the tool failing. Expected: status 3, its traceback, no "target missed",
    the server stopped and the summary written; an earlier run's summary is not left behind when
    the run fails before its server starts."""
    rounds = [((0, "10 generated, 10 passed"), RuntimeError("attacker broke"))]
    status, server, out = _fuzz(tmp_path, monkeypatch, rounds)
    assert status == common.TOOL_FAILED
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "RuntimeError: attacker broke" and "target missed" not in err
    assert server.stops == 1 and _summary(out)["requests"] == {"rest": 10, "grpc": 0}

    def broken_build(base, vocab):
        raise OSError("no room for the models")

    monkeypatch.setattr(fuzz_live_server, "build", broken_build)
    status = common.failing_as_tool(fuzz_live_server.main)(
        [f"--out={out}", f"--vocab_file={REPO / 'README.md'}"]
    )
    assert status == 3 and not (out / "summary.json").exists()


# ------------------------------------------------------------------------------------- soak
def _soak_result(**changes) -> dict:
    """A soak result that meets every target (tests/benchmarks/test_target_statuses.py's)."""
    logs = {"files": 3, "records": 90, "cut": 0, "corrupt": 0, "empty": 0}
    result = {
        "requests": 900,
        "good": 720,
        "failed_good": collections.Counter(),
        "bad_5xx": 0,
        "bad_unanswered": 0,
        "cycle_rss": [300.0, 301.0],
        "rows": [(1, 300, 40, 60), (2, 301, 40, 61)],
        "request_logs": logs,
        "restart": {"logs_after_kill": logs, "good_after_restart": "12 of 12"},
        "faults": {"export": [], "checkpoint": []},
    }
    return result | changes


def test_k6_6480_a_soak_that_answered_no_request_misses_a_target(capsys):
    """grafana/k6#6480: every iteration failed, zero requests were made, and k6 exited 0; the
    harness of fw-ai/benchmark#112 fails a run whose request count is 0. Expected: a soak result
    with 0 requests (0 good) is a missed target, status 1."""
    empty = _soak_result(requests=0, good=0, rows=[], cycle_rss=[])
    assert common.targets_status(soak.missed_targets(empty), "soak") == common.TARGET_MISSED


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_wrk_295_a_refused_connection_is_counted_not_a_crash():
    """wg/wrk#295 (requests falling to socket errors): wrk counts them ("Socket errors: connect
    N") and goes on. Expected: the soak's REST request to a port nobody listens on is status 0,
    "no answer", as its docstring says."""
    assert soak._rest(_closed_port(), "/v1/models/soak:predict", b"{}") == 0


class _Answers(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


def test_k6_6480_a_client_that_crashes_keeps_the_requests_it_made():
    """grafana/k6#6480: an exception inside an iteration left the iterations counted as complete.
    Expected: a soak REST client that raises on its third request (its own fault) has recorded
    its first two, each answered 200, as (good, 200, "good")."""
    picks = iter(["soak", "soak"])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fake = types.SimpleNamespace(
        server=types.SimpleNamespace(grpc="127.0.0.1:1", rest_port=server.server_address[1]),
        pick=lambda i: next(picks),  # StopIteration on the third request
        inputs=["text"],
        bad_every=1000,
    )
    calls, stop = [], types.SimpleNamespace(is_set=lambda: False)
    try:
        soak.client(fake, 1, stop, calls)
    except StopIteration:
        pass
    finally:
        server.shutdown()
        server.server_close()
    assert [(c.good, c.status, c.kind) for c in calls[:2]] == [(True, 200, "good")] * 2


def test_pytest_14063_a_missed_target_is_one_stderr_line(capsys):
    """pytest-dev/pytest#14063: the short test summary ran to 900 lines when messages held
    tracebacks; it must be one line per failure. Expected: the soak whose disk-faults child
    crashed (its stderr tail a traceback) writes exactly one line for it, "soak: target missed:
    the disk-faults process crashed: exit status 1: ..." ending with the exception, status 1."""
    tail = (
        'Traceback (most recent call last):\n  File "<string>", line 2, in <module>\nMemoryError\n'
    )
    crashed = _soak_result(faults={"crashed": f"exit status 1: {tail}"})
    assert common.targets_status(soak.missed_targets(crashed), "soak") == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("soak: target missed: the disk-faults process crashed: exit ")
    assert lines[0].endswith("MemoryError")


# ------------------------------------------------------------------ bench_serving's figures
def _calls(*spec):
    """`client_threads` records (start, end, response or error) from (start, seconds, ok)."""
    answer = types.SimpleNamespace(
        model_spec=types.SimpleNamespace(version=types.SimpleNamespace(value=3))
    )
    return [(s, s + d, answer if ok else RuntimeError("UNAVAILABLE")) for s, d, ok in spec]


def test_hyperfine_591_failed_requests_stay_out_of_the_latencies():
    """sharkdp/hyperfine#591 and #827: runs that failed were mixed into the statistics. Expected:
    bench_serving's reload summary counts a failed request (here one that took 30 s before its
    error) as failed and keeps it out of p50/p99: outside the window 100 and 200 ms answered."""
    calls = _calls((0.0, 0.1, True), (0.2, 0.2, True), (0.5, 30.0, False), (50.0, 0.1, True))
    result = bench_serving.summarize(calls, [("publish", 49.0, 51.0)])
    assert (result["requests"], result["failed"], result["versions"]) == (4, 1, [3])
    outside = result["rows"][0]
    assert outside[:3] == ("outside swap windows", 3, 1)
    assert outside[3] == pytest.approx(150.0) and outside[4] == pytest.approx(199.0)
    assert result["p99_ratio"] == pytest.approx(100.0 / 199.0)


def test_tsz_16836_no_ratio_is_made_up_for_a_side_with_no_answer():
    """tsz-org/tsz#16836: hyperfine printed "42.99 times faster" for a killed command (its ceiling
    time used as a measurement). Expected: a group whose every request failed has p50/p99 "n/a"
    and the reload run's p99 ratio is None (no target read from it); `common.ratio` of a missing
    or zero figure is "n/a"."""
    calls = _calls((0.0, 0.1, True), (10.0, 5.0, False))
    result = bench_serving.summarize(calls, [("publish", 9.0, 16.0)])
    inside = result["rows"][1]
    assert inside == ("inside swap windows", 1, 1, "n/a", "n/a")
    assert result["p99_ratio"] is None
    assert (common.ratio(None, 2.0), common.ratio(2.0, 0), common.ratio(3.0, 2.0)) == (
        "n/a",
        "n/a",
        "1.50x",
    )


def test_wrk_295_every_request_failing_is_a_missed_target():
    """wg/wrk#295: every request fell to socket errors and wrk still printed its figures and
    exited 0. Expected: a reload run whose 90 requests all failed misses its target ("2 clients:
    90 of 90 failed", status 1), the p99 target unread (no ratio)."""
    missed = bench_serving.reload_missed({"failed": 90, "requests": 90, "p99_ratio": None}, 2)
    assert missed == ["2 clients: 90 of 90 failed"]
    assert common.targets_status(missed, "bench_serving") == 1
