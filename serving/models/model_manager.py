"""Model management: version directories polled on a file system, version policies, labels, safe
unloading.

Behaviour (as `tensorflow_model_server` with its default availability-preserving policy):
- A base path is any URI `keras_bert.fileio` handles (local, `gs://`, `hdfs://`, `s3://` with its
  plugin, `ram://`), kept as typed. `<base_path>/<int>/` directories are versions; other names
  (`2.tmp`, `.partial`, the hidden staging directories of our exporter) are ignored.
- When a version is ready to load (the rule of `scan_versions`): on a file system whose directory
  rename is atomic (local, HDFS) at once, as TF Serving does; elsewhere (`gs://`, `s3://`,
  `ram://`, where a directory is published by copying its files) when it holds
  `fileio.COMPLETE_MARKER` (written last by our exporter, `fileio.publish_dir`), or, for a
  directory another tool wrote (no `assets/export_config.json`, such as TensorFlow's own
  `tf.saved_model.save` to `gs://`), once `saved_model.pb` is readable (TF Serving's rule: TF
  writes it after the variables). A version of ours without the marker is a publish in
  progress: it is not loaded (nor counted by the version policy) until the marker appears.
- The version policy (`latest {num_versions}` default 1, `all`, `specific {versions}`) picks the
  aspired versions; each is loaded (and its warmup requests replayed) before it serves.
- A version that fails to load is reported in GetModelStatus (state END + error) and retried
  `max_num_load_retries` times, `load_retry_interval_s` apart (TF Serving's
  `--max_num_load_retries`, `--load_retry_interval_micros`); after that only when its files
  change (our extension: a copy that completes is picked up). It never replaces a serving
  version: previously loaded versions keep serving until enough aspired versions are AVAILABLE.
- A base path that cannot be reached (an unregistered scheme, no credentials, a file system that
  does not answer within `reach_timeout_s`) is logged and shown in GetModelStatus (a version 0
  entry, state START, error UNAVAILABLE "cannot reach model base path <URI as typed>: <cause>");
  the server keeps running and serving the versions it has, and the model's versions are loaded
  at the first poll that can read the path.
- A removed version stops taking new requests at once and is unloaded when its in-flight requests
  finish (reference counting).
- `reload(configs)` (ModelService/HandleReloadConfigRequest) replaces the served set as TF Serving's
  ServerCore::ReloadConfig does: added models are loaded before it returns, removed models stop
  taking requests and unload when idle, changed version policies apply with the same
  availability-preserving switch, and labels are updated last, only when each points to an
  AVAILABLE version. `unapplied(configs)` says what of a config waits on load state (a refused
  label, a specific version or a model with no version loaded yet); reloading the same config
  applies what has become possible (`--model_config_file_poll_wait_seconds` does, at every poll).
"""

import concurrent.futures
import contextlib
import ctypes
import dataclasses
import gc
import logging
import threading
import time

import grpc
from tensorflow_serving.apis import get_model_status_pb2

from keras_bert import fileio
from serving.models.servable import explain_load_error, load_servable, tensorflow
from serving.wire import errors

State = get_model_status_pb2.ModelVersionStatus.State
_LOG = logging.getLogger("serving")
# Written into every version by our exporter (keras_bert.saved_model.exporter.CONFIG_FILENAME):
# such a version is published with fileio.publish_dir and complete once it holds the marker.
EXPORTER_CONFIG = ("assets", "export_config.json")
MAX_NUM_LOAD_RETRIES = 5  # tensorflow_model_server's defaults
LOAD_RETRY_INTERVAL_S = 60.0
REACH_TIMEOUT_S = 30.0


def _malloc_trim():
    """glibc's malloc_trim(pad); None where the C library has none (musl, macOS) or where no
    process-wide C library can be opened by name (Windows)."""
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except (OSError, TypeError):
        return None


_MALLOC_TRIM = _malloc_trim()


class _Version:
    def __init__(self, version):
        self.version = version
        self.state = State.START
        self.error = None  # (grpc.StatusCode, message)
        self.servable = None
        self.refcount = 0
        self.fingerprint = None  # of the files the last load attempt read
        self.failures = 0  # failed loads since the files last changed
        self.retry_at = None  # time.monotonic() of the next retry; None: none scheduled


class _Model:
    def __init__(self, config):
        self.config = config
        self.labels = dict(config.version_labels)
        self.versions = {}  # int -> _Version
        self.warning = None  # last "no versions" warning logged (logged again only when it changes)
        self.unreachable = None  # "cannot reach model base path ...", while it cannot be read
        self.scan = None  # the last Scan of the base path
        self.listing = None  # the Future of a listing still in flight (a file system not answering)
        self.pending_logged = set()  # versions logged as "publish in progress"


def _fingerprint(path):
    """(relative name, size, mtime) of every file under a version directory."""
    items = []
    for root, _, files in fileio.walk(path):
        rel_root = root[len(path) :].strip("/")
        for name in files:
            try:
                st = fileio.stat(fileio.join(root, name))
            except fileio.file_errors():
                continue
            items.append((f"{rel_root}/{name}" if rel_root else name, st.length, st.mtime_nsec))
    return tuple(sorted(items))


@dataclasses.dataclass(frozen=True)
class Scan:
    """What a poll found under a base path.

    ready: version numbers that may be loaded. pending: version directories of our exporter still
    being published (no COMPLETE_MARKER yet). exists: whether the base path exists. hint: a note
    for the "no versions" warning ("" when none).
    """

    ready: frozenset = frozenset()
    pending: frozenset = frozenset()
    exists: bool = True
    hint: str = ""


def version_ready(version_dir, atomic_rename):
    """Whether a version directory may be loaded (the rule in the module docstring)."""
    if atomic_rename or fileio.is_complete(version_dir):
        return True
    if fileio.exists(fileio.join(version_dir, *EXPORTER_CONFIG)):
        return False  # ours, still being copied: saved_model.pb then the marker come last
    return fileio.exists(fileio.join(version_dir, "saved_model.pb"))


def scan_versions(base_path, known_ready=frozenset()):
    """Lists the integer version directories under `base_path` (any URI) and sorts them into ready
    and pending (`version_ready`); versions in `known_ready` are not checked again.

    Raises:
        fileio.UnreachablePathError: the file system refused (an unregistered scheme, no access):
            "cannot reach model base path <base_path>: <cause>".
    """
    try:
        if not fileio.exists(base_path):
            return Scan(exists=False)
        names = fileio.listdir(base_path)
    except (*fileio.not_found_errors(), NotADirectoryError):
        return Scan()  # a file, or removed since: no versions
    except fileio.file_errors() as e:
        cause = " ".join((getattr(e, "message", None) or str(e)).split())[:300]
        raise fileio.UnreachablePathError(
            f"cannot reach model base path {base_path}: {cause}"
        ) from None
    atomic = fileio.scheme(base_path) in fileio.ATOMIC_RENAME_SCHEMES
    ready, pending = set(), set()
    for name in names:
        if not name.isdigit() or int(name) < 1:
            continue
        version_dir = fileio.join(base_path, name)
        if int(name) in known_ready:
            ready.add(int(name))
        elif fileio.isdir(version_dir):
            (ready if version_ready(version_dir, atomic) else pending).add(int(name))
    hint = "" if ready or pending else _version_dir_hint(base_path)
    return Scan(frozenset(ready), frozenset(pending), True, hint)


def _version_dir_hint(base_path):
    trimmed = base_path.rstrip("/") or base_path
    if fileio.basename(trimmed).isdigit() and fileio.isfile(fileio.join(trimmed, "saved_model.pb")):
        return (
            "; did you point --model_base_path at a version directory? use its parent "
            f"{fileio.parent(trimmed)}"
        )
    return ""


def no_versions_warning(name, base_path, scan):
    """The WARNING for a base path with no version directory (as tensorflow_model_server logs
    it), with a hint when `base_path` is itself a version directory; None when versions exist
    (ready or being published)."""
    if scan.ready or scan.pending:
        return None
    message = f"No versions of servable {name} found under base path {base_path}"
    if not scan.exists:
        return message + " (the path does not exist)"
    return message + scan.hint


def _in_daemon_thread(fn, *args):
    """A Future of `fn(*args)` run on a daemon thread: a file system that never answers holds
    that thread, not the poller, nor the process at exit (an executor's threads are joined)."""
    future = concurrent.futures.Future()

    def run():
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(fn(*args))
            except BaseException as e:
                future.set_exception(e)

    threading.Thread(target=run, name="base-path-listing", daemon=True).start()
    return future


def check_configs(model_configs):
    """Raises ValueError unless names are unique and non-empty, each has a base_path and the
    platform is TensorFlow."""
    names = [c.name for c in model_configs]
    if len(set(names)) != len(names) or not all(names):
        raise ValueError(f"model names must be unique and non-empty, got {names}")
    for c in model_configs:
        if c.model_platform not in ("", "tensorflow"):
            raise ValueError(
                f"model '{c.name}': model_platform '{c.model_platform}' is not supported"
            )
        if not c.base_path:
            raise ValueError(f"model '{c.name}' has no base_path")


def prepare_file_systems(model_configs) -> None:
    """A base path on a file system only TensorFlow reaches (gs://, ram://, s3:// with its plugin)
    sets up TensorFlow before it is first read (`servable.tensorflow()`: its threads, and the
    custom-op modules, which register plugins such as tensorflow_io's s3://); local base paths
    need none (`keras_bert.fileio`)."""
    if any(fileio.scheme(c.base_path) for c in model_configs):
        tensorflow()


def aspired_versions(policy, available_on_disk):
    """Versions to serve under a ServableVersionPolicy proto, given the version numbers on disk."""
    on_disk = sorted(available_on_disk)
    kind = policy.WhichOneof("policy_choice")
    if kind == "all":
        return set(on_disk)
    if kind == "specific":
        return set(policy.specific.versions) & set(on_disk)
    n = policy.latest.num_versions if kind == "latest" and policy.latest.num_versions > 0 else 1
    return set(on_disk[-n:])


class ModelManager:
    """Loads, serves and unloads model versions for a list of ModelConfig protos.

    Args:
        model_configs: tensorflow.serving.ModelConfig protos (name, base_path, model_version_policy,
            version_labels).
        poll_seconds: float; seconds between file-system polls; 0 polls once at start.
        on_loaded: callable(Servable) run before a version becomes AVAILABLE (warmup replay);
            raising fails the load.
        on_change: callable() after each poll (health status update).
        prefer_tflite_model: serve a version's `model.tflite` (LiteRT) when it has one.
        litert_threads: LiteRT interpreter threads (0 = one per CPU).
        max_num_load_retries: int >= 0; retries of a failed load before giving up (until the
            version's files change).
        load_retry_interval_s: float; seconds between those retries.
        reach_timeout_s: float; how long a listing of a base path may take before the path is
            reported unreachable (the listing goes on in the background; no second one starts
            while it hangs).
    """

    def __init__(
        self,
        model_configs,
        poll_seconds=1.0,
        on_loaded=None,
        on_change=None,
        prefer_tflite_model=False,
        litert_threads=0,
        max_num_load_retries=MAX_NUM_LOAD_RETRIES,
        load_retry_interval_s=LOAD_RETRY_INTERVAL_S,
        reach_timeout_s=REACH_TIMEOUT_S,
    ):
        check_configs(model_configs)
        prepare_file_systems(model_configs)
        if max_num_load_retries < 0 or load_retry_interval_s < 0:
            raise ValueError(
                f"max_num_load_retries={max_num_load_retries} and load_retry_interval_s="
                f"{load_retry_interval_s} must be >= 0"
            )
        self._models = {c.name: _Model(c) for c in model_configs}
        self._poll_lock = threading.Lock()  # one poll (or reload) at a time
        self._poll_seconds = poll_seconds
        self._on_loaded = on_loaded
        self._on_change = on_change
        self._prefer_tflite_model = prefer_tflite_model
        self._litert_threads = litert_threads
        self._max_retries = max_num_load_retries
        self._retry_interval = load_retry_interval_s
        self._reach_timeout = reach_timeout_s
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by stop() and when a retry is scheduled
        self._unloaded = threading.Event()  # a version was unloaded since the last collection
        self._thread = None

    # ---------------------------------------------------------------- polling
    def start(self):
        """Polls once (loading what is there), then polls every `poll_seconds` (0: never again)
        and retries failed loads when due, on a background thread."""
        self.poll_once()
        self._thread = threading.Thread(target=self._loop, name="model-poller", daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=30)
        with self._lock:
            for model in self._models.values():
                for v in model.versions.values():
                    if v.servable is not None:
                        v.servable.close()
                        v.servable = None

    def _next_retry(self):
        with self._lock:
            times = [
                v.retry_at
                for m in self._models.values()
                for v in m.versions.values()
                if v.retry_at is not None
            ]
        return min(times, default=None)

    def _loop(self):
        next_poll = time.monotonic() + self._poll_seconds if self._poll_seconds > 0 else None
        while not self._stop.is_set():
            due = [t for t in (next_poll, self._next_retry()) if t is not None]
            self._wake.wait(max(0.0, min(due) - time.monotonic()) if due else None)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                if next_poll is not None and time.monotonic() >= next_poll:
                    self.poll_once()
                    next_poll = time.monotonic() + self._poll_seconds
                else:
                    with self._poll_lock:  # retries due: the last listing, not a new one
                        self._poll_all(rescan=False)
            except Exception:
                _LOG.exception("file system poll failed")

    def poll_once(self):
        with self._poll_lock:
            self._poll_all()

    def _poll_all(self, rescan=True):
        for model in list(self._models.values()):
            self._poll_model(model, rescan)
        if self._on_change:
            self._on_change()
        self._collect_unloaded()

    def reload(self, model_configs):
        """Replaces the served models with `model_configs` (ModelConfig protos); returns when added
        models are loaded.

        Raises:
            ServingError INVALID_ARGUMENT (bad config; nothing changed), NOT_FOUND / UNKNOWN (an
            added model has no loadable version; the rest of the config applies), FAILED_PRECONDITION
            (a label names a version that is not AVAILABLE; the model keeps its previous labels).
        """
        try:
            check_configs(model_configs)
        except ValueError as e:
            raise errors.invalid_argument(str(e)) from None
        prepare_file_systems(model_configs)
        with self._poll_lock:
            added, changed = self._apply(model_configs)
            self._poll_all()
            if changed:  # not logged again when the same config is applied again
                _LOG.info("reloaded config: serving %s", self.model_names())
            self._check_added(added)
            self._update_labels(model_configs)

    def _apply(self, model_configs):
        """Swaps the model set under the lock; returns the added names and whether anything in
        the config changed."""
        wanted = {c.name: c for c in model_configs}
        with self._lock:
            changed = set(wanted) != set(self._models) or any(
                self._models[name].config != config
                for name, config in wanted.items()
                if name in self._models
            )
            for name in [n for n in self._models if n not in wanted]:
                _LOG.info("model %s removed from the config: unloading its versions", name)
                for v in self._models.pop(name).versions.values():
                    if v.state == State.AVAILABLE:
                        v.state = State.UNLOADING
                        self._maybe_finalize(v)
            added = [n for n in wanted if n not in self._models]
            for name, config in wanted.items():
                if name in self._models:
                    labels = self._models[name].labels
                    if config.base_path != self._models[name].config.base_path:
                        self._models[name].scan = None  # nothing known of the new path yet
                    self._models[name].config = config
                    self._models[name].labels = labels  # replaced once the versions are loaded
                else:
                    self._models[name] = _Model(config)
                    self._models[name].labels = {}
        return added, changed

    def _check_added(self, added):
        with self._lock:
            for name in added:
                model = self._models[name]
                if any(v.state == State.AVAILABLE for v in model.versions.values()):
                    continue
                failed = [v.error for v in model.versions.values() if v.error is not None]
                if failed:
                    raise errors.ServingError(failed[0][0], failed[0][1])
                raise errors.not_found(
                    model.warning or f"No versions of servable {name} could be loaded"
                )

    def _update_labels(self, model_configs):
        """All labels at once, or none (then every model keeps its previous labels)."""
        with self._lock:
            for config in model_configs:
                versions = self._models[config.name].versions
                for version in config.version_labels.values():
                    if version not in versions or versions[version].state != State.AVAILABLE:
                        raise errors.failed_precondition(
                            f"Request to assign label to version {version} of model {config.name}, "
                            "which is not currently available for inference."
                        )
            for config in model_configs:
                self._models[config.name].labels = dict(config.version_labels)

    def unapplied(self, model_configs):
        """What of `model_configs` (the config last given to `reload`, or at start) is not in
        effect because it waits on load state, one line each; empty when all of it is.

        A label not assigned (or not removed) as configured: `reload` assigns labels only when
        each names an AVAILABLE version. A version the `specific` policy names that is not
        AVAILABLE (not on disk yet, or still loading). A model with no AVAILABLE version (its base
        path missing, empty or unreachable). A model not served with this config (another config
        was applied since). `reload` with the same config again applies what has become possible.
        """
        lines = []
        with self._lock:
            for config in model_configs:
                name, model = config.name, self._models.get(config.name)
                if model is None or model.config != config:
                    lines.append(f"model {name} is not served with this config")
                    continue
                available = {n for n, v in model.versions.items() if v.state == State.AVAILABLE}
                if not available:
                    lines.append(f"model {name} has no available version")
                policy = config.model_version_policy
                if policy.WhichOneof("policy_choice") == "specific":
                    lines += [
                        f"model {name} version {n} (its specific policy) is not available"
                        for n in sorted(set(policy.specific.versions) - available)
                    ]
                wanted = dict(config.version_labels)
                lines += [
                    f"model {name} label '{label}' not assigned to version {version}"
                    for label, version in sorted(wanted.items())
                    if model.labels.get(label) != version
                ]
                lines += [
                    f"model {name} label '{label}' not removed"
                    for label in sorted(set(model.labels) - set(wanted))
                ]
        return lines

    def _scan(self, model):
        """`scan_versions` of the model's base path in a worker thread, waiting at most
        `reach_timeout_s`; a listing still hanging from an earlier poll is not waited for again.

        Returns the Scan, or None when the path cannot be reached (then `model.unreachable` says
        why; logged when it first says so).
        """
        base = model.config.base_path
        error = None
        if model.listing is not None and not model.listing.done():
            error = model.unreachable  # still no answer: do not start a second listing
        else:
            known = model.scan.ready if model.scan else frozenset()
            model.listing = _in_daemon_thread(scan_versions, base, known)
            try:
                scan = model.listing.result(timeout=self._reach_timeout)
                model.listing = None
            except concurrent.futures.TimeoutError:
                error = (
                    f"cannot reach model base path {base}: no answer from its file system in "
                    f"{self._reach_timeout:g} s"
                )
            except fileio.UnreachablePathError as e:
                model.listing, error = None, str(e)
        if error is not None:
            if error != model.unreachable:
                _LOG.error("model %s: %s", model.config.name, error)
            model.unreachable = error
            return None
        if model.unreachable is not None:
            _LOG.info("model %s: base path %s is readable again", model.config.name, base)
            model.unreachable = None
        return scan

    def _log_changes(self, model, scan):
        warning = no_versions_warning(model.config.name, model.config.base_path, scan)
        if warning != model.warning:  # at start and when it changes, not on every poll
            if warning:
                _LOG.warning("%s", warning)
            model.warning = warning
        for version in sorted(scan.pending - model.pending_logged):
            _LOG.info(
                "%s version %d under %s has no %s yet (a publish in progress): not loading it yet",
                model.config.name,
                version,
                model.config.base_path,
                fileio.COMPLETE_MARKER,
            )
        model.pending_logged = set(scan.pending)

    def _poll_model(self, model, rescan=True):
        if rescan or model.scan is None:
            scan = self._scan(model)
            if scan is None:
                return  # unreachable: keep serving what is loaded, try again at the next poll
            model.scan = scan
            self._log_changes(model, scan)
        base, on_disk = model.config.base_path, set(model.scan.ready)
        aspired = aspired_versions(model.config.model_version_policy, on_disk)
        for version in sorted(aspired, reverse=True):
            if self._stop.is_set():
                return
            path = fileio.join(base, str(version))
            with self._lock:
                v = model.versions.setdefault(version, _Version(version))
                if v.state in (State.AVAILABLE, State.LOADING, State.UNLOADING):
                    continue
                failed = v.error is not None
                due = v.retry_at is not None and time.monotonic() >= v.retry_at
            fingerprint = _fingerprint(path)
            if failed and not due and fingerprint == v.fingerprint:
                continue  # failed, no retry due and unchanged on disk: not now
            with self._lock:
                if failed and fingerprint != v.fingerprint:
                    v.failures = 0  # new files: a fresh set of retries
                v.state, v.fingerprint, v.retry_at = State.LOADING, fingerprint, None
            self._load(model, v, path)
        with self._lock:
            available = [n for n, v in model.versions.items() if v.state == State.AVAILABLE]
            missing = len(aspired) - len([n for n in available if n in aspired])
            keep = set(
                sorted([n for n in available if n not in aspired and n in on_disk])[::-1][
                    : max(missing, 0)
                ]
            )
            for n, v in list(model.versions.items()):
                if n in aspired or n in keep:
                    continue
                v.retry_at = None
                if v.state == State.AVAILABLE:
                    _LOG.info("unloading %s version %d", model.config.name, n)
                    v.state = State.UNLOADING
                    self._maybe_finalize(v)
                elif v.state in (State.END, State.START) and n not in on_disk:
                    del model.versions[n]

    def _load(self, model, v, path):
        name = model.config.name
        _LOG.info("loading %s version %d from %s", name, v.version, path)
        servable = None
        try:
            servable = load_servable(
                name, v.version, path, self._prefer_tflite_model, self._litert_threads
            )
            if self._on_loaded:
                self._on_loaded(servable)
        except Exception as e:
            if servable is not None:
                servable.close()  # stops batch schedulers started by a failed warmup
            code = e.code if isinstance(e, errors.ServingError) else grpc.StatusCode.UNKNOWN
            message = e.message if isinstance(e, errors.ServingError) else explain_load_error(e)
            with self._lock:
                v.failures += 1
                retry = v.failures <= self._max_retries
                v.state, v.error = (
                    State.END,
                    (code, f"Failed to load {name} version {v.version}: {message}"),
                )
                v.retry_at = time.monotonic() + self._retry_interval if retry else None
            if retry:
                _LOG.error(
                    "failed to load %s version %d: %s; retry %d of %d in %g s",
                    name,
                    v.version,
                    message,
                    v.failures,
                    self._max_retries,
                    self._retry_interval,
                )
                self._wake.set()
            else:
                _LOG.error(
                    "failed to load %s version %d: %s; giving up after %d retries (until its "
                    "files change)",
                    name,
                    v.version,
                    message,
                    self._max_retries,
                )
            return
        with self._lock:
            v.servable, v.state, v.error, v.failures = servable, State.AVAILABLE, None, 0
        _LOG.info("serving %s version %d", name, v.version)

    def _maybe_finalize(self, v):
        # Called with the lock held.
        if v.state == State.UNLOADING and v.refcount == 0:
            servable, v.servable, v.state = v.servable, None, State.END
            if servable is not None:
                servable.close()
                self._unloaded.set()  # its memory is collected by the next poll
            self._lock.notify_all()

    def _collect_unloaded(self):
        """Once a version was unloaded (outside the lock: requests are not held up), its memory
        goes back to the system now: a full garbage collection, then glibc's `malloc_trim`, which
        returns the free pages inside the allocator's heaps (a freed model's tensors leave
        holes there that glibc otherwise keeps until the heap's top is free)."""
        if self._unloaded.is_set():
            self._unloaded.clear()
            gc.collect()
            if _MALLOC_TRIM is not None:
                _MALLOC_TRIM(0)

    # ---------------------------------------------------------------- serving
    def model_names(self):
        return sorted(self._models)

    def _model(self, name, version=None):
        """The served model `name`; NOT_FOUND naming only what was asked for (as TF Serving:
        a client learns nothing of the other models served)."""
        if name not in self._models:
            asked = f"Latest({name})" if version is None else f"Specific({name}, {version})"
            raise errors.not_found(f"Servable not found for request: {asked}")
        return self._models[name]

    @contextlib.contextmanager
    def acquire(self, name, version=None, label=None):
        """Yields the Servable for a request; it stays loaded until the block exits.

        Args: name: model name; version: int or None (latest available); label: version label or None.
        Raises: ServingError NOT_FOUND for an unknown model or version; INVALID_ARGUMENT for an
            unknown label (as TF Serving's ServerCore: "Unrecognized servable version label").
        """
        with self._lock:
            model = self._model(name, version)
            if label:
                labels = model.labels
                if label not in labels:
                    raise errors.invalid_argument(
                        f"Unrecognized servable version label '{label}' for model "
                        f"'{name}' (labels: {sorted(labels)})"
                    )
                version = labels[label]
            if version is None:
                available = [n for n, v in model.versions.items() if v.state == State.AVAILABLE]
                if not available:
                    raise errors.not_found(
                        f"Servable not found for request: Latest({name}): no version "
                        "of this model is available yet"
                    )
                version = max(available)
            v = model.versions.get(version)
            if v is None or v.state != State.AVAILABLE:
                raise errors.not_found(
                    f"Servable not found for request: Specific({name}, {version})"
                )
            v.refcount += 1
            servable = v.servable
        try:
            yield servable
        finally:
            with self._lock:
                v.refcount -= 1
                self._maybe_finalize(v)

    def status(self, name, version=None):
        """ModelVersionStatus protos for `name` (one version if given), newest first; while the
        base path cannot be reached, a last entry for version 0: state START, error UNAVAILABLE
        with the message naming the path."""
        with self._lock:
            model = self._model(name)
            versions = model.versions
            if version is not None:
                if version not in versions:
                    raise errors.not_found(f"Could not find version {version} of model '{name}'")
                versions = {version: versions[version]}
            result = []
            for n in sorted(versions, reverse=True):
                v = versions[n]
                status = get_model_status_pb2.ModelVersionStatus(version=n, state=v.state)
                status.status.SetInParent()  # error_code OK, as TF Serving always reports it
                if v.error is not None:
                    status.status.error_code = v.error[0].value[0]
                    status.status.error_message = v.error[1]
                result.append(status)
            if model.unreachable is not None and version is None:  # last: version 0
                status = get_model_status_pb2.ModelVersionStatus(version=0, state=State.START)
                status.status.error_code = grpc.StatusCode.UNAVAILABLE.value[0]
                status.status.error_message = model.unreachable
                result.append(status)
            if not result and version is None:
                raise errors.not_found(
                    f"Model '{name}' has no version on disk under {model.config.base_path}"
                )
            return result

    def all_available(self):
        """True when every configured model has at least one AVAILABLE version."""
        with self._lock:
            return all(
                any(v.state == State.AVAILABLE for v in m.versions.values())
                for m in self._models.values()
            )
