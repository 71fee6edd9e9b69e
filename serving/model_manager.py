"""Model management: version directories polled on disk, version policies, labels, safe unloading.

Behaviour (as `tensorflow_model_server` with its default availability-preserving policy):
- `<base_path>/<int>/` directories are versions; other names (`2.tmp`, `.partial`) are ignored, so a
  copy followed by an atomic rename is the safe way to publish a version.
- The version policy (`latest {num_versions}` default 1, `all`, `specific {versions}`) picks the
  aspired versions; each is loaded (and its warmup requests replayed) before it serves.
- A version that fails to load is reported in GetModelStatus (state END + error) and retried only when
  its files change; it never replaces a serving version: previously loaded versions keep serving
  until enough aspired versions are AVAILABLE.
- A removed version stops taking new requests at once and is unloaded when its in-flight requests
  finish (reference counting).
- `reload(configs)` (ModelService/HandleReloadConfigRequest) replaces the served set as TF Serving's
  ServerCore::ReloadConfig does: added models are loaded before it returns, removed models stop
  taking requests and unload when idle, changed version policies apply with the same
  availability-preserving switch, and labels are updated last, only when each points to an
  AVAILABLE version.
"""

import contextlib
import logging
import os
import threading

import grpc
from tensorflow_serving.apis import get_model_status_pb2

from serving import errors
from serving.servable import explain_load_error, load_servable

State = get_model_status_pb2.ModelVersionStatus.State
_LOG = logging.getLogger("serving")


class _Version:
    def __init__(self, version):
        self.version = version
        self.state = State.START
        self.error = None  # (grpc.StatusCode, message)
        self.servable = None
        self.refcount = 0
        self.fingerprint = None


class _Model:
    def __init__(self, config):
        self.config = config
        self.labels = dict(config.version_labels)
        self.versions = {}  # int -> _Version
        self.warning = None  # last "no versions" warning logged (logged again only when it changes)


def _fingerprint(path):
    items = []
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            items.append((os.path.relpath(full, path), st.st_size, st.st_mtime_ns))
    return tuple(sorted(items))


def _list_versions(base_path):
    try:
        names = os.listdir(base_path)
    except OSError:
        return set()
    return {int(n) for n in names if n.isdigit() and os.path.isdir(os.path.join(base_path, n))}


def no_versions_warning(name, base_path, on_disk):
    """The WARNING for a base path with no version directory (as tensorflow_model_server logs
    it), with a hint when `base_path` is itself a version directory; None when versions exist."""
    if on_disk:
        return None
    message = f"No versions of servable {name} found under base path {base_path}"
    if not os.path.exists(base_path):
        message += " (the path does not exist)"
    elif os.path.basename(os.path.normpath(base_path)).isdigit() and os.path.isfile(
        os.path.join(base_path, "saved_model.pb")
    ):
        message += (
            "; did you point --model_base_path at a version directory? use its parent "
            f"{os.path.dirname(os.path.normpath(base_path))}"
        )
    return message


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
    """

    def __init__(
        self,
        model_configs,
        poll_seconds=1.0,
        on_loaded=None,
        on_change=None,
        prefer_tflite_model=False,
        litert_threads=0,
    ):
        check_configs(model_configs)
        self._models = {c.name: _Model(c) for c in model_configs}
        self._poll_lock = threading.Lock()  # one poll (or reload) at a time
        self._poll_seconds = poll_seconds
        self._on_loaded = on_loaded
        self._on_change = on_change
        self._prefer_tflite_model = prefer_tflite_model
        self._litert_threads = litert_threads
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._thread = None

    # ---------------------------------------------------------------- polling
    def start(self):
        self.poll_once()
        if self._poll_seconds > 0:
            self._thread = threading.Thread(target=self._loop, name="model-poller", daemon=True)
            self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=30)
        with self._lock:
            for model in self._models.values():
                for v in model.versions.values():
                    if v.servable is not None:
                        v.servable.close()
                        v.servable = None

    def _loop(self):
        while not self._stop.wait(self._poll_seconds):
            try:
                self.poll_once()
            except Exception:
                _LOG.exception("file system poll failed")

    def poll_once(self):
        with self._poll_lock:
            self._poll_all()

    def _poll_all(self):
        for model in list(self._models.values()):
            self._poll_model(model)
        if self._on_change:
            self._on_change()

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
        with self._poll_lock:
            added = self._apply(model_configs)
            self._poll_all()
            self._check_added(added)
            self._update_labels(model_configs)
        _LOG.info("reloaded config: serving %s", self.model_names())

    def _apply(self, model_configs):
        """Swaps the model set under the lock; returns the added names."""
        wanted = {c.name: c for c in model_configs}
        with self._lock:
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
                    self._models[name].config = config
                    self._models[name].labels = labels  # replaced once the versions are loaded
                else:
                    self._models[name] = _Model(config)
                    self._models[name].labels = {}
        return added

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

    def _poll_model(self, model):
        base = model.config.base_path
        on_disk = _list_versions(base)
        warning = no_versions_warning(model.config.name, base, on_disk)
        if warning != model.warning:  # at start and when it changes, not on every poll
            if warning:
                _LOG.warning("%s", warning)
            model.warning = warning
        aspired = aspired_versions(model.config.model_version_policy, on_disk)
        for version in sorted(aspired, reverse=True):
            if self._stop.is_set():
                return
            path = os.path.join(base, str(version))
            fingerprint = _fingerprint(path)
            with self._lock:
                v = model.versions.setdefault(version, _Version(version))
                if v.state in (State.AVAILABLE, State.LOADING, State.UNLOADING):
                    continue
                if v.error is not None and v.fingerprint == fingerprint:
                    continue  # failed before and unchanged on disk: do not retry
                v.state, v.error, v.fingerprint = State.LOADING, None, fingerprint
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
            _LOG.error("failed to load %s version %d: %s", name, v.version, message)
            with self._lock:
                v.state, v.error = (
                    State.END,
                    (code, f"Failed to load {name} version {v.version}: {message}"),
                )
            return
        with self._lock:
            v.servable, v.state = servable, State.AVAILABLE
        _LOG.info("serving %s version %d", name, v.version)

    def _maybe_finalize(self, v):
        # Called with the lock held.
        if v.state == State.UNLOADING and v.refcount == 0:
            servable, v.servable, v.state = v.servable, None, State.END
            if servable is not None:
                servable.close()
            self._lock.notify_all()

    # ---------------------------------------------------------------- serving
    def model_names(self):
        return sorted(self._models)

    def _model(self, name):
        if name not in self._models:
            raise errors.not_found(
                f"Servable not found for request: model '{name}' is not served "
                f"(served models: {self.model_names()})"
            )
        return self._models[name]

    @contextlib.contextmanager
    def acquire(self, name, version=None, label=None):
        """Yields the Servable for a request; it stays loaded until the block exits.

        Args: name: model name; version: int or None (latest available); label: version label or None.
        Raises: ServingError NOT_FOUND for an unknown model or version; INVALID_ARGUMENT for an
            unknown label (as TF Serving's ServerCore: "Unrecognized servable version label").
        """
        with self._lock:
            model = self._model(name)
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
        """ModelVersionStatus protos for `name` (one version if given), newest first."""
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
