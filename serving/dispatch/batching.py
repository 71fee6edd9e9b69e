"""Server-side request batching (`--enable_batching`, `--batching_parameters_file`).

Concurrent requests for the same model version and signature are queued, merged along dim 0 into
one model call of at most `max_batch_size` rows (waiting at most `batch_timeout_micros` after the
first request), padded up to the next `allowed_batch_sizes` entry by repeating the batch's first row,
and the outputs are sliced back per request, as TensorFlow Serving's BasicBatchScheduler and
batching session do. For a model whose rows are independent (every BERT signature: each row is
tokenized, padded and attended to on its own), each response equals the unbatched answer, widths
included ("Output widths" below: a signature whose widths only the call's contents decide is not
merged).

Requests merge only when their non-batch shapes and dtypes agree (e.g. `encoded` inputs of the same
sequence length). When a merged call fails, each of its requests runs again on its own, so every
caller gets its own answer or its own error, never a message about another client's rows (TF Serving
fails the whole batch with one message). A full queue (`max_enqueued_batches`) is UNAVAILABLE. A
request larger than one model call (`max_batch_size`, or `max_execution_batch_size` when set) is
INVALID_ARGUMENT unless `enable_large_batch_splitting` is on (batching parameter, or the
`--enable_large_batch_splitting` flag); then it is split into consecutive pieces of at most one call
each, queued together, run like any other tasks (a piece may share a call with other requests) and
its outputs concatenated in order, so the answer equals the unsplit one row for row. As in TF
Serving, with `max_execution_batch_size` set, `max_batch_size` bounds the request and
`max_execution_batch_size` each call; without it (our extension) each call takes `max_batch_size`
rows and requests are bounded by `--max_request_batch_size` only.

Length buckets (our extension: `length_buckets` in the batching parameters file, e.g.
`length_buckets: 16 length_buckets: 32 length_buckets: 64`). A text signature tokenizes inside the
SavedModel and pads the whole call to its longest row, so in a merged call a short sentence pays for
the longest one. With buckets, a request with string inputs (text, or serialized tf.Examples) goes
into the first bucket whose boundary holds its estimated length in tokens (`length_estimate`;
beyond the last boundary: one more bucket), and requests merge only within a bucket, so each call
is padded to about its bucket, not to the longest request in the queue. Requests without string
inputs (`encoded` ids) already merge only with requests of the same padded length (the client's
`seq_length`), with or without buckets: the server never cuts a client's padding, since per-token
outputs have that length. Grouping changes only which requests share a call, never a row's answer.

Output widths (`call_sized_outputs`). An output dim after the batch dim that is dynamic in the
signature (-1, or unknown rank) is sized by each model call. Merged requests share their inputs'
non-batch shapes (above), so such a dim is each request's own when the model sizes it from the
input shapes, as every id signature does (`encoded` [B, T] ids -> per-token [B, T, C], or
[B, C, T] -> [B, C]). A signature whose inputs have no dynamic dim after the batch dim (text [B],
endings [B, 4], tf.Examples [B]) gives the call nothing but its rows' contents to size such a dim
by: the token classifier's `tags` / `words` [B, W] are as wide as the call's longest sentence,
padded with "". The server does not know where a row's values end (a padding value can be a real
one), so it does not merge, split or pad the requests of such a signature: each runs as one call
of its own, exactly as with batching off, and its answer is the unbatched one by construction.
"""

import bisect
import collections
import dataclasses
import os
import re
import threading
import time

import grpc
import numpy as np
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    wrappers_pb2,
)

from serving.wire import errors, text_protos


LENGTH_BUCKETS_FIELD_NUMBER = 1000


def _batching_parameters_class():
    """tensorflow.serving.BatchingParameters (session_bundle_config.proto), which the
    tensorflow-serving-api wheel does not ship: the same field names and types, built at run time
    so text-proto files written for tensorflow_model_server parse unchanged."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(wrappers_pb2.DESCRIPTOR.serialized_pb))
    fdp = descriptor_pb2.FileDescriptorProto(
        name="serving/batching_parameters.proto",
        package="tensorflow.serving",
        syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"],
    )
    msg = fdp.message_type.add(name="BatchingParameters")
    F = descriptor_pb2.FieldDescriptorProto
    fields = [
        ("max_batch_size", ".google.protobuf.Int64Value"),
        ("batch_timeout_micros", ".google.protobuf.Int64Value"),
        ("max_enqueued_batches", ".google.protobuf.Int64Value"),
        ("num_batch_threads", ".google.protobuf.Int64Value"),
        ("thread_pool_name", ".google.protobuf.StringValue"),
        ("allowed_batch_sizes", F.TYPE_INT64),
        ("pad_variable_length_inputs", F.TYPE_BOOL),
        ("enable_large_batch_splitting", ".google.protobuf.BoolValue"),
        ("max_execution_batch_size", ".google.protobuf.Int64Value"),
        ("batch_padding_policy", ".google.protobuf.StringValue"),
    ]
    numbered = list(enumerate(fields, start=1))
    # Ours, not TF Serving's (so stock tensorflow_model_server refuses a file that sets it): a
    # field number far above TF Serving's, so no future field of theirs can collide with it.
    numbered.append((LENGTH_BUCKETS_FIELD_NUMBER, ("length_buckets", F.TYPE_INT64)))
    for number, (name, kind) in numbered:
        f = msg.field.add(name=name, number=number, label=F.LABEL_OPTIONAL)
        if isinstance(kind, str):
            f.type, f.type_name = F.TYPE_MESSAGE, kind
        else:
            f.type = kind
            if name in ("allowed_batch_sizes", "length_buckets"):
                f.label = F.LABEL_REPEATED
    pool.Add(fdp)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters")
    )


BatchingParameters = _batching_parameters_class()


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
    """Resolved batching parameters (defaults: TF's BasicBatchScheduler)."""

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    num_batch_threads: int = os.cpu_count() or 1
    max_enqueued_batches: int = 10
    allowed_batch_sizes: tuple = ()
    enable_large_batch_splitting: bool = False
    max_execution_batch_size: int = 0  # 0: max_batch_size
    thread_pool_name: str = "batch_threads"  # label of TF Serving's queuing_latency metric
    length_buckets: tuple = ()  # ours: bucket boundaries in estimated tokens; () = no buckets

    def __post_init__(self):
        if self.max_batch_size < 1 or self.num_batch_threads < 1 or self.max_enqueued_batches < 1:
            raise ValueError(f"batching parameters must be positive: {self}")
        if not 0 <= self.max_execution_batch_size <= self.max_batch_size:
            raise ValueError(
                f"max_execution_batch_size={self.max_execution_batch_size} must be at most "
                f"max_batch_size={self.max_batch_size}"
            )
        if self.max_execution_batch_size and not self.enable_large_batch_splitting:
            raise ValueError("max_execution_batch_size needs enable_large_batch_splitting")
        sizes, call = list(self.allowed_batch_sizes), self.execution_batch_size
        if sizes and (sizes != sorted(set(sizes)) or sizes[0] < 1 or sizes[-1] != call):
            raise ValueError(
                f"allowed_batch_sizes {sizes} must be increasing, positive and end with "
                f"{'max_execution_batch_size' if self.max_execution_batch_size else 'max_batch_size'}"
                f"={call}"
            )
        buckets = list(self.length_buckets)
        if buckets and (buckets != sorted(set(buckets)) or buckets[0] < 1):
            raise ValueError(f"length_buckets {buckets} must be increasing and positive")

    @property
    def execution_batch_size(self) -> int:
        """Most rows per model call."""
        return self.max_execution_batch_size or self.max_batch_size

    @property
    def input_batch_size_limit(self):
        """Most rows per request (None: no batching limit; --max_request_batch_size still applies)."""
        if not self.enable_large_batch_splitting:
            return self.max_batch_size
        return self.max_batch_size if self.max_execution_batch_size else None


def parse_batching_parameters(text: str, where: str = "") -> BatchingOptions:
    """Parses a tensorflow_model_server batching parameters text proto, e.g.
    `max_batch_size { value: 32 } batch_timeout_micros { value: 5000 } allowed_batch_sizes: 8`;
    `where` (the file as the user named it) starts each error message when given.

    Raises:
        text_format.ParseError: an unknown field, bad syntax or messages nested too deeply
            (`serving.wire.text_protos.parse`).
        ValueError: inconsistent values (`BatchingOptions`).
    """
    proto = text_protos.parse(text, BatchingParameters(), where)
    kwargs = {}
    for name in (
        "max_batch_size",
        "batch_timeout_micros",
        "num_batch_threads",
        "max_enqueued_batches",
        "max_execution_batch_size",
    ):
        if proto.HasField(name):
            kwargs[name] = int(getattr(proto, name).value)
    if proto.HasField("thread_pool_name"):
        kwargs["thread_pool_name"] = proto.thread_pool_name.value
    if proto.HasField("enable_large_batch_splitting"):
        kwargs["enable_large_batch_splitting"] = proto.enable_large_batch_splitting.value
    if proto.allowed_batch_sizes:
        kwargs["allowed_batch_sizes"] = tuple(int(x) for x in proto.allowed_batch_sizes)
    if proto.length_buckets:
        kwargs["length_buckets"] = tuple(int(x) for x in proto.length_buckets)
    try:
        return BatchingOptions(**kwargs)
    except ValueError as e:
        if not where:
            raise
        raise ValueError(f"{where}: {e}") from None


# What BERT's BasicTokenizer splits a text into before WordPiece: runs of word characters, and
# each other non-space character (punctuation) alone.
_PIECE = re.compile(r"\w+|[^\w\s]")


def length_estimate(inputs: dict) -> int | None:
    """Estimated tokens of the longest row of a request with string inputs; None without any.

    A row's estimate is what BERT packs: [CLS], then for each string input the pieces of its
    longest element in that row (words and punctuation marks, `_PIECE`) and one [SEP]. It is a
    lower bound of the WordPiece length (a word may become several word pieces), good enough to
    group requests: it decides only which requests share a model call, never what a row returns.

    Args:
        inputs: dict name -> numpy array, dim 0 = batch; string inputs hold bytes (object dtype).
    """
    texts = [v for v in inputs.values() if v.dtype == object or v.dtype.kind in "SU"]
    if not texts:
        return None
    longest = 0
    for row in range(texts[0].shape[0]):
        tokens = 1
        for value in texts:
            pieces = 0
            for element in np.ravel(value[row]):
                text = element.decode("utf-8", "replace") if isinstance(element, bytes) else element
                pieces = max(pieces, len(_PIECE.findall(str(text))))
            tokens += pieces + 1
        longest = max(longest, tokens)
    return longest


def _dynamic_after_batch(spec) -> bool:
    return spec.shape is None or -1 in spec.shape[1:]


def call_sized_outputs(signature) -> list:
    """The outputs of `signature` whose widths a merged call would decide (module docstring,
    "Output widths"), sorted; [] when its requests may merge.

    Args:
        signature: anything with `inputs` and `outputs`, dicts name -> spec whose `shape` is a list
            of ints (-1 = dynamic) or None (unknown rank), e.g. `serving.models.servable.Signature`.
    """
    if any(_dynamic_after_batch(spec) for spec in signature.inputs.values()):
        return []
    return sorted(name for name, spec in signature.outputs.items() if _dynamic_after_batch(spec))


class _Task:
    def __init__(self, inputs, size, key):
        self.inputs, self.size, self.key = inputs, size, key
        self.enqueued = time.monotonic()
        self.done = threading.Event()
        self.result = self.error = None


def bucket_label(length_buckets, key) -> str | None:
    """The length bucket of a batch key as a metric label: "<=16" (the first boundary holding
    the estimate), ">64" (beyond the last), "unestimated" (no string input); None without
    buckets."""
    if not length_buckets:
        return None
    index = key[1]
    if index is None:
        return "unestimated"
    if index < len(length_buckets):
        return f"<={length_buckets[index]}"
    return f">{length_buckets[-1]}"


def _key(inputs, length_buckets=()):
    """Tasks merge only when their keys are equal: the same non-batch shapes and dtypes and, with
    `length_buckets`, the same bucket (index of the first boundary >= the length estimate)."""
    shapes = tuple((k, v.dtype.str, v.shape[1:]) for k, v in sorted(inputs.items()))
    if not length_buckets:
        return shapes
    estimate = length_estimate(inputs)
    return shapes, None if estimate is None else bisect.bisect_left(length_buckets, estimate)


class BatchScheduler:
    """Merges concurrent calls of `run_fn(inputs: dict) -> dict` (numpy, dim 0 = batch).

    Args:
        run_fn: the model call. options: BatchingOptions. on_batch: callable(rows, padded_rows,
            waits, bucket) or None, after each model call; waits: seconds each task queued before
            the call; bucket: its length bucket (`bucket_label`), None without length buckets.
    """

    def __init__(self, run_fn, options: BatchingOptions, on_batch=None):
        self._run = run_fn
        self._options = options
        self._on_batch = on_batch
        self._queue = collections.deque()
        self._queued_rows = 0
        self._cond = threading.Condition()
        self._stopped = False
        self._collecting = set()  # keys a batch thread is collecting a batch for
        self._threads = [
            threading.Thread(target=self._worker, daemon=True, name=f"batch-{i}")
            for i in range(options.num_batch_threads)
        ]
        for t in self._threads:
            t.start()

    def submit(self, inputs: dict) -> dict:
        """Runs `inputs` as part of a batch; blocks until its slice of the outputs is ready.

        Raises: ServingError INVALID_ARGUMENT (too many rows), UNAVAILABLE (queue full or stopping),
            or the model call's error.
        """
        size = next(iter(inputs.values())).shape[0]
        options, call = self._options, self._options.execution_batch_size
        limit = options.input_batch_size_limit
        if limit is not None and size > limit:
            raise errors.invalid_argument(
                f"Task size {size} is larger than maximum {'input ' if options.enable_large_batch_splitting else ''}"
                f"batch size {limit} (batching parameters); send smaller requests"
                + (
                    ""
                    if options.enable_large_batch_splitting
                    else " or enable large batch splitting"
                )
            )
        pieces = (
            [
                {k: v[start : start + call] for k, v in inputs.items()}
                for start in range(0, size, call)
            ]
            if size > call
            else [inputs]
        )
        buckets = options.length_buckets
        tasks = [_Task(p, next(iter(p.values())).shape[0], _key(p, buckets)) for p in pieces]
        with self._cond:
            if self._stopped:
                raise errors.unavailable("the model version is being unloaded; retry")
            if self._queued_rows + size > options.max_enqueued_batches * call:
                raise errors.unavailable(
                    "The batch scheduling queue to which this task was submitted "
                    "is full; retry later"
                )
            self._queue.extend(tasks)  # answered in piece order, whatever order they run in
            self._queued_rows += size
            self._cond.notify_all()
        for task in tasks:
            task.done.wait()
        for task in tasks:
            if task.error is not None:
                raise task.error
        if len(tasks) == 1:
            return tasks[0].result
        return {k: np.concatenate([t.result[k] for t in tasks], axis=0) for k in tasks[0].result}

    def stop(self):
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def _next_task(self):
        """With the lock held: the oldest queued task whose key no other batch thread is
        collecting (so with several threads, several buckets or shapes fill at once), or None."""
        return next((t for t in self._queue if t.key not in self._collecting), None)

    def _take_batch(self, first):
        # Called with the lock held; `first` is queued and its key is now this thread's alone.
        self._collecting.add(first.key)
        timeout = self._options.batch_timeout_micros / 1e6
        while not self._stopped:
            rows = sum(t.size for t in self._queue if t.key == first.key)
            remaining = first.enqueued + timeout - time.monotonic()
            if rows >= self._options.execution_batch_size or remaining <= 0:
                break
            self._cond.wait(remaining)
        batch, rows, rest = [], 0, collections.deque()
        for task in self._queue:
            if task.key == first.key and rows + task.size <= self._options.execution_batch_size:
                batch.append(task)
                rows += task.size
            else:
                rest.append(task)
        self._queue = rest
        self._queued_rows -= rows
        self._collecting.discard(first.key)
        self._cond.notify_all()  # tasks of this key left behind are free for any thread now
        return batch

    def _worker(self):
        while True:
            with self._cond:
                first = self._next_task()
                while first is None and not self._stopped:
                    self._cond.wait()
                    first = self._next_task()
                if first is None:  # stopped; whatever is queued belongs to a collecting thread
                    return
                batch = self._take_batch(first)
            if batch:
                self._process(batch)

    def _process(self, batch):
        failure = self._call(batch)
        if failure is not None and len(batch) > 1:
            # A merged call failed: one request's rows may have failed it, and its message (which
            # may quote that request's values and merged-batch row numbers) belongs to that
            # request alone. Each request runs again on its own and gets its own answer or error.
            for task in batch:
                self._process([task])
            return
        if failure is not None:
            batch[0].error = errors.from_tf_error(failure)
        for task in batch:
            task.done.set()

    def _call(self, batch):
        """One model call for `batch`; sets each task's result and returns None, or returns the
        call's exception (no task touched)."""
        started = time.monotonic()
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
                        f"batch dimension of {padded}; disable --enable_batching for this model",
                    )
            if self._on_batch:
                waits = [started - t.enqueued for t in batch]
                self._on_batch(
                    rows, padded, waits, bucket_label(self._options.length_buckets, batch[0].key)
                )
        except Exception as e:
            return e
        start = 0
        for task in batch:
            task.result = {k: v[start : start + task.size] for k, v in outputs.items()}
            start += task.size
        return None
