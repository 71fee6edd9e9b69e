"""Reloads under load: requests dropped and latency while versions and configs change.

`--clients` closed-loop gRPC clients send Predict to a `python -m serving.server` while, every
`--interval_s`, a version is published (the old one unloaded and deleted) or a config reload adds
or removes a second model; reported: failed requests and p50 / p99 inside and outside the swap
windows (method: docs/results/serving.md, "Method"). The model is `--model_dir`, default the
MiniLM-L6 classifier exported to a temporary directory. The full run (appends to
docs/results/serving.md):

    python -m benchmarks.bench_reload_under_load --clients=16 --seconds=120 --interval_s=5

tests/benchmarks/test_bench_reload_under_load.py runs it at a CI size (0 failed requests).
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import shutil
import tempfile
import time

from absl import app, flags

from benchmarks import common, serving_harness

MODEL_NAME, SHADOW_NAME = "bench_reload", "bench_reload_shadow"
EVENTS = ("publish", "reload: add model", "publish", "reload: remove model")
SENTENCES = [
    "a gripping, funny film",
    "the plot never quite comes together, and the second half drags on far too long",
    "fine",
    "an uneven but often rewarding piece of work whose best moments stay with you for days",
]


@dataclasses.dataclass
class Window:
    kind: str  # one of EVENTS
    start: float
    end: float  # the event's end plus the margin


def summarize(calls: list, windows: list) -> dict:
    """Of `client_threads` records (start, end, PredictResponse or error):
    {"rows": [(group, requests, failed, p50 ms, p99 ms)], "failed": int, "requests": int,
    "p99_ratio": p99 inside / p99 outside (None if a side has no successful call),
    "versions": sorted versions that answered, "events": [kinds done]}."""
    groups = {"outside swap windows": [], "inside swap windows": []}
    for kind in dict.fromkeys(EVENTS):
        groups[f"inside: {kind}"] = []
    for call in calls:  # inside the first window its [start, end] overlaps
        window = next((w for w in windows if call[0] <= w.end and call[1] >= w.start), None)
        if window is None:
            groups["outside swap windows"].append(call)
        else:
            groups["inside swap windows"].append(call)
            groups[f"inside: {window.kind}"].append(call)
    rows, p99 = [], {}
    for group, members in groups.items():
        ok = [end - start for start, end, r in members if not isinstance(r, Exception)]
        p50_ms = common.percentile(ok, 50) * 1e3 if ok else None
        p99[group] = common.percentile(ok, 99) * 1e3 if ok else None
        failed = len(members) - len(ok)
        rows.append((group, len(members), failed, p50_ms, p99[group]))
    out, into = p99["outside swap windows"], p99["inside swap windows"]
    answered = [r for _, _, r in calls if not isinstance(r, Exception)]
    return {
        "rows": rows,
        "requests": len(calls),
        "failed": len(calls) - len(answered),
        "p99_ratio": into / out if out and into else None,
        "versions": sorted({r.model_spec.version.value for r in answered}),
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

    server, controller, base = serving_harness.serve_version(model_dir, work, MODEL_NAME, poll_s)
    shadow_base = serving_harness.stage_model(model_dir, work, SHADOW_NAME)
    windows, begin = [], []

    def during():  # EVENTS in a cycle, `interval_s` apart, for `seconds` and one whole cycle
        time.sleep(1.0)  # warm-up: channels, first calls
        begin.append(time.perf_counter())
        version = 1
        while len(windows) < len(EVENTS) or time.perf_counter() < begin[0] + seconds:
            time.sleep(interval_s)
            kind, start = EVENTS[len(windows) % len(EVENTS)], time.perf_counter()
            if kind == "publish":
                version += 1
                serving_harness.publish(model_dir, base, version)
                controller.wait_version(MODEL_NAME, version, proc=server.proc)
                end = time.perf_counter()
                shutil.rmtree(base / str(version - 1))
            else:
                configs = [serving_harness.model_config(MODEL_NAME, base)]
                if kind == "reload: add model":
                    configs.append(serving_harness.model_config(SHADOW_NAME, shadow_base))
                controller.reload(configs)
                end = time.perf_counter()
            windows.append(Window(kind, start, end + margin_s))
        time.sleep(interval_s)  # a last quiet stretch

    try:
        names = serving_harness.string_inputs(server.address, MODEL_NAME)
        requests = [
            serving_harness.predict_request(MODEL_NAME, {n: [t if n == "text" else ""] for n in names})
            for t in SENTENCES
        ]
        make_call = serving_harness.predict_rotation(server.address, requests, clients)
        records = serving_harness.client_threads(make_call, clients, during, tolerate=(grpc.RpcError,))
    except RuntimeError as e:
        raise RuntimeError(f"{e}\nserver log:\n{server.log_tail()}") from None
    finally:
        controller.close()
        server.stop()
    return summarize([c for c in records if c[0] >= begin[0]], windows)


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
        model_dir = serving_harness.served_model_dir(FLAGS.model_dir, tmp / "export")
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
        f"{serving_harness.served_model_name(FLAGS.model_dir)}.\n"
    )
    common.report(TOPIC, "Reload under load", body, desc, FLAGS.append)
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    define_flags()
    app.run(main)
