"""TensorFlow Serving's own Prometheus metrics, under its names, labels, units and buckets, so that
dashboards and alerts written for `tensorflow_model_server` work unchanged.

    :tensorflow:serving:request_count{model_name,status}          counter: Predict/Classify/Regress
                                                                   requests by final status code name
    :tensorflow:serving:request_latency{model_name,API,entrypoint} histogram, microseconds, successful
                                                                   requests; API Predict|Classify|Regress,
                                                                   entrypoint GRPC|REST
    :tensorflow:serving:batching_session:queuing_latency{thread_pool_name}
                                                                   histogram, microseconds a batched
                                                                   task waited before its model call
    :tensorflow:serving:batching_session:wrapped_run_count         counter: batched model calls

Sources: tensorflow_serving/servables/tensorflow/util.cc (request_count, request_latency: buckets
Exponential(10, 1.8, 33)), model_servers/prediction_service_impl.cc (what is recorded when),
batching/batching_session.cc (queuing_latency: Exponential(100, 1.2, 52); wrapped_run_count), and
util/prometheus_exporter.cc for the text layout (metric names with '/' -> ':', counters without a
`_total` suffix, cumulative `le` buckets ending in "+Inf", numbers printed like absl::StrCat).
"""

import collections
import threading

REQUEST_COUNT = ":tensorflow:serving:request_count"
REQUEST_LATENCY = ":tensorflow:serving:request_latency"
QUEUING_LATENCY = ":tensorflow:serving:batching_session:queuing_latency"
WRAPPED_RUN_COUNT = ":tensorflow:serving:batching_session:wrapped_run_count"
API_NAMES = {"predict": "Predict", "classify": "Classify", "regress": "Regress"}


def exponential_buckets(scale: float, growth: float, count: int) -> list:
    """monitoring::Buckets::Exponential: scale * growth^i for i < count (then +Inf)."""
    return [scale * growth**i for i in range(count)]


_REQUEST_BUCKETS = exponential_buckets(10, 1.8, 33)
_QUEUE_BUCKETS = exponential_buckets(100, 1.2, 52)


def _number(value) -> str:
    return str(value) if isinstance(value, int) else "%g" % value  # absl::StrCat


def _labels(names, values):
    escaped = (str(v).replace("\\", "\\\\").replace('"', '\\"') for v in values)
    return ",".join(f'{n}="{v}"' for n, v in zip(names, escaped))


class _Histogram:
    def __init__(self, limits):
        self.limits, self.counts, self.sum = limits, [0] * (len(limits) + 1), 0.0

    def add(self, value):
        index = next((i for i, limit in enumerate(self.limits) if value < limit), len(self.limits))
        self.counts[index] += 1
        self.sum += value

    def lines(self, name, labels):
        prefix, out, total = f"{name}_bucket{{{labels}{',' if labels else ''}", [], 0
        for i, count in enumerate(self.counts):
            total += count
            limit = _number(self.limits[i]) if i < len(self.limits) else "+Inf"
            out.append(f'{prefix}le="{limit}"}} {total}')
        return out + [
            f"{name}_sum{{{labels}}} {_number(self.sum)}",
            f"{name}_count{{{labels}}} {total}",
        ]


class TfServingMetrics:
    """Thread-safe store of the four metrics above; `text()` is their exposition."""

    def __init__(self):
        self._lock = threading.Lock()
        self._requests = collections.Counter()
        self._latency = {}
        self._queuing = {}
        self._runs = 0

    def record_request(self, model, api, entrypoint, status_name, seconds):
        """One Predict/Classify/Regress request (other APIs are not recorded, as in TF Serving)."""
        if api not in API_NAMES:
            return
        with self._lock:
            self._requests[(model, status_name)] += 1
            if status_name == "OK":
                key = (model, API_NAMES[api], entrypoint)
                self._latency.setdefault(key, _Histogram(_REQUEST_BUCKETS)).add(int(seconds * 1e6))

    def record_batch(self, waits_seconds, thread_pool_name="batch_threads"):
        """One batched model call and how long each of its tasks waited in the queue."""
        with self._lock:
            self._runs += 1
            histogram = self._queuing.setdefault(thread_pool_name, _Histogram(_QUEUE_BUCKETS))
            for wait in waits_seconds:
                histogram.add(int(wait * 1e6))

    def text(self) -> str:
        with self._lock:
            lines = [f"# TYPE {REQUEST_COUNT} counter"]
            lines += [
                f"{REQUEST_COUNT}{{{_labels(('model_name', 'status'), key)}}} {n}"
                for key, n in sorted(self._requests.items())
            ]
            lines.append(f"# TYPE {REQUEST_LATENCY} histogram")
            for key, histogram in sorted(self._latency.items()):
                lines += histogram.lines(
                    REQUEST_LATENCY, _labels(("model_name", "API", "entrypoint"), key)
                )
            if self._runs:
                lines.append(f"# TYPE {QUEUING_LATENCY} histogram")
                for pool, histogram in sorted(self._queuing.items()):
                    lines += histogram.lines(
                        QUEUING_LATENCY, _labels(("thread_pool_name",), (pool,))
                    )
                lines += [
                    f"# TYPE {WRAPPED_RUN_COUNT} counter",
                    f"{WRAPPED_RUN_COUNT}{{}} {self._runs}",
                ]
        return "\n".join(lines) + "\n"
