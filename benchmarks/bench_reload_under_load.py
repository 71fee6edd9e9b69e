"""Reloads under load: requests dropped and latency while versions and configs change.

`--clients` closed-loop gRPC clients (threads, one channel each) send Predict to one model of a
`python -m serving.server` (no version: the newest AVAILABLE one) for at least `--seconds`, while
a controller, every `--interval_s`, runs the next event of this cycle:
1. publish: a new version directory appears (copied under a temporary name, then renamed, as
   `python -m export` publishes); the server (polling every `--poll_s`) loads it and, with the
   default `latest { num_versions: 1 }` policy, unloads the previous one, whose directory is then
   deleted (old versions removed);
2. reload, add: HandleReloadConfigRequest with a config that adds a second model (loaded, warmup
   included, before the call returns) beside the unchanged first one;
3. publish again;
4. reload, remove: the second model is taken out again (it unloads in the background).
The run goes on until `--seconds` have passed and at least one whole cycle is done.

A swap window is an event's span (publish: from the rename until the new version is AVAILABLE and
the old one unloaded, read by polling GetModelStatus every 20 ms; reload: the call) plus
`--window_margin_s`. A request is inside a window when its [send, answer] interval overlaps one.
Reported: requests, failed requests (any gRPC error: the target is 0) and p50 / p99 latency,
outside and inside the windows and by event kind, and the ratio of p99 inside to outside (target:
at most 2x). Clients and server share the machine's cores.

The model is a copy of `--model_dir` (a SavedModel version directory, e.g. from
`python -m export`); without it the MiniLM-L6 classifier (real weights, a fixed random 2-class
head) is exported once to a temporary directory, as benchmarks/bench_serving.py does. String
inputs of `serving_default` get a sentence (`text`) or "" (others).

The full run (to be recorded on a quiet machine; appends a section to docs/results/serving.md):

    python -m benchmarks.bench_reload_under_load --clients=16 --seconds=120 --interval_s=5

The CI-sized run (tests/benchmarks/test_bench_reload_under_load.py, a few seconds, asserts 0
failed requests) uses a tiny core-op model and `--clients=4 --seconds=1 --interval_s=0.2`.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import pathlib
import shutil
import tempfile
import time

from absl import app, flags

from benchmarks import common
from benchmarks.common import Controller  # also tools/soak.py's

MODEL_NAME, SHADOW_NAME = "bench_reload", "bench_reload_shadow"
EVENTS = ("publish", "reload: add model", "publish", "reload: remove model")
SENTENCES = [
    "a gripping, funny film",
    "the plot never quite comes together, and the second half drags on far too long",
    "fine",
    "an uneven but often rewarding piece of work whose best moments stay with you for days",
]


@dataclasses.dataclass
class Call:
    start: float  # time.perf_counter() at send
    end: float  # at the answer (or error)
    ok: bool
    version: int  # the version that answered (0 on error)


@dataclasses.dataclass
class Window:
    kind: str  # one of EVENTS
    start: float
    end: float  # the event's end plus the margin


def publish(source: pathlib.Path, base: pathlib.Path, version: int) -> None:
    """Copies `source` to `base/.tmp-<version>`, then renames it to `base/<version>` (atomic)."""
    staged = base / f".tmp-{version}"
    shutil.copytree(source, staged)
    staged.rename(base / str(version))


def model_config(name: str, base: pathlib.Path):
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelConfig(
        name=name, base_path=str(base), model_platform="tensorflow"
    )
    config.model_version_policy.latest.num_versions = 1
    return config


class Server(common.ServerProcess):
    """`python -m serving.server` on a free port serving MODEL_NAME from `base` through a model
    config file (so that reloads may change it), polling every `poll_s` (`extra`: more flags)."""

    def __init__(self, base: pathlib.Path, work: pathlib.Path, poll_s: float, *extra: str):
        from google.protobuf import text_format
        from tensorflow_serving.config import model_server_config_pb2

        config = model_server_config_pb2.ModelServerConfig()
        config.model_config_list.config.append(model_config(MODEL_NAME, base))
        (work / "models.config").write_text(text_format.MessageToString(config))
        flags_ = [f"--model_config_file={work / 'models.config'}"]
        super().__init__(
            [*flags_, f"--file_system_poll_wait_seconds={poll_s}", *extra], work / "server.log"
        )


def string_inputs(address: str) -> list:
    """The string input names of MODEL_NAME's serving_default signature."""
    import grpc
    from tensorflow_serving.apis import (
        get_model_metadata_pb2,
        prediction_service_pb2_grpc,
    )

    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = MODEL_NAME
    with grpc.insecure_channel(address) as channel:
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).GetModelMetadata(
            request, timeout=30
        )
    signatures = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signatures)
    inputs = signatures.signature_def["serving_default"].inputs
    return sorted(name for name, info in inputs.items() if info.dtype == 7)  # DT_STRING


def run_events(
    controller: Controller,
    server: Server,
    source: pathlib.Path,
    base: pathlib.Path,
    shadow_base: pathlib.Path,
    stop_at: float,
    interval_s: float,
    margin_s: float,
) -> list:
    """Runs EVENTS in a cycle, `interval_s` apart, until `stop_at` (perf_counter) has passed and
    one whole cycle is done. Returns the Windows."""
    windows, version, n = [], 1, 0
    while n < len(EVENTS) or time.perf_counter() < stop_at:
        time.sleep(interval_s)
        kind = EVENTS[n % len(EVENTS)]
        start = time.perf_counter()
        if kind == "publish":
            version += 1
            publish(source, base, version)
            controller.wait(
                MODEL_NAME,
                lambda s, v=version: s.get(v) == "AVAILABLE" and s.get(v - 1) in (None, "END"),
                proc=server.proc,
            )
            end = time.perf_counter()
            shutil.rmtree(base / str(version - 1))
        else:
            configs = [model_config(MODEL_NAME, base)]
            if kind == "reload: add model":
                configs.append(model_config(SHADOW_NAME, shadow_base))
            controller.reload(configs)
            end = time.perf_counter()
        windows.append(Window(kind, start, end + margin_s))
        n += 1
    time.sleep(interval_s)  # a last quiet stretch
    return windows


def inside(call: Call, windows: list):
    """The first window the call's [start, end] overlaps, or None."""
    return next((w for w in windows if call.start <= w.end and call.end >= w.start), None)


def summarize(calls: list, windows: list) -> dict:
    """{"rows": [(group, requests, failed, p50 ms, p99 ms)], "failed": int, "requests": int,
    "p99_ratio": p99 inside / p99 outside (None if a side has no successful call),
    "versions": sorted versions that answered, "events": [kinds done]}."""
    groups = {"outside swap windows": [], "inside swap windows": []}
    for kind in dict.fromkeys(EVENTS):
        groups[f"inside: {kind}"] = []
    for call in calls:
        window = inside(call, windows)
        if window is None:
            groups["outside swap windows"].append(call)
        else:
            groups["inside swap windows"].append(call)
            groups[f"inside: {window.kind}"].append(call)
    rows, p99 = [], {}
    for group, members in groups.items():
        ok = [c.end - c.start for c in members if c.ok]
        p50_ms = common.percentile(ok, 50) * 1e3 if ok else None
        p99[group] = common.percentile(ok, 99) * 1e3 if ok else None
        failed = sum(not c.ok for c in members)
        rows.append((group, len(members), failed, p50_ms, p99[group]))
    out, into = p99["outside swap windows"], p99["inside swap windows"]
    return {
        "rows": rows,
        "requests": len(calls),
        "failed": sum(not c.ok for c in calls),
        "p99_ratio": into / out if out and into else None,
        "versions": sorted({c.version for c in calls if c.ok}),
        "events": [w.kind for w in windows],
    }


def run_benchmark(
    model_dir: pathlib.Path,
    clients: int,
    seconds: float,
    interval_s: float,
    poll_s: float,
    margin_s: float,
    work: pathlib.Path,
) -> dict:
    """The whole measurement in `work` (a fresh directory); returns `summarize`'s dict."""
    import grpc

    base, shadow_base = work / "models" / MODEL_NAME, work / "models" / SHADOW_NAME
    base.mkdir(parents=True)
    shadow_base.mkdir(parents=True)
    publish(model_dir, base, 1)
    publish(model_dir, shadow_base, 1)
    server = Server(base, work, poll_s)
    controller = Controller(server.address)
    windows, begin = [], []

    def make_call(k):  # client k sends SENTENCES in turn from the k-th
        stub = common.predict_stub(server.address)
        mine = itertools.cycle(requests[k % len(requests) :] + requests[: k % len(requests)])
        return lambda: stub.Predict(next(mine), timeout=60).model_spec.version.value

    def during():
        time.sleep(1.0)  # warm-up: channels, first calls
        begin.append(time.perf_counter())
        windows.extend(
            run_events(
                controller,
                server,
                model_dir,
                base,
                shadow_base,
                begin[0] + seconds,
                interval_s,
                margin_s,
            )
        )

    try:
        controller.wait(MODEL_NAME, lambda s: s.get(1) == "AVAILABLE", proc=server.proc)
        names = string_inputs(server.address)
        requests = [
            common.predict_request(MODEL_NAME, {n: [t if n == "text" else ""] for n in names})
            for t in SENTENCES
        ]
        records = common.client_threads(make_call, clients, during, tolerate=(grpc.RpcError,))
    except RuntimeError as e:
        raise RuntimeError(f"{e}\nserver log:\n{server.log_tail()}") from None
    finally:
        controller.close()
        server.stop()
    calls = [
        Call(s, e, not isinstance(r, Exception), 0 if isinstance(r, Exception) else r)
        for s, e, r in records
    ]
    return summarize([c for c in calls if c.start >= begin[0]], windows)


def report(result: dict) -> str:
    table = common.markdown_table(
        ["requests", "count", "failed", "p50 ms", "p99 ms"],
        [
            (g, n, f, "n/a" if p50 is None else p50, "n/a" if p99 is None else p99)
            for g, n, f, p50, p99 in result["rows"]
        ],
    )
    ratio = result["p99_ratio"]
    counts = collections.Counter(result["events"])
    events = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    return (
        f"{table}\n\nFailed requests: {result['failed']} of {result['requests']} (target 0). "
        f"p99 inside / outside swap windows: {'n/a' if ratio is None else f'{ratio:.2f}x'} "
        f"(target at most 2x). Events: {events}. Versions that answered: "
        f"{result['versions']}.\n"
    )


TOPIC = "serving"
FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string(
        "model_dir", None, "SavedModel version dir to serve (default: export MiniLM-L6)."
    )
    flags.DEFINE_integer("clients", 16, "Closed-loop gRPC clients (threads).", lower_bound=1)
    flags.DEFINE_float("seconds", 120.0, "Least measured duration (after 1 s of warm-up).")
    flags.DEFINE_float("interval_s", 5.0, "Quiet seconds before each event.", lower_bound=0)
    flags.DEFINE_float("poll_s", 0.5, "The server's --file_system_poll_wait_seconds.")
    flags.DEFINE_float(
        "window_margin_s", 0.5, "Seconds a swap window lasts after its event.", lower_bound=0
    )
    flags.DEFINE_bool("append", True, common.append_help(TOPIC))


def main(argv):
    del argv
    desc = common.machine_description(["grpcio", "tensorflow"])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        model_dir = common.served_model_dir(FLAGS.model_dir, tmp / "export")
        result = run_benchmark(
            model_dir,
            FLAGS.clients,
            FLAGS.seconds,
            FLAGS.interval_s,
            FLAGS.poll_s,
            FLAGS.window_margin_s,
            tmp / "run",
        )
    body = report(result) + (
        f"\n{FLAGS.clients} clients, at least {FLAGS.seconds:g} s, an event every "
        f"{FLAGS.interval_s:g} s, server poll {FLAGS.poll_s:g} s, window margin "
        f"{FLAGS.window_margin_s:g} s; model: "
        f"{common.served_model_name(FLAGS.model_dir)}.\n"
    )
    common.report(TOPIC, "Reload under load", body, desc, FLAGS.append)
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    define_flags()
    app.run(main)
