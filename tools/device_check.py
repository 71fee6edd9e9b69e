"""Device check: what this build does on an NVIDIA GPU, as one Markdown table, in under
8 minutes.

    bash scripts/device_check.sh [--output=runs/device_check/<name>.md] [--budget_s=450]
    bash scripts/device_check.sh --dry_run    # on the CPU, tiny sizes, same code paths

Measurements, in this order (one or more table rows each):
1. devices and build: each GPU's name and compute capability
   (`tf.config.experimental.get_device_details`), `nvidia-smi`'s driver and memory where it runs,
   TensorFlow's CUDA / cuDNN versions (`tf.sysconfig.get_build_info()`);
2. the pytest tests marked `gpu` (the files under tests/ that use the marker), in a child process
   before this one touches a GPU: one row per test, passed / skipped (reason) / failed (message);
3. fine-tuning examples/s, ours: `TextClassifier(from_pretrained("minilm_l6_h384_uncased"), 2)`
   compiled by `trainer.compile_task` (so mixed_float16 trains under a `LossScaleOptimizer`), on
   real SST-2 train sentences padded to `--seq_length`, batch `--batch_size`, float32 /
   mixed_float16 / mixed_bfloat16, XLA on and off: `--steps` timed `train_on_batch` calls after
   `--warmup_steps` (compilation) ones, examples/s = steps x batch / their seconds;
4. encoder, ours: sequences/s at `--batch_size` x `--seq_length` (median of `--encoder_calls`
   calls) and p50 latency at batch 1 x `--latency_seq_length` (`--latency_calls` calls), inside
   `tf.function(jit_compile=...)`, float32 (XLA on and off) and both 16-bit policies (XLA on);
5. MirroredStrategy over every visible GPU: fine-tuning examples/s at `--batch_size` per replica;
6. peers on the same device, same weights, same batches: keras-hub (`BertTextClassifier` and
   `BertBackbone` from the checkpoint's directory, XLA on) and Hugging Face `transformers` on
   PyTorch (benchmarks/peers/torch_peer.py on CUDA, its own process, eager, bfloat16 by autocast). A
   peer that is not installed gives rows saying so.

Each measurement has its own time cap (`CAPS`, cut to what is left of `--budget_s`): a cap is
checked whenever control comes back to Python (SIGALRM), so one long call (an XLA compilation)
may overrun it; a watchdog thread ends the process `WATCHDOG_GRACE_S` after the budget, writing
the table first. A measurement that fails or runs out of time puts its error in its rows' result
cell; the others still run. The table is replaced whole (written beside, then renamed) after every
measurement, so a killed run still leaves what it measured; a SIGTERM or Ctrl-C stops the children
(pytest, the PyTorch peer) and the rows not finished say "stopped: SIGTERM" (or why else the run
ended). `--output` given empty, naming a directory or a file that cannot be written is refused in
one line before anything is measured. Timings are medians of one run on one machine, not
assertions.

`--dry_run`: TensorFlow sees no GPU (CUDA_VISIBLE_DEVICES=-1, also in the children), the model
is a tiny randomly initialised BERT over the real vocabulary, batches of 4 x 16 tokens, 2 steps:
one measurement of each kind (the others get a row saying so), about 40 s of CPU time on 2
cores (tests/benchmarks/test_device_check.py runs it). Its sizes are its own: --batch_size,
--seq_length and the other size flags are refused with it, never silently replaced.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import xml.etree.ElementTree as ElementTree
from typing import Callable

import numpy as np
from absl import flags

from benchmarks import common
from keras_bert import cli, fileio

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "output", None, "Markdown file to write (any tf.io.gfile path; default runs/device_check/...)."
)
flags.DEFINE_bool(
    "dry_run",
    False,
    "CPU only, tiny model and its own sizes (the size flags are refused with it): checks the "
    "code paths.",
)
flags.DEFINE_float("budget_s", 450.0, "Seconds for all measurements together.")
flags.DEFINE_integer("batch_size", 32, "Examples per step (per replica under MirroredStrategy).")
flags.DEFINE_integer("seq_length", 128, "Tokens per example (fine-tuning and encoder throughput).")
flags.DEFINE_integer("latency_seq_length", 32, "Tokens of the batch-1 latency input.")
flags.DEFINE_integer("warmup_steps", 3, "Untimed train steps first (tracing, XLA compilation).")
flags.DEFINE_integer("steps", 20, "Timed train steps per fine-tuning measurement.")
flags.DEFINE_integer("encoder_calls", 10, "Timed encoder calls at the throughput shape.")
flags.DEFINE_integer("latency_calls", 30, "Timed batch-1 encoder calls (p50 over these).")
flags.DEFINE_enum(
    "mirrored_precision",
    "mixed_bfloat16",
    ["float32", "mixed_float16", "mixed_bfloat16"],
    "Precision of the MirroredStrategy measurement (XLA on).",
)
flags.DEFINE_float("cap_scale", 1.0, "Multiplies every measurement's time cap (CAPS).")
common.bounds(
    "budget_s",
    "cap_scale",
    batch_size=1,
    seq_length=2,
    latency_seq_length=2,
    warmup_steps=0,
    steps=1,
    encoder_calls=1,
    latency_calls=1,
)
flags.DEFINE_bool("gpu_tests", True, "Run the pytest tests marked gpu.")
flags.DEFINE_bool("peers", True, "Measure keras-hub and the Hugging Face / PyTorch peer.")

REPO = pathlib.Path(__file__).resolve().parents[1]
COLUMNS = ("measurement", "contender", "precision", "XLA", "result", "unit", "seconds", "note")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
LR = 2e-5
# Seconds each measurement may take (load, compile, warm-up and timing), in a real run and in a
# dry run; each is cut to what is left of --budget_s.
CAPS = {
    "build": (20, 20),
    "gpu tests": (100, 60),
    "fine-tuning": (45, 40),
    "encoder": (20, 20),
    "mirrored": (40, 30),
    "keras-hub": (40, 40),
    "pytorch": (30, 30),
}
WATCHDOG_GRACE_S = 15.0
# The dry run's encoder: the bert_tiny preset (2 layers of width 128) over the real uncased
# vocabulary, randomly initialised.
TINY_PRESET = "bert_tiny"
DRY_RUN_SIZES = dict(
    batch_size=4,
    seq_length=16,
    latency_seq_length=8,
    warmup_steps=1,
    steps=2,
    encoder_calls=2,
    latency_calls=3,
)


@dataclasses.dataclass
class Row:
    """One table row; `result` is a number, a test outcome, or what went wrong."""

    measurement: str
    contender: str = "ours"
    precision: str = "-"
    xla: str = "-"
    result: str = "not reached"
    unit: str = ""
    seconds: str = ""
    note: str = ""

    def cells(self) -> list[str]:
        return [getattr(self, f.name) for f in dataclasses.fields(self)]


class CapReached(Exception):
    """A measurement ran past its time cap."""


# A terminal escape sequence (colours, cursor moves: Keras's wrapped exceptions carry them).
_ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def _cell(text: object) -> str:
    """One line, no `|` nor terminal escapes, at most 300 characters: safe inside a Markdown table
    cell."""
    text = _ANSI_ESCAPE.sub("", str(text))
    text = re.sub(r"\s+", " ", text).replace("|", "/").strip()
    return text if len(text) <= 300 else text[:297] + "..."


def _stop_reason(e: BaseException) -> str:
    """How a run that raised `e` stopped, in a table cell's words."""
    if isinstance(e, SystemExit) and e.code == 128 + signal.SIGTERM:
        return "SIGTERM"
    if isinstance(e, KeyboardInterrupt):
        return "interrupted (SIGINT)"
    return f"{type(e).__name__}: {e}"


def _number(x: float) -> str:
    return f"{x:,.3g}" if abs(x) < 100 else f"{x:,.0f}"


@dataclasses.dataclass
class Measurement:
    """`run()` returns the rows it measured; until then (or when it fails) `rows` stand in."""

    cap: str  # key of CAPS
    rows: list[Row]
    run: Callable[[], list[Row]]


class Report:
    """The table and its header, rewritten to `path` after every measurement."""

    def __init__(self, path: str, dry_run: bool, argv: list[str]):
        self.path, self.dry_run, self.argv = path, dry_run, argv
        self.rows: list[Row] = []
        self.start = time.monotonic()
        self.lock = threading.Lock()
        self.finished = False
        self.stopped = ""  # why the run stopped before its end (`stop`)

    def markdown(self) -> str:
        title = "Device check" + (" (DRY RUN on the CPU: tiny model, not figures)" * self.dry_run)
        command = "bash scripts/device_check.sh " + " ".join(shlex.quote(a) for a in self.argv)
        seconds = f"{time.monotonic() - self.start:.0f} s"
        if self.finished:
            state = f"finished in {seconds}"
        elif self.stopped:
            state = f"stopped after {seconds} ({self.stopped})"
        else:
            state = f"in progress or stopped after {seconds}"
        header = [
            f"# {title}",
            "",
            f"- Command: `{command.strip()}`",
            f"- {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}, commit "
            f"{common.git_commit()}, {state}",
            f"- Machine: {common.cpu_model()}, {os.cpu_count()} logical cores",
            "",
        ]
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
        lines += ["| " + " | ".join(_cell(c) for c in row.cells()) + " |" for row in self.rows]
        return "\n".join(header + lines) + "\n"

    def write(self) -> None:
        """Replaces the file whole (`fileio.write_text`): a reader never sees half a table."""
        with self.lock:
            text = self.markdown()
            parent = fileio.parent(self.path)
            if parent:
                fileio.makedirs(parent)
            fileio.write_text(self.path, text)

    def stop(self, why: str) -> None:
        """Rows still running or not reached say `why` the run stopped; the table is written."""
        self.stopped = why
        for row in self.rows:
            if row.result.startswith("running") or row.result == "not reached":
                row.result = f"stopped: {why}"
        self.write()

    def run(self, measurements: list[Measurement], budget_end: float) -> None:
        """Measures each of `measurements` in order; however the run ends (SIGTERM, Ctrl-C, an
        error of this program's), the table says so: the rows not finished read "stopped: ..."."""
        try:
            for m in measurements:
                self.measure(m, budget_end)
            self.finished = True
        except BaseException as e:
            self.stop(_stop_reason(e))
            raise
        self.write()

    def measure(self, m: Measurement, budget_end: float) -> None:
        """Runs `m` under its cap; its rows (or its stand-ins with the error) join the table."""
        cap = CAPS[m.cap][int(self.dry_run)] * FLAGS.cap_scale
        cap = min(cap, budget_end - time.monotonic())
        first = len(self.rows)
        self.rows.extend(m.rows)
        if cap <= 1:
            for row in m.rows:
                row.result = f"skipped: the {FLAGS.budget_s:.0f} s budget was spent"
            self.write()
            return
        for row in m.rows:
            row.result = f"running (cap {cap:.0f} s)"
        self.write()
        start = time.monotonic()

        def alarm(signum, frame):
            raise CapReached(f"stopped at its {cap:.0f} s cap")

        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, cap)
        try:
            rows = m.run()
        except Exception as e:  # every failure goes into the table, the next measurement runs
            message = str(e) if isinstance(e, CapReached) else f"error: {type(e).__name__}: {e}"
            print(f"[device_check] {m.rows[0].measurement}: {message}", file=sys.stderr)
            if not isinstance(e, CapReached):
                traceback.print_exc()
            rows = [dataclasses.replace(r, result=message) for r in m.rows]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        seconds = f"{time.monotonic() - start:.1f}"
        for row in rows:
            row.seconds = row.seconds or seconds
        self.rows[first:] = rows
        self.write()


# ---------------------------------------------------------------- set-up shared by measurements


@dataclasses.dataclass
class Sizes:
    batch_size: int
    seq_length: int
    latency_seq_length: int
    warmup_steps: int
    steps: int
    encoder_calls: int
    latency_calls: int


def make_encoder(dry_run: bool, dtype: str):
    """Ours: the real checkpoint, or (dry run) the tiny random encoder; Keras dtype policy `dtype`."""
    from keras_bert.config import PRESETS
    from keras_bert.models.bert_encoder import BertEncoder

    if dry_run:
        return BertEncoder.from_config_object(PRESETS[TINY_PRESET], dtype=dtype)
    return common.backbone("ours", dtype)


@functools.lru_cache(maxsize=None)
def _sst2_features(rows: int, seq_length: int):
    texts, labels = common.sst2_sentences("train", rows)
    return common.featurize(texts, seq_length), labels


def sst2_batches(sizes: Sizes, count: int, batch_size: int):
    """`count` batches of `batch_size` real SST-2 train sentences (numpy features, int32 labels),
    padded to `sizes.seq_length`, in file order (read and tokenized once per size)."""
    features, labels = _sst2_features(count * batch_size, sizes.seq_length)
    return [
        (
            {k: v[i * batch_size : (i + 1) * batch_size] for k, v in features.items()},
            labels[i * batch_size : (i + 1) * batch_size].astype(np.int32),
        )
        for i in range(count)
    ]


def time_steps(step: Callable[[object], object], batches, sizes: Sizes) -> float:
    """Seconds of `sizes.steps` calls of step(batch) after `sizes.warmup_steps` untimed ones,
    cycling through `batches`; each call returns host values, so the device work is done."""
    for i in range(sizes.warmup_steps):
        step(batches[i % len(batches)])
    start = time.perf_counter()
    for i in range(sizes.steps):
        step(batches[(sizes.warmup_steps + i) % len(batches)])
    return time.perf_counter() - start


def ours_finetune(dry_run: bool, sizes: Sizes, precision: str, xla: bool, mirrored=False) -> Row:
    """Examples/s of our fine-tuning step (module docstring, items 3 and 5); `mirrored`: under a
    MirroredStrategy over every visible GPU, `sizes.batch_size` examples per replica."""
    import tensorflow as tf

    from keras_bert.tasks.text_classifier import TextClassifier
    from keras_bert.training import trainer
    from keras_bert.training.args import TrainingArgs
    from keras_bert.training.optimizer import set_mixed_precision

    strategy = tf.distribute.MirroredStrategy() if mirrored else tf.distribute.get_strategy()
    replicas = strategy.num_replicas_in_sync
    batch = sizes.batch_size * replicas
    batches = sst2_batches(sizes, 4, batch)
    set_mixed_precision(precision)
    try:
        args = TrainingArgs(output_dir="unused", mixed_precision=precision, jit_compile=xla)
        with strategy.scope():
            task = TextClassifier(make_encoder(dry_run, precision), 2)
            task(batches[0][0])
            trainer.compile_task(task, args, sizes.warmup_steps + sizes.steps, LR)
        losses = []

        def step(b):
            losses.append(task.train_on_batch(b[0], b[1], return_dict=True)["loss"])

        seconds = time_steps(step, batches, sizes)
        wrapped = type(task.optimizer).__name__
    finally:
        set_mixed_precision("float32")
    if not np.all(np.isfinite(losses)):
        raise FloatingPointError(f"non-finite training loss: {losses}")
    return Row(
        "fine-tuning",
        f"ours, MirroredStrategy ({replicas} replica{'s' * (replicas > 1)})"
        if mirrored
        else "ours",
        precision,
        "on" if xla else "off",
        _number(sizes.steps * batch / seconds),
        f"examples/s (batch {batch} x {sizes.seq_length})",
        note=f"{sizes.steps} steps after {sizes.warmup_steps}; loss {losses[-1]:.3f}; {wrapped}",
    )


def encoder_rows(precision: str, xla: bool, contender: str, call_fn, sizes: Sizes) -> list[Row]:
    """Throughput and batch-1 p50 latency rows of `call_fn(features) -> host scalar`."""
    big = common.random_batch(sizes.batch_size, sizes.seq_length)
    one = common.random_batch(1, sizes.latency_seq_length, seed=1)
    calls = {"big": lambda: call_fn(big), "one": lambda: call_fn(one)}
    times = common.alternate(
        calls, 1, warmup=2, inner=max(sizes.encoder_calls, sizes.latency_calls), log=False
    )
    throughput = sizes.batch_size / common.median(times["big"][: sizes.encoder_calls])
    p50 = 1e3 * common.percentile(times["one"][: sizes.latency_calls], 50)
    xla_cell = xla if isinstance(xla, str) else ("on" if xla else "off")
    return [
        Row(
            f"encoder {sizes.batch_size} x {sizes.seq_length}",
            contender,
            precision,
            xla_cell,
            _number(throughput),
            "sequences/s",
            note=f"median of {sizes.encoder_calls} calls",
        ),
        Row(
            f"encoder 1 x {sizes.latency_seq_length}",
            contender,
            precision,
            xla_cell,
            _number(p50),
            "ms p50",
            note=f"{sizes.latency_calls} calls",
        ),
    ]


def ours_encoder(dry_run: bool, sizes: Sizes, precision: str, xla: bool) -> list[Row]:
    import tensorflow as tf

    encoder = make_encoder(dry_run, precision)

    @tf.function(jit_compile=xla, reduce_retracing=True)
    def run(features):
        output = encoder(features, training=False)["sequence_output"]
        return tf.reduce_sum(tf.cast(output, tf.float32))  # one number back: waits, copies little

    def call(features):
        return run({k: tf.constant(v) for k, v in features.items()}).numpy()

    return encoder_rows(precision, xla, "ours", call, sizes)


def keras_hub_rows(dry_run: bool, sizes: Sizes, precisions, xla: bool) -> list[Row]:
    """keras-hub's BertTextClassifier fine-tuning and BertBackbone encoder in each of
    `precisions`, XLA on or off, on the same batches."""
    import keras
    import keras_hub
    import tensorflow as tf

    from keras_bert.checkpoints.keras_hub_preset import keras_hub_backbone
    from keras_bert.config import PRESETS

    batches = sst2_batches(sizes, 4, sizes.batch_size)
    hub_batches = [(common.keras_hub_inputs(x), y) for x, y in batches]
    rows = []
    for precision in precisions:
        keras.utils.set_random_seed(0)
        if dry_run:
            backbone = keras_hub_backbone(PRESETS[TINY_PRESET], dtype=precision)
        else:
            backbone = common.backbone("keras-hub", precision)
        model = keras_hub.models.BertTextClassifier(
            backbone, num_classes=2, preprocessor=None, dtype=precision
        )
        model.compile(
            optimizer=keras.optimizers.AdamW(learning_rate=LR, weight_decay=0.01, epsilon=1e-6),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=xla,
        )
        start = time.monotonic()
        seconds = time_steps(lambda b: model.train_on_batch(b[0], b[1]), hub_batches, sizes)
        rows.append(
            Row(
                "fine-tuning",
                "keras-hub",
                precision,
                "on" if xla else "off",
                _number(sizes.steps * sizes.batch_size / seconds),
                f"examples/s (batch {sizes.batch_size} x {sizes.seq_length})",
                f"{time.monotonic() - start:.1f}",
                f"{sizes.steps} steps after {sizes.warmup_steps}; keras AdamW",
            )
        )
        start = time.monotonic()

        @tf.function(jit_compile=xla, reduce_retracing=True)
        def run(features, backbone=backbone):
            output = backbone(common.keras_hub_inputs(features), training=False)["sequence_output"]
            return tf.reduce_sum(tf.cast(output, tf.float32))

        def call(features, run=run):
            return run({k: tf.constant(v) for k, v in features.items()}).numpy()

        for row in encoder_rows(precision, xla, "keras-hub", call, sizes):
            row.seconds = f"{time.monotonic() - start:.1f}"
            rows.append(row)
    return rows


def pytorch_rows(dry_run: bool, sizes: Sizes, device: str, bf16s=(False, True)) -> list[Row]:
    """Hugging Face BertForSequenceClassification fine-tuning and BertModel encoder on PyTorch,
    float32 and bfloat16 autocast, on `device`, in the peer's own process."""
    batches = sst2_batches(sizes, 1, sizes.batch_size)
    x, y = batches[0]
    from keras_bert.checkpoints.huggingface import hf_config_dict
    from keras_bert.config import PRESETS

    config = hf_config_dict(PRESETS[TINY_PRESET]) if dry_run else None
    peer = common.peer("PyTorch")
    rows = []
    try:
        for bf16 in bf16s:
            precision = "bfloat16 autocast" if bf16 else "float32"
            start = time.monotonic()
            step = peer.add(
                "classifier",
                bf16=bf16,
                lr=LR,
                device=device,
                config=config,
                ids=x["input_word_ids"].tolist(),
                mask=x["input_mask"].tolist(),
                labels=y.tolist(),
            )
            for _ in range(sizes.warmup_steps):
                step()
            seconds = sum(step() for _ in range(sizes.steps))
            rows.append(
                Row(
                    "fine-tuning",
                    "pytorch",
                    precision,
                    "-",
                    _number(sizes.steps * sizes.batch_size / seconds),
                    f"examples/s (batch {sizes.batch_size} x {sizes.seq_length})",
                    f"{time.monotonic() - start:.1f}",
                    f"{sizes.steps} steps after {sizes.warmup_steps}; torch.optim.AdamW; {device}",
                )
            )
            start = time.monotonic()
            jobs = {
                (b, t): peer.add("encoder", bf16=bf16, batch=b, seq=t, device=device, config=config)
                for b, t in (
                    (sizes.batch_size, sizes.seq_length),
                    (1, sizes.latency_seq_length),
                )
            }
            big, one = jobs.values()

            def call(features, big=big, one=one):
                return (big if len(features["input_word_ids"]) > 1 else one)()

            for row in encoder_rows(precision, "-", "pytorch", call, sizes):
                row.seconds = f"{time.monotonic() - start:.1f}"
                rows.append(row)
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()
        peer.proc.wait()
    return rows


# ---------------------------------------------------------------- devices, build, gpu tests


def build_rows() -> list[Row]:
    import keras
    import tensorflow as tf

    rows = []
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        details = tf.config.experimental.get_device_details(gpu)
        capability = details.get("compute_capability")
        rows.append(
            Row(
                "device",
                gpu.name.replace("/physical_device:", ""),
                result=details.get("device_name", "unknown"),
                note=f"compute capability {'.'.join(map(str, capability))}" if capability else "",
            )
        )
    if not gpus:
        rows.append(Row("device", "GPU", result="none visible to TensorFlow"))
    rows.append(Row("device", "CPU", result=common.cpu_model(), note=f"{os.cpu_count()} cores"))
    try:
        smi = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=index,name,driver_version,memory.total",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=15,
        )
        smi_text = "; ".join(smi.stdout.strip().splitlines()) or smi.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        smi_text = f"not available ({type(e).__name__})"
    rows.append(Row("device", "nvidia-smi", result=smi_text or "no output"))
    info = tf.sysconfig.get_build_info()
    rows.append(
        Row(
            "build",
            "tensorflow",
            result=tf.__version__,
            note=f"CUDA build {info.get('is_cuda_build', False)}, CUDA "
            f"{info.get('cuda_version', 'n/a')}, cuDNN {info.get('cudnn_version', 'n/a')}; "
            f"keras {keras.__version__}",
        )
    )
    return rows


def gpu_test_files() -> list[str]:
    """Test files (relative to the repository) that use the `gpu` marker."""
    marker = re.compile(r"pytest\.mark\.gpu\b")
    return sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "tests").rglob("test_*.py")
        if marker.search(p.read_text(encoding="utf-8", errors="replace"))
    )


def gpu_test_rows(timeout: float) -> list[Row]:
    """pytest -m gpu over `gpu_test_files()` in a child process; one row per test (JUnit XML)."""
    files = gpu_test_files()
    if not files:
        return [Row("gpu tests", "none", result="no test under tests/ is marked gpu")]
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "gpu_tests.xml")
        command = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "--run-slow"]
        command += ["-p", "no:cacheprovider", f"--junitxml={xml}", *files]
        proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)
        if not os.path.exists(xml):
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            raise RuntimeError(f"pytest exited {proc.returncode}: {' '.join(tail)}")
        cases = ElementTree.parse(xml).getroot().iter("testcase")
        rows = []
        for case in cases:
            name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
            outcome, note = "passed", ""
            for tag in ("failure", "error", "skipped"):
                found = case.find(tag)
                if found is not None:
                    outcome = {"failure": "FAILED", "error": "ERROR", "skipped": "skipped"}[tag]
                    note = found.get("message", "") or (found.text or "")
            rows.append(Row("gpu test", name, result=outcome, seconds=case.get("time", "")))
            rows[-1].note = note
    return rows or [
        Row("gpu tests", "pytest", result=f"no test collected (exit {proc.returncode})")
    ]


# ---------------------------------------------------------------- the plan


def plan(dry_run: bool, sizes: Sizes) -> list[Measurement]:
    """The measurements in order. A dry run runs one of each kind (the first precision, XLA off,
    where compiling a train step for the CPU alone takes longer than the whole dry run should);
    the others get a row saying so."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    measurements = [Measurement("build", [Row("device"), Row("build")], build_rows)]

    def add(cap, rows, run, in_dry_run=True):
        if dry_run and not in_dry_run:
            why = "not run in the dry run (the same code as the row of its kind that ran)"
            run = lambda rows=rows: [dataclasses.replace(r, result=why) for r in rows]  # noqa: E731
        measurements.append(Measurement(cap, rows, run))

    if FLAGS.gpu_tests:
        timeout = CAPS["gpu tests"][int(dry_run)] * FLAGS.cap_scale
        add("gpu tests", [Row("gpu tests", "pytest -m gpu")], lambda: gpu_test_rows(timeout))
    for precision in PRECISIONS:
        for xla in (True, False):
            add(
                "fine-tuning",
                [Row("fine-tuning", "ours", precision, "on" if xla else "off")],
                lambda p=precision, x=xla: [ours_finetune(dry_run, sizes, p, x)],
                in_dry_run=(precision, xla) == ("mixed_float16", False),
            )
    for precision, xla in [(p, True) for p in PRECISIONS] + [("float32", False)]:
        add(
            "encoder",
            [
                Row(what, "ours", precision, "on" if xla else "off")
                for what in (
                    f"encoder {sizes.batch_size} x {sizes.seq_length}",
                    f"encoder 1 x {sizes.latency_seq_length}",
                )
            ],
            lambda p=precision, x=xla: ours_encoder(dry_run, sizes, p, x),
            in_dry_run=not xla,
        )
    precision, xla = FLAGS.mirrored_precision, not dry_run
    add(
        "mirrored",
        [Row("fine-tuning", "ours, MirroredStrategy", precision, "on" if xla else "off")],
        lambda: [ours_finetune(dry_run, sizes, precision, xla, mirrored=True)],
    )
    if not gpus:
        measurements[-1].rows[0].note = "no GPU: MirroredStrategy runs one replica on the CPU"
    missing = {
        "keras-hub": FLAGS.peers and _missing(("keras_hub",)),
        "pytorch": FLAGS.peers and _torch_missing(),
    }
    hints = {
        "keras-hub": "pip install keras-hub",
        "pytorch": "pip install torch transformers, or set KERAS_BERT_PEER_PYTHON",
    }
    for name in ("keras-hub", "pytorch"):
        if not FLAGS.peers or missing[name]:
            why = (
                "--nopeers"
                if not FLAGS.peers
                else f"not installed ({missing[name]}; {hints[name]})"
            )
            add(
                name,
                [Row("peer", name)],
                lambda n=name, w=why: [Row("peer", n, result=f"skipped: {w}")],
            )
            continue
        for i, precision in enumerate(("float32", "mixed_bfloat16")):
            if name == "keras-hub":
                run = lambda p=precision: keras_hub_rows(dry_run, sizes, (p,), not dry_run)  # noqa: E731
            else:
                device = "cuda" if gpus else "cpu"
                bf16 = precision != "float32"
                run = lambda b=bf16: pytorch_rows(dry_run, sizes, device, (b,))  # noqa: E731
                precision = "bfloat16 autocast" if bf16 else "float32"
            add(name, [Row("peer", name, precision)], run, in_dry_run=i == 0)
    return measurements


def _missing(modules) -> str | None:
    import importlib.util

    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    return ", ".join(absent) or None


def _torch_missing() -> str | None:
    """None when the peer's interpreter (common.peer_python()) imports torch and transformers."""
    if os.environ.get("KERAS_BERT_PEER_PYTHON"):
        return common.python_has(common.peer_python(), ("torch", "transformers"))
    return _missing(("torch", "transformers"))


def default_output(dry_run: bool) -> str:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d_%H%M%S")
    return str(REPO / "runs" / "device_check" / f"{'dry_run_' * dry_run}{stamp}.md")


def check_flags() -> None:
    """Refuses, in one line before anything is measured: --output given empty or naming a
    directory, a file it cannot write there, and a size flag given with --dry_run (which runs
    its own tiny sizes, `DRY_RUN_SIZES`: a value given would not be used)."""
    if FLAGS.dry_run and (given := [f"--{f}" for f in DRY_RUN_SIZES if FLAGS[f].present]):
        cli.fail_usage(
            f"{', '.join(given)}: not used by --dry_run, which runs its own tiny sizes "
            f"({', '.join(f'{k}={v}' for k, v in DRY_RUN_SIZES.items())})"
        )
    cli.require_reachable_flags("output")
    if FLAGS.output is not None and fileio.isdir(FLAGS.output):
        cli.fail_usage(f"--output={FLAGS.output}: a directory, not a file")


def start_table(report: Report) -> None:
    """Writes the empty table to `report.path`: a path it cannot write ends the run in one line
    (exit 2; 1 for a file system without room) before anything is measured."""
    try:
        report.write()
    except fileio.file_errors() as e:
        cause = (e.strerror if isinstance(e, OSError) else None) or getattr(e, "message", str(e))
        status = cli.NO_ROOM_EXIT_CODE if cli.is_no_room(e) else cli.USAGE_EXIT_CODE
        cli.fail_usage(f"--output={report.path}: cannot write it: {cause}", status)


def main(argv):
    del argv
    common.exit_on_sigterm()  # a SIGTERM stops the children (pytest, the peers); the table says so
    check_flags()
    dry_run = FLAGS.dry_run
    # Before TensorFlow starts a GPU: the children (pytest, the PyTorch peer) share the GPUs with
    # this process, which then takes memory as it needs it instead of all of it at once.
    # (TensorFlow is imported inside the functions, after these variables are set.)
    os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    if dry_run:
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"  # this process and its children: CPU only
    sizes = Sizes(**(DRY_RUN_SIZES if dry_run else {f: FLAGS[f].value for f in DRY_RUN_SIZES}))
    import tensorflow as tf  # noqa: F401  (after the variables above; fileio then uses tf.io.gfile)

    output = default_output(dry_run) if FLAGS.output is None else FLAGS.output
    report = Report(output, dry_run, sys.argv[1:])
    start_table(report)
    budget_end = report.start + FLAGS.budget_s

    def watchdog():
        report.stop(f"the {FLAGS.budget_s:.0f} s budget ran out")
        print(f"[device_check] budget spent; table in {report.path}", file=sys.stderr, flush=True)
        os._exit(3)

    timer = threading.Timer(FLAGS.budget_s + WATCHDOG_GRACE_S, watchdog)
    timer.daemon = True
    timer.start()
    try:
        report.run(plan(dry_run, sizes), budget_end)
    finally:
        timer.cancel()
    print(report.markdown())
    print(f"[device_check] wrote {report.path}", file=sys.stderr)


if __name__ == "__main__":
    cli.run(main)
