"""Request logging: `logging_config` of a `ModelConfig` (TF Serving's `LoggingConfig` proto).

    model_config_list {
      config {
        name: "sst2" base_path: "/models/sst2" model_platform: "tensorflow"
        logging_config {
          sampling_config { sampling_rate: 0.01 }
          log_collector_config { filename_prefix: "/logs/sst2/requests" }
        }
      }
    }

Stock `tensorflow_model_server` declares this proto but registers no log collector, so any
logging config fails there with "No request-logger-creator provided." Here a sampled successful
Predict, Classify, Regress or MultiInference request (gRPC or REST) is written with its response
as one `tensorflow.serving.PredictionLog` TFRecord (the format of
`assets.extra/tf_serving_warmup_requests`): `log_metadata` holds the model spec that served it
(name, version, signature), the sampling config, the tags ("serve") and the time in seconds.

Behaviour:
- `sampling_config.sampling_rate` in [0, 1]: each request is logged with that probability,
  independently. Its other fields (per-task rates, attributes) are not used.
- `log_collector_config.filename_prefix`: a local path or any URI `keras_bert.fileio` handles;
  a relative one is under the config file's directory (as base paths). Files are
  `<prefix>-<UTC time>-<writer id>-<00000>.tfrecord`, a new one when the current file reaches
  `max_file_bytes` (a record is never split). `type` is not used: this collector always writes
  TFRecord files. Two models may not share a prefix (as TF Serving: "Duplicate
  LogCollectorConfig across models").
- A request never waits for the disk and never fails because of its log: the record goes to a
  bounded queue (`queue_size` records per model) that one background thread per model writes.
  A full queue (a slow disk) drops the record; a write that fails (a full, read-only or missing
  disk) drops the records written since the file was last flushed, closes that file (deleting
  it when no record of it was flushed: a full disk does not gather an empty file per retry), and
  drops every record for `retry_interval_s` before a new file is tried. Metrics count each record
  sampled, written (flushed) or dropped (by reason): `serving_request_log_sampled_total`,
  `serving_request_log_written_total`, `serving_request_log_dropped_total{reason}`.
- A reloaded config (the config file or HandleReloadConfigRequest) applies at once: a changed
  rate to the next request, a new prefix to a new writer; a removed logger's thread writes what
  it has queued and ends.
- Warmup requests replayed at load are not logged (as in TF Serving).

`python -m serving.request_log` turns the files into a warmup file or a table of the texts.
"""

import dataclasses
import datetime
import logging
import queue
import random
import threading
import time
import uuid

from tensorflow_serving.apis import prediction_log_pb2

from keras_bert import fileio
from serving.wire.tfrecords import RECORD_OVERHEAD_BYTES, open_records

_LOG = logging.getLogger("serving")
DEFAULT_MAX_FILE_BYTES = 64 << 20
DEFAULT_QUEUE_SIZE = 1024
RETRY_INTERVAL_S = 1.0
SUFFIX = ".tfrecord"
QUEUE_FULL, WRITE_ERROR = "queue_full", "write_error"  # the `reason` label of dropped records
_MAX_BATCH = 256  # records taken from the queue at once before a flush


def check_logging_configs(model_configs) -> None:
    """Raises ValueError for a sampling rate outside [0, 1], a logging config without a
    filename_prefix, or one prefix used by two models."""
    owners = {}
    for config in model_configs:
        if not config.HasField("logging_config"):
            continue
        logging_config = config.logging_config
        rate = logging_config.sampling_config.sampling_rate
        if not 0 <= rate <= 1:
            raise ValueError(
                f"model {config.name}: logging_config.sampling_config.sampling_rate must be in "
                f"[0, 1], got {rate}"
            )
        prefix = logging_config.log_collector_config.filename_prefix
        if not prefix:
            raise ValueError(
                f"model {config.name}: logging_config.log_collector_config.filename_prefix is empty"
            )
        if prefix in owners:
            raise ValueError(
                f"Duplicate LogCollectorConfig across models. Prefix: {prefix} (models "
                f"{owners[prefix]} and {config.name})"
            )
        owners[prefix] = config.name


@dataclasses.dataclass(frozen=True)
class _Entry:
    """A sampled request waiting for the writer: the protos as served (not copied)."""

    kind: str  # a PredictionLog log_type: predict_log, classify_log, ...
    name: str
    version: int
    signature_name: str
    request: object
    response: object
    timestamp: float


class _Writer:
    """One model's queue and writer thread (see the module docstring)."""

    def __init__(self, model, logging_config, metrics, max_file_bytes, queue_size, retry_s):
        self.model = model
        self.prefix = logging_config.log_collector_config.filename_prefix
        self.sampling_config = logging_config.sampling_config
        self.rate = logging_config.sampling_config.sampling_rate
        self._metrics = metrics
        self._max_file_bytes, self._retry_s = max_file_bytes, retry_s
        self._queue = queue.Queue(maxsize=queue_size)
        self._stop = threading.Event()
        self._random = random.Random()
        self._id = uuid.uuid4().hex[:8]
        self._started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
        self._sequence = 0
        self._file = None
        self._file_bytes = 0
        self._unflushed = 0  # records written to `_file` since its last successful flush
        self._flushed = 0  # records of `_file` flushed
        self._retry_at = 0.0  # time.monotonic() before which records are dropped (after an error)
        self._thread = threading.Thread(target=self._run, name=f"request-log-{model}", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- request threads
    def sampled(self) -> bool:
        return self.rate >= 1 or (self.rate > 0 and self._random.random() < self.rate)

    def submit(self, entry: _Entry) -> None:
        """Queues a sampled record; drops it (counted) when the queue is full. Never blocks."""
        self._metrics.request_log_sampled.labels(self.model).inc()
        try:
            self._queue.put_nowait(entry)
        except queue.Full:
            self._drop(1, QUEUE_FULL)

    def stop(self, timeout=None) -> None:
        """Ends the thread once what is queued is written; waits up to `timeout` s (None: not)."""
        self._stop.set()
        if timeout is not None:
            self._thread.join(timeout)

    # ---------------------------------------------------------------- writer thread
    def _drop(self, count, reason):
        if count:
            self._metrics.request_log_dropped.labels(self.model, reason).inc(count)

    def _run(self):
        while True:
            try:
                batch = [self._queue.get(timeout=0.2)]
            except queue.Empty:
                if self._stop.is_set():
                    break
                continue
            while len(batch) < _MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._write(batch)
        self._close()

    def _path(self):
        return f"{self.prefix}-{self._started}-{self._id}-{self._sequence:05d}{SUFFIX}"

    def _record(self, entry):
        log = prediction_log_pb2.PredictionLog()
        metadata = log.log_metadata
        metadata.model_spec.name = entry.name
        metadata.model_spec.version.value = entry.version
        metadata.model_spec.signature_name = entry.signature_name
        metadata.sampling_config.CopyFrom(self.sampling_config)
        metadata.saved_model_tags.append("serve")
        metadata.timestamp_secs = int(entry.timestamp)
        target = getattr(log, entry.kind)
        target.request.CopyFrom(entry.request)
        target.response.CopyFrom(entry.response)
        return log.SerializeToString()

    def _write(self, batch):
        if time.monotonic() < self._retry_at:
            self._drop(len(batch), WRITE_ERROR)
            return
        done = 0  # entries of `batch` written (flushed or not)
        try:
            for entry in batch:
                data = self._record(entry)
                if self._file is None:
                    fileio.makedirs(fileio.parent(self._path()))
                    self._file = open_records(self._path())
                self._file.write(data)
                done += 1
                self._unflushed += 1
                self._file_bytes += len(data) + RECORD_OVERHEAD_BYTES
                if self._file_bytes >= self._max_file_bytes:
                    self._flush()
                    self._close()
            if self._file is not None:
                self._flush()
        except Exception as e:  # a file system error, or anything: the thread must live on
            _LOG.error(
                "request log of model %s: cannot write %s: %s; dropping records for %g s",
                self.model,
                self._path(),
                " ".join(str(e).split())[:300],
                self._retry_s,
            )
            self._drop(self._unflushed + len(batch) - done, WRITE_ERROR)
            self._unflushed = 0
            self._close(failed=True)
            self._retry_at = time.monotonic() + self._retry_s

    def _flush(self):
        self._file.flush()
        self._metrics.request_log_written.labels(self.model).inc(self._unflushed)
        self._flushed += self._unflushed
        self._unflushed = 0

    def _close(self, failed=False):
        """Closes the current file (errors ignored: its records are already counted) and moves
        to the next file name; after a failed write, a file none of whose records was flushed
        (nothing in it counted as written) is deleted."""
        if self._file is None:
            return
        try:
            self._file.close()
        except fileio.file_errors():
            pass
        if failed and not self._flushed:
            try:
                fileio.remove(self._path())
            except fileio.file_errors():
                pass
        self._file, self._file_bytes, self._flushed = None, 0, 0
        self._sequence += 1


class RequestLogger:
    """The server's request loggers, one per model with a `logging_config`.

    Args:
        metrics: metrics.Metrics (the request_log_* counters).
        max_file_bytes: int, bytes after which a log file is closed and the next one started.
        queue_size: int, records waiting per model before new ones are dropped.
        retry_interval_s: float, seconds records are dropped after a failed write.
    """

    def __init__(
        self,
        metrics,
        max_file_bytes=DEFAULT_MAX_FILE_BYTES,
        queue_size=DEFAULT_QUEUE_SIZE,
        retry_interval_s=RETRY_INTERVAL_S,
    ):
        if max_file_bytes < 1 or queue_size < 1:
            raise ValueError(
                f"max_file_bytes and queue_size must be positive, got {max_file_bytes}, "
                f"{queue_size}"
            )
        self._metrics = metrics
        self._options = (max_file_bytes, queue_size, retry_interval_s)
        self._writers = {}  # model name -> _Writer; replaced whole (read without a lock)
        self._lock = threading.Lock()

    def update(self, model_configs) -> None:
        """Applies the logging configs of `model_configs` (checked: `check_logging_configs`)."""
        check_logging_configs(model_configs)
        with self._lock:
            writers = {}
            for config in model_configs:
                if not config.HasField("logging_config"):
                    continue
                old = self._writers.get(config.name)
                prefix = config.logging_config.log_collector_config.filename_prefix
                if old is not None and old.prefix == prefix:
                    old.sampling_config = config.logging_config.sampling_config
                    old.rate = config.logging_config.sampling_config.sampling_rate
                    writers[config.name] = old
                else:
                    writers[config.name] = _Writer(
                        config.name, config.logging_config, self._metrics, *self._options
                    )
                    _LOG.info(
                        "logging %g of %s's requests to %s*%s",
                        writers[config.name].rate,
                        config.name,
                        prefix,
                        SUFFIX,
                    )
            for name, writer in self._writers.items():
                if writers.get(name) is not writer:
                    writer.stop()
            self._writers = writers

    def log(self, kind, servable, request, response, signature_name) -> None:
        """Queues `request` and `response` (a `kind` PredictionLog: "predict_log", ...) when the
        model logs and this request is sampled. Called after a successful request; never raises
        for the file system and never blocks."""
        writer = self._writers.get(servable.name)
        if writer is None or not writer.sampled():
            return
        writer.submit(
            _Entry(
                kind,
                servable.name,
                servable.version,
                signature_name,
                request,
                response,
                time.time(),
            )
        )

    def stop(self, timeout=5.0) -> None:
        """Writes what is queued and closes the files, waiting up to `timeout` s in all."""
        with self._lock:
            writers, self._writers = list(self._writers.values()), {}
        deadline = time.monotonic() + timeout
        for writer in writers:
            writer.stop()
        for writer in writers:
            writer.stop(max(0.0, deadline - time.monotonic()))
