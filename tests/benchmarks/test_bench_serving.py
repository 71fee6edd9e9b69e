"""benchmarks/bench_serving.py: the buckets scenario's workload and batching file, the harness's
model config file, and the reload scenario at a CI size on a tiny model. Figures are reported,
never asserted (SPEC section 10); the clients, buckets and squad loads start a server per arm,
too long for CI, and are run by hand (the module docstring). Also: a server the harness starts
does not outlive a SIGTERM to its program, and the scenarios' flags are refused in one line."""

import dataclasses
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmarks import bench_serving as bench
from benchmarks import serving_harness
from serving import server
from serving.dispatch.batching import BatchingOptions, parse_batching_parameters
from tests.recipes.recipe_process import REPO, refusal_lines
from tests.serving import saved_models

# A program that starts a server on a model with no version (never AVAILABLE) and waits for it.
WAITS_FOR_A_SERVER = """
import pathlib, sys
from benchmarks import serving_harness as h
work = pathlib.Path(sys.argv[1])
(work / "models" / "empty").mkdir(parents=True)
flag = h.config_flag(work / "models.config", [h.model_config("empty", work / "models" / "empty")])
server = h.ServerProcess([flag], work / "server.log")
print(server.proc.pid, flush=True)
server.wait_available("empty")
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_while_a_server_starts_stops_the_server_too(tmp_path):
    program = subprocess.Popen(
        [sys.executable, "-c", WAITS_FOR_A_SERVER, str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    server_pid = int(program.stdout.readline())
    try:
        time.sleep(1.0)  # the server is starting (importing TensorFlow)
        assert alive(server_pid)
        program.send_signal(signal.SIGTERM)
        assert program.wait(timeout=120) == 128 + signal.SIGTERM
        assert not alive(server_pid)  # stopped and reaped before the program ended
    finally:
        program.kill()
        if alive(server_pid):
            os.kill(server_pid, signal.SIGKILL)


@pytest.mark.parametrize(
    "args, refusal",
    [
        (["--clients=0"], "flag --clients=['0']: must be whole numbers >= 1"),
        (
            ["--scenario=reload", "--clients="],
            "--scenario=reload needs at least one --clients count",
        ),
        (
            ["--model_dir=.", "--max_seq_length=64"],
            "--max_seq_length is the default export's; --model_dir has its own",
        ),
        (["--model_dir=nowhere"], "flag --model_dir=nowhere: no such file or directory"),
    ],
)
def test_scenario_flags_that_cannot_run_are_refused_in_one_line(args, refusal):
    lines = refusal_lines("benchmarks.bench_serving", *args)
    assert lines == [f"bench_serving.py: error: {refusal}"]


def test_workload_mixes_long_texts_in():
    sentences = ["a b c", "d e", "f g h i"]
    texts = bench.workload(sentences, 0.25, 10, 16)
    assert len(texts) == 16
    longs = [t for t in texts if len(t.split()) >= 10]
    assert len(longs) == 4 and sorted(set(texts) - set(longs)) == sentences


def test_batching_file_parses_as_the_server_reads_it(tmp_path):
    def parsed(work, buckets):
        flags = serving_harness.batching_flags(work, 8, 2000, 2, (4, 8), buckets)
        assert flags == ["--enable_batching", f"--batching_parameters_file={work}/batching.config"]
        return parse_batching_parameters((work / "batching.config").read_text())

    want = BatchingOptions(
        max_batch_size=8,
        batch_timeout_micros=2000,
        num_batch_threads=2,
        max_enqueued_batches=1000,
        allowed_batch_sizes=(4, 8),
    )
    assert parsed(tmp_path / "padded", ()) == want
    bucketed = parsed(tmp_path / "bucketed", (8, 16))
    assert bucketed == dataclasses.replace(want, length_buckets=(8, 16))


def test_config_flag_writes_what_the_server_reads(tmp_path):
    configs = [serving_harness.model_config("a", tmp_path / "a")]
    configs.append(serving_harness.model_config("b", tmp_path / "b", version=2))
    flag = serving_harness.config_flag(tmp_path / "models.config", configs)
    assert flag == f"--model_config_file={tmp_path}/models.config"
    a, b = server.model_configs(model_config_file=str(tmp_path / "models.config"))
    assert a.name == "a" and a.base_path == str(tmp_path / "a")
    assert a.model_version_policy.latest.num_versions == 1
    assert b.name == "b" and list(b.model_version_policy.specific.versions) == [2]
    # Rewritten whole, by a rename (a new inode), for a server that polls the file
    inode = (tmp_path / "models.config").stat().st_ino
    serving_harness.config_flag(tmp_path / "models.config", configs[1:])
    assert (tmp_path / "models.config").stat().st_ino != inode
    assert [c.name for c in server.model_configs(model_config_file=flag.split("=", 1)[1])] == ["b"]
    assert [p.name for p in tmp_path.iterdir()] == ["models.config"]


def test_small_reload_run_fails_no_request(tmp_path):
    """A few seconds of 4 closed-loop gRPC clients while versions are published and removed and
    the config is reloaded (a model added, then removed): no request may fail."""
    saved_models.build_classifier(str(tmp_path / "model"), seed=0)
    timing = {"seconds": 1.0, "interval_s": 0.2, "poll_s": 0.2, "window_margin_s": 0.2}
    result = bench.reload_run(tmp_path / "model", 4, tmp_path / "run", **timing)
    assert result["requests"] > 0 and result["failed"] == 0
    assert result["events"][: len(bench.EVENTS)] == list(bench.EVENTS)
    publishes = result["events"].count("publish")
    assert set(result["versions"]) <= set(range(1, publishes + 2))  # only versions it published
    rows = {group: (count, failed) for group, count, failed, _, _ in result["rows"]}
    inside, outside = rows["inside swap windows"][0], rows["outside swap windows"][0]
    assert inside + outside == result["requests"]
    assert inside == sum(rows[f"inside: {kind}"][0] for kind in dict.fromkeys(bench.EVENTS))
    text = bench.reload_report(result)
    assert f"Failed requests: 0 of {result['requests']} (target 0)" in text
    assert "| inside swap windows |" in text


def test_publish_copies_a_version_from_a_uri(tmp_path):
    """--model_dir may be in an object store (ram:// here, TensorFlow's in-memory file system):
    `publish` copies it through keras_bert.fileio and renames it into place."""
    from keras_bert import fileio

    source = "ram://bench_serving_publish/model/1"
    fileio.write_text(f"{source}/saved_model.pb", "graph")
    fileio.makedirs(f"{source}/variables")  # ram:// lists only the directories made
    fileio.write_text(f"{source}/variables/variables.index", "index")
    serving_harness.publish(source, tmp_path, 3)
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["3/saved_model.pb", "3/variables/variables.index"]
    assert (tmp_path / "3" / "saved_model.pb").read_text() == "graph"
