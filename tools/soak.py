"""Soak and faults: `python -m serving.server` under a long run of mixed traffic while its models
change under it, and the moments that break files: a full disk while an export is published, a
training checkpoint is saved and the request log writes; a SIGKILL during a config reload.

Traffic: `--clients` threads (even ones gRPC, odd ones REST with a new connection per request)
send back to back; one request in five (`bad_every`) is bad (BAD_GRPC / BAD_REST: an unknown
model, signature, input or verb, a deleted version, a wrong dtype, non-UTF-8 text, a text, batch,
body or declared size over the server's limits, malformed, nested or mistyped JSON), the others are
good (Predict of one sentence to a model now served, no version: the newest). A good request
must succeed (target: 0 failed); a bad one must get a 4xx (gRPC: a code TF Serving maps to one,
`serving.wire.errors.http_status`; target: 0 answered 5xx).

The server reads `--model_config_file` every `--poll_s` (written whole: a temporary file, then a
rename) and polls its base paths as often: model "soak" (`latest { num_versions: 2 }`, its
requests logged to a small disk); "soak_b" while a reload has added it; "exported", whose base
path the disk faults export into. Every `--interval_s` (by default `--sample_s` over the number of
events: one whole cycle per span, so every span's sample is read at the same point of the cycle
and compares like with like) the next event of EVENTS runs, on a fixed schedule:
publish (a new version copied in under a hidden name and renamed; the versions beyond the newest
two deleted), config: add soak_b (and request-log sampling 0.5), corrupt version (a version whose
saved_model.pb is not a SavedModel: reported END with its error, never served; then deleted),
delete newest version (the serving version's directory removed under the server: requests move
to the one before), config: remove soak_b (taken out of the clients' choice 2 s before), rotate
request logs (every closed log file deleted, as a log shipper does).

Disk faults (`disk_faults`, a child process, while the traffic runs): exports into "exported"'s
base path and a short training run (`resumable_fit`, a checkpoint every step, the last 2 kept) on
a small disk left with a few sizes of free room: each attempt must publish a complete version or
none (no hidden staging directory left), leave a checkpoint complete or absent from which a rerun
resumes to the end, and fail with one clear error. The small disk (`--disk`) is a tmpfs mounted
for the run where this process may mount (root), else RLIMIT_FSIZE of the writing process (every
file at most the limit: EFBIG where a full disk gives ENOSPC).

At the end: SIGKILL right after the server starts applying a changed config file; every request
log file must read up to its last complete record (no corrupt one); a restarted server serves
every configured model again from what is on disk. The server's resident memory, threads and
open file descriptors (/proc/<pid>) are read every `--sample_s` with the good requests' p50/p99,
failed good requests and bad requests answered 5xx of that span, and the RSS again after each whole
cycle of events once no version of any model is loading or unloading: the same point of the cycle,
with the same models loaded, however the machine's pace moves the events and whenever the disk
faults publish (targets: that RSS within +5% of the first cycle's, threads and descriptors flat;
a span's sample, read at the clock, may catch a load halfway: a second model is 300 MiB).

    nice -n 10 python -m tools.soak            # 30 minutes; appends to docs/results/hardening.md

Exit status (`benchmarks.common`): 0 every target met, 1 a target missed (`missed_targets`, one
stderr line each), 3 the program itself failed (its traceback), 2 a usage error, 143 a SIGTERM.

tests/benchmarks/test_soak.py runs it for about 25 s with a tiny core-op model.
"""

from __future__ import annotations

import collections
import dataclasses
import http.client
import json
import os
import pathlib
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from absl import flags

from benchmarks import common, serving_harness
from benchmarks.serving_harness import Controller, model_config, proc_status, publish, string_inputs

REPO = pathlib.Path(__file__).resolve().parents[1]
MODEL, SECOND, EXPORTED = "soak", "soak_b", "exported"
KILLED = "soak_k"  # the model whose load the SIGKILL interrupts
EVENTS = (
    "publish",
    "config: add soak_b",
    "corrupt version",
    "delete newest version",
    "config: remove soak_b",
    "rotate request logs",
)
TINY_ENCODER = dict(
    vocab_size=30522,
    hidden_size=8,
    num_layers=1,
    num_heads=2,
    intermediate_size=12,
    max_sequence_length=16,
)
SENTENCES = ("a gripping , funny film", "the plot never comes together", "fine", "")
# The server's limits the bad requests go over.
MAX_TEXT, MAX_BATCH, MAX_BODY = 1000, 64, 1 << 20
SERVER_FLAGS = (
    f"--max_text_length={MAX_TEXT}",
    f"--max_request_batch_size={MAX_BATCH}",
    f"--max_request_bytes={MAX_BODY}",
    "--request_log_max_file_bytes=65536",
)
LOG_DISK_BYTES = 1 << 20  # the request log's tmpfs
FSIZE_BYTES = 40 << 10  # or the server's RLIMIT_FSIZE: each log file cut inside a record
FAULT_DISK_BYTES = 64 << 20
TIMEOUT_S = 300.0


# ------------------------------------------------------------------------------ small disks
class SmallDisk:
    """A directory that runs out of room: "tmpfs", a tmpfs of `size` bytes mounted there (root
    only), or "fsize", RLIMIT_FSIZE of the process writing there. `fill(free)` leaves `free`
    bytes (a preallocated filler file; the limit of this process), `unfill()` gives them back."""

    def __init__(self, path, kind: str, size: int = 0):
        self.path, self.kind, self.mounted = pathlib.Path(path), kind, False
        self.path.mkdir(parents=True, exist_ok=True)
        if kind == "tmpfs" and size:
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(self.path)],
                check=True,
                capture_output=True,
            )
            self.mounted = True

    def used(self) -> int:
        st = os.statvfs(self.path)
        return (st.f_blocks - st.f_bavail) * st.f_frsize

    def fill(self, free: int) -> None:
        if self.kind == "fsize":
            hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
            resource.setrlimit(resource.RLIMIT_FSIZE, (free, hard))
            return
        st = os.statvfs(self.path)
        with open(self.path / ".filler", "wb") as f:
            os.posix_fallocate(f.fileno(), 0, max(1, st.f_bavail * st.f_frsize - free))

    def unfill(self) -> None:
        if self.kind == "fsize":
            hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
            resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
        else:
            (self.path / ".filler").unlink(missing_ok=True)

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False, capture_output=True)


def disk_kind(requested: str) -> str:
    """ "tmpfs" or "fsize"; "auto": tmpfs where a 1 MiB one mounts here."""
    if requested != "auto":
        return requested
    probe = pathlib.Path(tempfile.mkdtemp(prefix="soak_mount_"))
    try:
        SmallDisk(probe, "tmpfs", 1 << 20).close()
        return "tmpfs"
    except (OSError, subprocess.CalledProcessError):
        return "fsize"
    finally:
        shutil.rmtree(probe, ignore_errors=True)


# ------------------------------------------------------------------------------ disk faults
def _visible_exports(model_dir: pathlib.Path) -> dict:
    from keras_bert import fileio
    from keras_bert.saved_model import versioning

    versions = versioning.existing_versions(str(model_dir))
    return {
        "versions": versions,
        "incomplete": [v for v in versions if not fileio.is_complete(str(model_dir / str(v)))],
        "hidden": sorted(n for n in os.listdir(model_dir) if n.startswith(".")),
    }


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"


def export_faults(task, disk: SmallDisk, fractions) -> list:
    """An export with all the room, one per fraction of its size (tmpfs: the bytes it leaves
    used; fsize: its largest file) left free, and one with all the room again."""
    from keras_bert.saved_model.exporter import export_task

    model_dir = disk.path / "exports" / EXPORTED
    before = disk.used()
    first = pathlib.Path(export_task(task, str(disk.path / "exports"), EXPORTED))
    files = [p.stat().st_size for p in first.rglob("*") if p.is_file()]
    size = disk.used() - before if disk.kind == "tmpfs" else max(files)
    attempts = []
    for free in [int(size * f) for f in fractions] + [None]:
        if free is not None:
            disk.fill(free)
        try:
            outcome = (
                "published "
                + pathlib.Path(export_task(task, str(disk.path / "exports"), EXPORTED)).name
            )
        except Exception as e:  # the error a user sees
            outcome = _error(e)
        finally:
            disk.unfill()
        attempts.append({"free": free, "outcome": outcome, **_visible_exports(model_dir)})
    return attempts


def _train(task_fn, directory, features, labels, steps):
    """A `resumable_fit` of `steps` batches of 8, a checkpoint every step; (restored step,
    final step)."""
    import tensorflow as tf

    from keras_bert.training.callbacks import ResumableCheckpoint
    from keras_bert.training.fit import resumable_fit

    task = task_fn()
    task.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(8)
    checkpoint = ResumableCheckpoint(str(directory), save_freq=1, keep=2)
    final = resumable_fit(
        task, lambda epoch, skip: dataset.skip(skip), steps, 1, checkpoint, verbose=0
    )
    return checkpoint.restored_step, final


def checkpoint_faults(task_fn, disk: SmallDisk, multiples, steps: int = 6) -> list:
    """One run per multiple of the room a checkpoint asks for (`h5_bytes_bound`: a little more
    than its file) left free; each is rerun with the room back and must resume where its
    checkpoint says."""
    from keras_bert.checkpoints.keras_format import h5_bytes_bound

    features = common.random_batch(8 * steps, 8, seed=1)
    labels = (features["input_word_ids"][:, 1] % 2).astype("int32")
    task = task_fn()
    task.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    task.optimizer.build(task.trainable_variables)
    size = h5_bytes_bound(task)
    attempts = []
    for i, multiple in enumerate(multiples, 1):
        directory = disk.path / f"ckpt{i}"
        disk.fill(int(size * multiple))
        try:
            _train(task_fn, directory, features, labels, steps)
            outcome = "trained to the end"
        except Exception as e:
            outcome = _error(e)
        finally:
            disk.unfill()
        state_file = directory / "checkpoint.json"
        state = json.loads(state_file.read_text()) if state_file.exists() else None
        names = sorted(os.listdir(directory)) if directory.exists() else []
        attempt = {
            "free": int(size * multiple),
            "steps": steps,
            "outcome": outcome,
            "state_step": state and state["step"],
            "weights_present": state is None or state["weights"] in names,
            "hidden": [n for n in names if n.startswith(".")],
        }
        attempt["resumed_from"], attempt["final_step"] = _train(
            task_fn, directory, features, labels, steps
        )
        attempts.append(attempt)
    return attempts


def disk_faults(directory: str, kind: str, export_fractions, checkpoint_multiples) -> dict:
    """The child process's work (see the module docstring); a JSON-able dict."""
    disk = SmallDisk(directory, kind)  # mounted by the parent
    task = serving_harness.sst2_classifier(16, TINY_ENCODER)
    return {
        "export": export_faults(task, disk, export_fractions),
        "checkpoint": checkpoint_faults(
            lambda: serving_harness.sst2_classifier(16, TINY_ENCODER),
            disk,
            checkpoint_multiples,
        ),
    }


def start_disk_faults(disk: SmallDisk, export_fractions, multiples) -> subprocess.Popen:
    """`disk_faults` in a child process, started (`run_soak` stops it on its way out, before the
    small disk is unmounted: it must never write to the directory under the mount)."""
    code = (
        "import json, sys; from tools import soak\n"
        "print(json.dumps(soak.disk_faults(*json.loads(sys.argv[1]))))"
    )
    args = json.dumps([str(disk.path), disk.kind, list(export_fractions), list(multiples)])
    return subprocess.Popen(
        [sys.executable, "-c", code, args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES=""),
    )


def disk_faults_result(child: subprocess.Popen, work: pathlib.Path) -> dict:
    """What the `start_disk_faults` child printed, once it ends (its stderr in
    work/disk_faults.log)."""
    try:
        out, err = child.communicate(timeout=3600)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
    (work / "disk_faults.log").write_text(err)
    if child.returncode != 0:
        return {"crashed": f"exit status {child.returncode}: {err[-500:]}"}
    return json.loads(out.strip().splitlines()[-1])


# ------------------------------------------------------------------------------ the server
class Server:
    """`python -m serving.server` on free ports with `flags`; its output copied to `log` (a pipe:
    a file-size limit on the server must not cut its own log). `fsize`: its RLIMIT_FSIZE."""

    def __init__(self, flags: list, log: pathlib.Path, fsize: int | None = None):
        self.grpc = f"127.0.0.1:{serving_harness.free_port()}"
        self.rest_port = serving_harness.free_port()
        limit = (
            (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))) if fsize else None
        )
        self.proc = subprocess.Popen(
            serving_harness.server_command(
                f"--port={self.grpc.rsplit(':', 1)[1]}", f"--rest_api_port={self.rest_port}", *flags
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES=""),
            preexec_fn=limit,
        )
        self.log = log
        self._copier = threading.Thread(target=self._copy, daemon=True)
        self._copier.start()
        self.controller = Controller(self.grpc)

    def _copy(self):
        with open(self.log, "ab") as out:
            for line in self.proc.stdout:
                out.write(line)
                out.flush()

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_available(self, *names) -> None:
        for name in names:
            self.controller.wait(
                name, lambda s: "AVAILABLE" in s.values(), TIMEOUT_S, proc=self.proc
            )

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
            self.proc.wait()
        else:
            serving_harness.stop_process(self.proc, timeout=60)
        self._copier.join(timeout=30)
        self.controller.close()


def write_config(path: pathlib.Path, bases: dict, log_prefix: str, rate: float) -> None:
    """The ModelServerConfig of `bases` (name -> base path), written whole (`config_flag`)."""
    entries = []
    for name, base in bases.items():
        entry = model_config(name, base)
        if name != EXPORTED:
            entry.model_version_policy.latest.num_versions = 2
        if name == MODEL:
            entry.logging_config.sampling_config.sampling_rate = rate
            entry.logging_config.log_collector_config.filename_prefix = log_prefix
        entries.append(entry)
    serving_harness.config_flag(path, entries)


# ------------------------------------------------------------------------------ traffic
@dataclasses.dataclass
class Call:
    end: float  # time.monotonic() at the answer
    seconds: float
    good: bool
    status: int  # HTTP status (gRPC: serving.wire.errors.http_status of its code); 0: no answer
    kind: str


def _tensor(values, dtype="string", shape=None):
    from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

    dims = [tensor_shape_pb2.TensorShapeProto.Dim(size=n) for n in (shape or [len(values)])]
    proto = tensor_pb2.TensorProto(tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=dims))
    if dtype == "string":
        proto.dtype = types_pb2.DT_STRING
        proto.string_val.extend(v if isinstance(v, bytes) else v.encode() for v in values)
    else:
        proto.dtype = types_pb2.DT_INT64
        proto.int64_val.extend(values)
    return proto


def _predict(model, inputs, text, version=None, signature=""):
    """A PredictRequest: `text` in the input "text" (others get "")."""
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    if version:
        request.model_spec.version.value = version
    for name in inputs:
        request.inputs[name].CopyFrom(_tensor([text if name == "text" else ""]))
    return request


def _with_input(request, name, tensor):
    request.inputs[name].CopyFrom(tensor)
    return request


# kind -> (soak, inputs) -> PredictRequest
BAD_GRPC = {
    "unknown model": lambda s, i: _predict("no_such_model", i, "x"),
    "unknown signature": lambda s, i: _predict(MODEL, i, "x", signature="no_such_signature"),
    "deleted version": lambda s, i: _predict(MODEL, i, "x", version=s.deleted_version()),
    "missing input": lambda s, i: _predict(MODEL, [], "x"),
    "unknown input": lambda s, i: _with_input(_predict(MODEL, i, "x"), "nope", _tensor(["x"])),
    "wrong dtype": lambda s, i: _with_input(_predict(MODEL, i, ""), "text", _tensor([7], "int")),
    "non-UTF-8 text": lambda s, i: _predict(MODEL, i, b"\xff\xfe"),
    "text too long": lambda s, i: _predict(MODEL, i, "x" * (MAX_TEXT + 1)),
    "batch too large": lambda s, i: _with_input(
        _predict(MODEL, i, ""), "text", _tensor(["x"] * (MAX_BATCH + 1))
    ),
    "declared size, no content": lambda s, i: _with_input(
        _predict(MODEL, i, ""), "text", _tensor([], shape=[1 << 40])
    ),
}
# kind -> soak -> (path, body)
BAD_REST = {
    "malformed JSON": lambda s: (f"/v1/models/{MODEL}:predict", b'{"instances": ['),
    "not an object": lambda s: (f"/v1/models/{MODEL}:predict", b"[1, 2]"),
    "deeply nested": lambda s: (f"/v1/models/{MODEL}:predict", b"[" * 100000 + b"]" * 100000),
    "non-UTF-8 body": lambda s: (f"/v1/models/{MODEL}:predict", b'{"instances": ["\xff"]}'),
    "huge number": lambda s: (f"/v1/models/{MODEL}:predict", b'{"instances": [1e999]}'),
    "mistyped text": lambda s: (f"/v1/models/{MODEL}:predict", b'{"instances": [{"text": 5}]}'),
    "body too large": lambda s: (f"/v1/models/{MODEL}:predict", b" " * (MAX_BODY + 1)),
    "unknown model": lambda s: ("/v1/models/no_such_model:predict", b'{"instances": ["x"]}'),
    "unknown verb": lambda s: (f"/v1/models/{MODEL}:explode", b"{}"),
    "deleted version": lambda s: (
        f"/v1/models/{MODEL}/versions/{s.deleted_version()}:predict",
        b'{"instances": [{"text": "x"}]}',
    ),
}


def _rest(port: int, path: str, body: bytes) -> int:
    """POSTs `body` on a new connection; the HTTP status (0: no answer)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        try:
            connection.request("POST", path, body, {"Content-Type": "application/json"})
        except OSError:
            pass  # refused mid-body (too large): the answer may still be there
        response = connection.getresponse()
        response.read()
        return response.status
    # AttributeError: http.client reading a response on a connection that never opened.
    except (OSError, http.client.HTTPException, AttributeError):
        return 0
    finally:
        connection.close()


def client(soak, k: int, stop: threading.Event, calls: list) -> None:
    """Client `k` (even: gRPC, odd: REST) until `stop`; one Call per request into `calls`, kept
    even when the client itself fails (its requests so far were made and answered)."""
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    from serving.wire.errors import http_status

    channel = grpc.insecure_channel(soak.server.grpc)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    kinds = list(BAD_GRPC if k % 2 == 0 else BAD_REST)
    mine, i = [], k
    try:
        while not stop.is_set():
            i += 1
            good = i % soak.bad_every != 0
            kind = "good" if good else kinds[(i // soak.bad_every) % len(kinds)]
            start = time.monotonic()
            if k % 2 == 0:
                model = soak.pick(i)
                request = (
                    _predict(model, soak.inputs, SENTENCES[i % len(SENTENCES)])
                    if good
                    else BAD_GRPC[kind](soak, soak.inputs)
                )
                try:
                    stub.Predict(request, timeout=120)
                    status = 200
                except grpc.RpcError as e:
                    status = http_status(e.code())
            else:
                text = SENTENCES[i % len(SENTENCES)]
                instance = {n: text if n == "text" else "" for n in soak.inputs}
                path, body = (
                    (
                        f"/v1/models/{soak.pick(i)}:predict",
                        json.dumps({"instances": [instance]}).encode(),
                    )
                    if good
                    else BAD_REST[kind](soak)
                )
                status = _rest(soak.server.rest_port, path, body)
            end = time.monotonic()
            mine.append(Call(end, end - start, good, status, kind))
    finally:
        channel.close()
        calls.extend(mine)


# ------------------------------------------------------------------------------ the soak
class Soak:
    """The state the clients and the events share."""

    def __init__(self, work: pathlib.Path, source: pathlib.Path, log_disk: SmallDisk, exports):
        self.work, self.source, self.log_disk = work, source, log_disk
        self.bases = {MODEL: work / "models" / MODEL}
        if exports is not None:
            self.bases[EXPORTED] = exports
        self.config = work / "models.config"
        self.log_prefix = str(log_disk.path / "requests")
        self.serving = [MODEL]  # what good requests go to
        self.deleted = []  # version numbers whose directory was deleted
        self.version = 0  # the newest version number used
        self.rate = 1.0
        self.bad_every = 5
        self.server = self.inputs = None
        self.events = []  # (time.monotonic(), kind)

    def pick(self, i: int) -> str:
        serving = self.serving
        return serving[i % len(serving)]

    def deleted_version(self) -> int:
        return self.deleted[-1] if self.deleted else 999999

    def write_config(self) -> None:
        write_config(self.config, self.bases, self.log_prefix, self.rate)

    def publish(self, corrupt: bool = False) -> int:
        self.version += 1
        base = self.bases[MODEL]
        if corrupt:
            staged = base / f".tmp-{self.version}"
            shutil.copytree(self.source, staged)
            (staged / "saved_model.pb").write_bytes(b"not a SavedModel")
            staged.rename(base / str(self.version))
        else:
            publish(self.source, base, self.version)
        return self.version

    def on_disk(self) -> list:
        return sorted(int(n) for n in os.listdir(self.bases[MODEL]) if n.isdigit())

    def wait(self, name, done):
        self.server.controller.wait(name, done, TIMEOUT_S, proc=self.server.proc)

    def settled_rss(self) -> float:
        """The server's RSS MiB once no version of any model is loading or unloading (the
        disk-fault worker publishes versions of its own at any moment): the same models loaded
        at every reading, so it measures growth, not a load caught halfway."""
        busy = ("START", "LOADING", "UNLOADING")
        for name in list(self.bases):
            self.wait(name, lambda s: not any(state in busy for state in s.values()))
        return server_stats(self.server.proc.pid)[0]

    def event(self, kind: str) -> None:
        if kind == "publish":
            v = self.publish()
            self.wait(MODEL, lambda s: s.get(v) == "AVAILABLE")
            for old in self.on_disk()[:-2]:
                shutil.rmtree(self.bases[MODEL] / str(old))
        elif kind == "corrupt version":
            v = self.publish(corrupt=True)
            self.wait(MODEL, lambda s: s.get(v) == "END")
            shutil.rmtree(self.bases[MODEL] / str(v))
        elif kind == "delete newest version":
            newest = self.on_disk()[-2:]
            self.wait(MODEL, lambda s: all(s.get(v) == "AVAILABLE" for v in newest))
            shutil.rmtree(self.bases[MODEL] / str(newest[-1]))
            self.wait(MODEL, lambda s: s.get(newest[-1]) in (None, "END"))
            self.deleted.append(newest[-1])  # from now on requests for it are bad
        elif kind == "config: add soak_b":
            self.bases[SECOND] = self.work / "models" / SECOND
            self.bases[SECOND].mkdir(parents=True, exist_ok=True)
            if not os.listdir(self.bases[SECOND]):
                publish(self.source, self.bases[SECOND], 1)
            self.rate = 0.5
            self.write_config()
            self.wait(SECOND, lambda s: "AVAILABLE" in s.values())
            self.serving = [MODEL, SECOND]
        elif kind == "config: remove soak_b":
            self.serving = [MODEL]
            time.sleep(2.0)  # requests that picked soak_b are answered
            del self.bases[SECOND]
            self.rate = 1.0
            self.write_config()
            self.wait(SECOND, lambda s: all(state == "END" for state in s.values()))
        elif kind == "rotate request logs":
            files = sorted(self.log_disk.path.glob("requests-*"), key=os.path.getmtime)
            for path in files[:-1]:
                path.unlink()
        self.events.append((time.monotonic(), kind))


def server_stats(pid: int) -> tuple:
    """(resident MiB, threads, open file descriptors) of process `pid`."""
    fields = proc_status(pid)
    rss = int(fields["VmRSS"].split()[0]) / 1024
    return rss, int(fields["Threads"]), len(os.listdir(f"/proc/{pid}/fd"))


COLUMNS = ("minute", "RSS MiB", "threads", "fds", "good", "p50 ms", "p99 ms", "failed good")
COLUMNS += ("bad", "bad 5xx", "events")
WINDOW = 5  # spans per RSS window in the report


def spans(calls: list, samples: list, events: list, start: float, sample_s: float) -> list:
    """One row (COLUMNS) per span of `sample_s`, ending at its sample."""
    rows = []
    for n, (at, rss, threads, fds) in enumerate(samples):
        lo = at - sample_s
        mine = [c for c in calls if lo <= c.end < at]
        good = [c.seconds for c in mine if c.good and c.status == 200]
        done = collections.Counter(kind for t, kind in events if lo <= t < at)
        rows.append(
            (
                f"{round((at - start) / 60, 2):g}",  # minutes
                round(rss, 1),
                threads,
                fds,
                sum(c.good for c in mine),
                common.percentile(good, 50) * 1e3 if good else None,
                common.percentile(good, 99) * 1e3 if good else None,
                sum(c.good and c.status != 200 for c in mine),
                sum(not c.good for c in mine),
                sum(not c.good and c.status >= 500 for c in mine),
                ", ".join(f"{k} x{v}" if v > 1 else k for k, v in done.items()),
            )
        )
    return rows


def check_request_logs(directory: pathlib.Path) -> dict:
    """Files, complete records, files cut inside a record, corrupt files, empty files."""
    from tensorflow_serving.apis import prediction_log_pb2

    from serving.wire import tfrecords

    out = collections.Counter()
    for path in directory.glob("requests-*"):
        out["files"] += 1
        out["empty"] += path.stat().st_size == 0
        try:
            for record in tfrecords.iter_records(str(path)):
                prediction_log_pb2.PredictionLog.FromString(record)
                out["records"] += 1
        except tfrecords.TruncatedRecordError:
            out["cut"] += 1
        except tfrecords.RecordError:
            out["corrupt"] += 1
    return {k: out[k] for k in ("files", "records", "cut", "corrupt", "empty")}


def kill_during_reload(soak: Soak, server_flags: list, fsize) -> dict:
    """Adds KILLED to the config file, SIGKILLs the server as it starts applying it (loading
    KILLED), checks the request logs, restarts the server and sends good requests to every
    model."""
    log_lines = soak.server.text().count("changed: applying it")
    soak.bases[KILLED] = soak.work / "models" / KILLED
    publish(soak.source, soak.bases[KILLED], 1)
    soak.write_config()
    deadline = time.monotonic() + TIMEOUT_S
    while soak.server.text().count("changed: applying it") == log_lines:
        if time.monotonic() > deadline:
            raise RuntimeError("the server never applied the changed config file")
        time.sleep(0.005)
    soak.server.stop(kill=True)
    mid_load = f"serving {KILLED} version" not in soak.server.text()
    logs = check_request_logs(soak.log_disk.path)
    started = time.monotonic()
    soak.server = Server(server_flags, soak.work / "server.log", fsize)
    names = list(soak.bases)
    soak.server.wait_available(*names)
    ok = 0
    for name in names:
        inputs = string_inputs(soak.server.grpc, name)
        for text in SENTENCES:
            body = json.dumps({"instances": [{n: text for n in inputs}]}).encode()
            ok += _rest(soak.server.rest_port, f"/v1/models/{name}:predict", body) == 200
    return {
        "killed_mid_load": mid_load,
        "logs_after_kill": logs,
        "serving_again_s": round(time.monotonic() - started, 1),
        "models": names,
        "good_after_restart": f"{ok} of {len(names) * len(SENTENCES)}",
    }


def run_soak(
    source: pathlib.Path,
    work: pathlib.Path,
    minutes: float,
    clients: int,
    interval_s: float,
    poll_s: float,
    sample_s: float = 60.0,
    disk: str = "auto",
    export_fractions=(0.05, 0.3, 0.6, 0.9, 1.2, 1.5),
    checkpoint_multiples=(0.5, 1.5, 2.5, 3.5),
    bad_every: int = 5,
    log_disk_bytes: int = LOG_DISK_BYTES,
) -> dict:
    """The whole run in `work` (a fresh directory); the result dict `report` lays out.
    `interval_s` 0: `sample_s` / len(EVENTS), a whole cycle per span."""
    interval_s = interval_s or sample_s / len(EVENTS)
    kind = disk_kind(disk)
    log_disk = SmallDisk(work / "logs", kind, log_disk_bytes)
    fault_disk = SmallDisk(work / "faults", kind, FAULT_DISK_BYTES) if export_fractions else None
    soak = Soak(work, source, log_disk, fault_disk and fault_disk.path / "exports" / EXPORTED)
    soak.bad_every = bad_every
    soak.bases[MODEL].mkdir(parents=True)
    soak.publish()
    soak.write_config()
    fsize = FSIZE_BYTES if kind == "fsize" else None
    flags = [
        f"--model_config_file={soak.config}",
        f"--model_config_file_poll_wait_seconds={poll_s}",
        f"--file_system_poll_wait_seconds={poll_s}",
        *SERVER_FLAGS,
    ]
    stop, calls, threads, samples, faults, child = threading.Event(), [], [], [], {}, None
    cycles = []  # RSS MiB after each whole cycle of EVENTS
    try:
        soak.server = Server(flags, work / "server.log", fsize)
        soak.server.wait_available(MODEL)
        soak.inputs = string_inputs(soak.server.grpc, MODEL)
        pid = soak.server.proc.pid
        if fault_disk is not None:
            child = start_disk_faults(fault_disk, export_fractions, checkpoint_multiples)
            worker = threading.Thread(
                target=lambda: faults.update(disk_faults_result(child, work)), daemon=True
            )
            worker.start()
            # Its first export (all the room) loaded before the first span: a model, not growth.
            while (
                worker.is_alive()
                and "AVAILABLE" not in soak.server.controller.states(EXPORTED).values()
            ):
                time.sleep(0.2)
        for k in range(clients):
            threads.append(threading.Thread(target=client, args=(soak, k, stop, calls)))
            threads[-1].start()
        start = next_sample = time.monotonic()
        n = 0
        next_event = start + interval_s
        while (
            time.monotonic() - start < minutes * 60
            or n < len(EVENTS)
            or (fault_disk is not None and worker.is_alive())
        ):
            now = time.monotonic()
            if now >= next_sample + sample_s:  # before the event due at the same moment
                next_sample += sample_s
                samples.append((next_sample, *server_stats(pid)))
            if now >= next_event:
                soak.event(EVENTS[n % len(EVENTS)])
                n += 1
                next_event += interval_s  # on the schedule, so spans stay in phase
                if n % len(EVENTS) == 0:  # a whole cycle done: the same point every time
                    cycles.append(soak.settled_rss())
            time.sleep(0.05)
        stop.set()
        for thread in threads:
            thread.join(timeout=TIMEOUT_S)
        exported = {}
        if fault_disk is not None and "export" in faults:
            newest = faults["export"][-1]["versions"][-1]
            soak.wait(EXPORTED, lambda s: s.get(newest) == "AVAILABLE")
            exported = soak.server.controller.states(EXPORTED)
        server_log = soak.server.text()
        restart = kill_during_reload(soak, flags, fsize)
        logs = check_request_logs(log_disk.path)
    except RuntimeError as e:
        raise RuntimeError(
            f"{e}\nserver log:\n{(work / 'server.log').read_text()[-3000:]}"
        ) from None
    finally:
        stop.set()
        if soak.server is not None:
            soak.server.stop()
        if child is not None and child.poll() is None:  # stopped early: SIGTERM, an error
            child.kill()
            child.wait()
        log_disk.close()
        if fault_disk is not None:
            fault_disk.close()
    return {
        "disk": kind,
        "rows": spans(calls, samples, soak.events, start, sample_s),
        "cycle_rss": cycles,
        "requests": len(calls),
        "good": sum(c.good for c in calls),
        "failed_good": collections.Counter(c.status for c in calls if c.good and c.status != 200),
        "bad": collections.Counter(c.kind for c in calls if not c.good),
        "bad_status": collections.Counter((c.kind, c.status) for c in calls if not c.good),
        "bad_5xx": sum(not c.good and c.status >= 500 for c in calls),
        "bad_unanswered": sum(not c.good and c.status == 0 for c in calls),
        "events": collections.Counter(kind for _, kind in soak.events),
        "server_errors": server_errors(server_log),
        "faults": faults,
        "exported_states": exported,
        "request_logs": logs,
        "restart": restart,
    }


def server_errors(text: str) -> collections.Counter:
    """The messages of the server's error lines (`E<date> ... file.py:line] message`), paths and
    numbers masked, counted."""
    return collections.Counter(
        re.sub(r"\d+", "N", re.sub(r"/[^\s;:]+", "<path>", line.split("] ", 1)[1]))[:200]
        for line in text.splitlines()
        if re.match(r"E\d{4} ", line)
    )


def missed_targets(result: dict) -> list[str]:
    """Each target of the module docstring that `result` misses, one line each (empty: all met):
    good requests sent and answered, 0 failed good requests, 0 bad ones answered 5xx or unanswered, the RSS after each whole cycle
    within +5% of the first cycle's, threads and descriptors at the end within 10% + 2 of the
    highest of the first WINDOW spans (gRPC's pool moves by a thread or two), no corrupt request log (at the end and after the SIGKILL), every good
    request after the restart answered, and every disk fault leaving whole files: no incomplete
    or hidden version, no hidden checkpoint file, each training rerun to its last step."""
    missed = []
    if not result["good"]:
        missed.append(f"{result['requests']} requests, none of them a good one answered")
    failed = sum(result["failed_good"].values())
    if failed:
        missed.append(f"{failed} good requests failed (target 0): {dict(result['failed_good'])}")
    if result["bad_5xx"]:
        missed.append(f"{result['bad_5xx']} bad requests answered 5xx (target 0)")
    if result["bad_unanswered"]:
        missed.append(f"{result['bad_unanswered']} bad requests unanswered (target 0)")
    cycles = result["cycle_rss"]
    if len(cycles) > 1 and max(cycles[1:]) > cycles[0] * 1.05:
        growth = (max(cycles[1:]) / cycles[0] - 1) * 100
        missed.append(f"RSS after a whole cycle {growth:+.1f}% of the first (target at most +5%)")
    rows = result["rows"]
    for column, what in ((2, "threads"), (3, "file descriptors")):
        first = [r[column] for r in rows[:WINDOW] if r[column] is not None]
        last = rows[-1][column] if rows else None
        if first and last is not None and last > max(first) * 1.1 + 2:
            missed.append(
                f"{what} {last} at the end, above the first spans' highest {max(first)} "
                "(target: flat, within 10% + 2)"
            )
    for when, logs in (
        ("at the end", result["request_logs"]),
        ("after the SIGKILL", result["restart"]["logs_after_kill"]),
    ):
        if logs["corrupt"]:
            missed.append(f"{logs['corrupt']} corrupt request logs {when} (target 0)")
    ok, _, total = result["restart"]["good_after_restart"].partition(" of ")
    if ok != total:
        missed.append(f"{ok} of {total} good requests answered after the restart (target all)")
    faults = result["faults"]
    if "crashed" in faults:
        missed.append(f"the disk-faults process crashed: {faults['crashed']}")
    for attempt in faults.get("export", []):
        if attempt["incomplete"] or attempt["hidden"]:
            missed.append(
                f"an export with {attempt['free']} bytes free left incomplete versions "
                f"{attempt['incomplete']} and hidden ones {attempt['hidden']} (target none)"
            )
    for attempt in faults.get("checkpoint", []):
        if attempt["hidden"] or not attempt["weights_present"]:
            missed.append(
                f"training with {attempt['free']} bytes free left hidden files "
                f"{attempt['hidden']}, its checkpoint's weights present "
                f"{attempt['weights_present']} (target: whole or absent)"
            )
        if attempt["final_step"] != attempt["steps"]:
            missed.append(
                f"training with {attempt['free']} bytes free resumed to step "
                f"{attempt['final_step']} of {attempt['steps']}"
            )
    return missed


def cycle_line(rss: list) -> str:
    """The growth measure: RSS read after each whole cycle of EVENTS, once nothing is loading
    (`Soak.settled_rss`): the same point of the cycle whatever the machine's pace (a minute's
    sample lands elsewhere in the cycle, or inside a load, when a slow load pushes the events
    past their schedule)."""
    if not rss:
        return "RSS after each whole cycle of events: no cycle completed."
    growth = (max(rss[1:] or rss) / rss[0] - 1) * 100
    return (
        f"RSS after each whole cycle of events ({len(rss)} cycles): first {rss[0]:,.1f} MiB, "
        f"highest after it {max(rss[1:] or rss):,.1f} ({growth:+.1f}%, target at most +5%), "
        f"lowest {min(rss):,.1f}, last {rss[-1]:,.1f}."
    )


def report(result: dict) -> str:
    rows = [tuple("n/a" if v is None else v for v in row) for row in result["rows"]]
    table = common.markdown_table(COLUMNS, rows)
    rss = [r[1] for r in result["rows"]]
    growth = (max(rss[1:] or rss) / rss[0] - 1) * 100 if rss else 0.0
    # A reload/swap cycle moves RSS by more than 5% (a second model, a second version loaded or
    # not): spans compare like with like when each holds whole cycles (the default pace); the
    # highest and lowest of each WINDOW spans are a second view that holds at any pace.
    windows = [rss[i : i + WINDOW] for i in range(0, len(rss), WINDOW)]
    trend = (max(windows[-1]) / max(windows[0]) - 1) * 100 if rss else 0.0
    threads = [r[2] for r in result["rows"]]
    fds = [r[3] for r in result["rows"]]
    lines = [
        table,
        "",
        f"Requests: {result['requests']:,}; good {result['good']:,}, failed good "
        f"{sum(result['failed_good'].values())} (target 0) {dict(result['failed_good'])}; bad "
        f"{sum(result['bad'].values()):,}, answered 5xx {result['bad_5xx']} (target 0), "
        f"unanswered {result['bad_unanswered']}; statuses of bad requests "
        f"{dict(sorted(result['bad_status'].items()))}.",
        f"RSS per span (read at the clock, whatever is loading): first {rss[0] if rss else 'n/a'}"
        f" MiB, most after it {max(rss[1:] or rss or [0])} MiB ({growth:+.1f}%); highest / "
        f"lowest per {WINDOW} spans {[(max(w), min(w)) for w in windows]}, the last highest "
        f"{trend:+.1f}% against the first; threads "
        f"{min(threads or [0])}-{max(threads or [0])}, file descriptors "
        f"{min(fds or [0])}-{max(fds or [0])} (first {threads[:1]} / {fds[:1]}, last "
        f"{threads[-1:]} / {fds[-1:]}).",
        cycle_line(result["cycle_rss"]),
        f"Events: {dict(result['events'])}. Small disks: {result['disk']}.",
        f"Request logs at the end: {result['request_logs']}; after the SIGKILL: "
        f"{result['restart']['logs_after_kill']}.",
        f"SIGKILL during a config reload (before {KILLED} was serving: "
        f"{result['restart']['killed_mid_load']}), then restart: serving again after "
        f"{result['restart']['serving_again_s']} s, models {result['restart']['models']}, good "
        f"requests {result['restart']['good_after_restart']}.",
        "Server errors logged (numbers and paths masked): "
        + "; ".join(f"{n} x {line}" for line, n in result["server_errors"].most_common(6)),
    ]
    faults = result["faults"]
    if faults:
        lines.append("")
        lines.append(f"Disk faults ({result['disk']}):")
        if "crashed" in faults:
            lines.append(f"- the fault process crashed: {faults['crashed']}")
        for attempt in faults.get("export", []):
            lines.append(
                f"- export, {attempt['free']} bytes free: {attempt['outcome']}; versions "
                f"{attempt['versions']}, incomplete {attempt['incomplete']}, hidden left "
                f"{attempt['hidden']}"
            )
        for attempt in faults.get("checkpoint", []):
            lines.append(
                f"- training, {attempt['free']} bytes free: {attempt['outcome']}; checkpoint "
                f"step {attempt['state_step']}, its weights present {attempt['weights_present']}, "
                f"hidden left {attempt['hidden']}; rerun resumed from {attempt['resumed_from']} "
                f"to {attempt['final_step']}"
            )
        lines.append(f"- the server's view of {EXPORTED}: {result['exported_states']}")
    return "\n".join(lines) + "\n"


TOPIC = "hardening"
FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_float("minutes", 30.0, "Least duration of the traffic.")
    flags.DEFINE_integer("clients", 8, "Client threads (half gRPC, half REST).", lower_bound=1)
    flags.DEFINE_float(
        "interval_s",
        0.0,
        "Seconds between events (0: sample_s over the number of events).",
        lower_bound=0,
    )
    flags.DEFINE_float("poll_s", 1.0, "The server's config-file and file-system poll.")
    flags.DEFINE_float("sample_s", 60.0, "Seconds per row of the table.")
    flags.DEFINE_enum("disk", "auto", ["auto", "tmpfs", "fsize"], "Small disks (see the doc).")
    flags.DEFINE_enum("model", "tiny", ["tiny", "minilm"], "tiny: a 1-layer H=8 encoder.")
    flags.DEFINE_bool("append", True, common.append_help(TOPIC))
    common.bounds("minutes", "poll_s", "sample_s")


def main(argv):
    del argv
    common.exit_on_sigterm()
    desc = common.machine_description(["grpcio"])
    with tempfile.TemporaryDirectory(prefix="soak_") as tmp:
        tmp = pathlib.Path(tmp)
        task = serving_harness.sst2_classifier(16, TINY_ENCODER if FLAGS.model == "tiny" else None)
        source = pathlib.Path(task.export(str(tmp / "source"), "source"))
        result = run_soak(
            source,
            tmp / "run",
            FLAGS.minutes,
            FLAGS.clients,
            FLAGS.interval_s,
            FLAGS.poll_s,
            FLAGS.sample_s,
            FLAGS.disk,
        )
    body = report(result) + (
        f"\n{FLAGS.clients} clients, at least {FLAGS.minutes:g} minutes, an event every "
        f"{FLAGS.interval_s or FLAGS.sample_s / len(EVENTS):g} s, server polls every {FLAGS.poll_s:g} s, model {FLAGS.model}; "
        f"command: nice -n 10 python -m tools.soak (the machine shared with other work).\n"
    )
    common.report(TOPIC, "Soak and faults", body, desc, FLAGS.append)
    return common.targets_status(missed_targets(result), "soak")


if __name__ == "__main__":
    define_flags()
    common.run_with_targets(main)
