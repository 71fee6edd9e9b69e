"""Server-side request batching (`--enable_batching`, `--batching_parameters_file`).

Concurrent requests for the same model version and signature are queued, merged along dim 0 into
one model call of at most `max_batch_size` rows (waiting at most `batch_timeout_micros` after the
first request), padded up to the next `allowed_batch_sizes` entry by repeating the batch's first row,
and the outputs are sliced back per request, as TensorFlow Serving's BasicBatchScheduler and
batching session do. For a model whose rows are independent (every BERT signature: each row is
tokenized, padded and attended to on its own), each response equals the unbatched answer.

Requests merge only when their non-batch shapes and dtypes agree (e.g. `encoded` inputs of the same
sequence length). A request larger than `max_batch_size` is INVALID_ARGUMENT (TF Serving without
large-batch splitting); a full queue (`max_enqueued_batches`) is UNAVAILABLE.
"""
import collections
import dataclasses
import os
import threading
import time

import grpc
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format, wrappers_pb2

from serving import errors


def _batching_parameters_class():
    """tensorflow.serving.BatchingParameters (session_bundle_config.proto), which the
    tensorflow-serving-api wheel does not ship: the same field names and types, built at run time
    so text-proto files written for tensorflow_model_server parse unchanged."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(wrappers_pb2.DESCRIPTOR.serialized_pb))
    fdp = descriptor_pb2.FileDescriptorProto(
        name="serving/batching_parameters.proto", package="tensorflow.serving", syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"])
    msg = fdp.message_type.add(name="BatchingParameters")
    F = descriptor_pb2.FieldDescriptorProto
    fields = [("max_batch_size", ".google.protobuf.Int64Value"),
              ("batch_timeout_micros", ".google.protobuf.Int64Value"),
              ("max_enqueued_batches", ".google.protobuf.Int64Value"),
              ("num_batch_threads", ".google.protobuf.Int64Value"),
              ("thread_pool_name", ".google.protobuf.StringValue"),
              ("allowed_batch_sizes", F.TYPE_INT64),
              ("pad_variable_length_inputs", F.TYPE_BOOL),
              ("enable_large_batch_splitting", ".google.protobuf.BoolValue"),
              ("max_execution_batch_size", ".google.protobuf.Int64Value"),
              ("batch_padding_policy", ".google.protobuf.StringValue")]
    for number, (name, kind) in enumerate(fields, start=1):
        f = msg.field.add(name=name, number=number, label=F.LABEL_OPTIONAL)
        if isinstance(kind, str):
            f.type, f.type_name = F.TYPE_MESSAGE, kind
        else:
            f.type = kind
            if name == "allowed_batch_sizes":
                f.label = F.LABEL_REPEATED
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters"))


BatchingParameters = _batching_parameters_class()


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
    """Resolved batching parameters (defaults: TF's BasicBatchScheduler)."""

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    num_batch_threads: int = os.cpu_count() or 1
    max_enqueued_batches: int = 10
    allowed_batch_sizes: tuple = ()

    def __post_init__(self):
        if self.max_batch_size < 1 or self.num_batch_threads < 1 or self.max_enqueued_batches < 1:
            raise ValueError(f"batching parameters must be positive: {self}")
        sizes = list(self.allowed_batch_sizes)
        if sizes and (sizes != sorted(set(sizes)) or sizes[0] < 1 or sizes[-1] != self.max_batch_size):
            raise ValueError(f"allowed_batch_sizes {sizes} must be increasing, positive and end with "
                             f"max_batch_size={self.max_batch_size}")


def parse_batching_parameters(text: str) -> BatchingOptions:
    """Parses a tensorflow_model_server batching parameters text proto, e.g.
    `max_batch_size { value: 32 } batch_timeout_micros { value: 5000 } allowed_batch_sizes: 8`.
    Raises ValueError (unknown field, bad syntax or inconsistent values)."""
    proto = text_format.Parse(text, BatchingParameters())
    kwargs = {}
    for name in ("max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches"):
        if proto.HasField(name):
            kwargs[name] = int(getattr(proto, name).value)
    if proto.allowed_batch_sizes:
        kwargs["allowed_batch_sizes"] = tuple(int(x) for x in proto.allowed_batch_sizes)
    return BatchingOptions(**kwargs)


class _Task:
    def __init__(self, inputs, size, key):
        self.inputs, self.size, self.key = inputs, size, key
        self.enqueued = time.monotonic()
        self.done = threading.Event()
        self.result = self.error = None


def _key(inputs):
    return tuple((k, v.dtype.str, v.shape[1:]) for k, v in sorted(inputs.items()))


class BatchScheduler:
    """Merges concurrent calls of `run_fn(inputs: dict) -> dict` (numpy, dim 0 = batch).

    Args:
        run_fn: the model call. options: BatchingOptions. on_batch: callable(rows, padded_rows) or None.
    """

    def __init__(self, run_fn, options: BatchingOptions, on_batch=None):
        self._run = run_fn
        self._options = options
        self._on_batch = on_batch
        self._queue = collections.deque()
        self._queued_rows = 0
        self._cond = threading.Condition()
        self._stopped = False
        self._threads = [threading.Thread(target=self._worker, daemon=True, name=f"batch-{i}")
                         for i in range(options.num_batch_threads)]
        for t in self._threads:
            t.start()

    def submit(self, inputs: dict) -> dict:
        """Runs `inputs` as part of a batch; blocks until its slice of the outputs is ready."""
        sizes = {v.shape[0] for v in inputs.values()}
        size = sizes.pop()
        if size > self._options.max_batch_size:
            raise errors.invalid_argument(
                f"Task size {size} is larger than maximum batch size {self._options.max_batch_size} "
                "(batching parameters); send smaller requests")
        task = _Task(inputs, size, _key(inputs))
        with self._cond:
            if self._stopped:
                raise errors.unavailable("the model version is being unloaded; retry")
            limit = self._options.max_enqueued_batches * self._options.max_batch_size
            if self._queued_rows + size > limit:
                raise errors.unavailable("The batch scheduling queue to which this task was submitted "
                                         "is full; retry later")
            self._queue.append(task)
            self._queued_rows += size
            self._cond.notify_all()
        task.done.wait()
        if task.error is not None:
            raise task.error
        return task.result

    def stop(self):
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def _take_batch(self):
        # Called with the lock held and a non-empty queue.
        first = self._queue[0]
        timeout = self._options.batch_timeout_micros / 1e6
        while not self._stopped:
            rows = sum(t.size for t in self._queue if t.key == first.key)
            remaining = first.enqueued + timeout - time.monotonic()
            if rows >= self._options.max_batch_size or remaining <= 0:
                break
            self._cond.wait(remaining)
        batch, rows, rest = [], 0, collections.deque()
        for task in self._queue:
            if task.key == first.key and rows + task.size <= self._options.max_batch_size:
                batch.append(task)
                rows += task.size
            else:
                rest.append(task)
        self._queue = rest
        self._queued_rows -= rows
        return batch

    def _worker(self):
        while True:
            with self._cond:
                while not self._queue and not self._stopped:
                    self._cond.wait()
                if not self._queue:
                    return
                batch = self._take_batch()
            if batch:
                self._process(batch)

    def _process(self, batch):
        rows = sum(t.size for t in batch)
        padded = rows
        for size in self._options.allowed_batch_sizes:
            if size >= rows:
                padded = size
                break
        inputs = {}
        for name in batch[0].inputs:
            parts = [t.inputs[name] for t in batch]
            if padded > rows:
                parts.append(np.repeat(parts[0][:1], padded - rows, axis=0))
            inputs[name] = np.concatenate(parts, axis=0)
        try:
            outputs = self._run(inputs)
            for name, value in outputs.items():
                if np.ndim(value) == 0 or np.shape(value)[0] != padded:
                    raise errors.ServingError(
                        grpc.StatusCode.INTERNAL,
                        f"batching: output '{name}' has shape {list(np.shape(value))}, not a leading "
                        f"batch dimension of {padded}; disable --enable_batching for this model")
            if self._on_batch:
                self._on_batch(rows, padded)
            start = 0
            for task in batch:
                task.result = {k: v[start:start + task.size] for k, v in outputs.items()}
                start += task.size
        except Exception as e:  # noqa: BLE001 - delivered to every caller in the batch
            for task in batch:
                task.error = errors.from_tf_error(e)
        for task in batch:
            task.done.set()
