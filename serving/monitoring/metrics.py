"""Prometheus metrics, exposed on the REST port at /monitoring/prometheus/metrics (TF Serving's path)."""

import prometheus_client

from serving.monitoring.tf_metrics import TfServingMetrics

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Metrics:
    """Counters and histograms in their own registry (several servers may share a process in tests).

    - serving_requests_total{model, version, api, status}: requests by gRPC status code name.
    - serving_request_latency_seconds{model, api}: wall time per request.
    - serving_batch_size{model, signature}: rows per model call under --enable_batching (before
      padding); serving_padded_batch_size: after padding to allowed_batch_sizes;
      serving_length_bucket_batch_size{model, signature, bucket}: rows per call by length bucket
      (`length_buckets`; bucket "<=16", ">64" or "unestimated",
      serving.dispatch.batching.bucket_label).
    - serving_warmup_requests_total{model, version}: warmup records replayed at load.
    - serving_request_log_sampled_total{model}: requests sampled for the request log
      (serving/monitoring/request_logger.py); each ends up written
      (serving_request_log_written_total{model}, flushed to its file) or dropped
      (serving_request_log_dropped_total{model, reason}: queue_full when the writer is behind,
      write_error when the file system refused).
    `tf` holds stock TF Serving's metrics under their own names
    (serving/monitoring/tf_metrics.py); the exposition has both.
    """

    def __init__(self):
        self.registry = prometheus_client.CollectorRegistry()
        self.tf = TfServingMetrics()
        self.requests = self._counter(
            "serving_requests",
            "Requests by model, version, API and status code.",
            ["model", "version", "api", "status"],
        )
        self.latency = self._histogram(
            "serving_request_latency_seconds",
            "Request latency in seconds.",
            ["model", "api"],
            LATENCY_BUCKETS,
        )
        self.batch_size = self._histogram(
            "serving_batch_size",
            "Rows per batched model call (before padding).",
            ["model", "signature"],
            BATCH_BUCKETS,
        )
        self.padded_batch_size = self._histogram(
            "serving_padded_batch_size",
            "Rows per batched model call after padding.",
            ["model", "signature"],
            BATCH_BUCKETS,
        )
        self.bucket_batch_size = self._histogram(
            "serving_length_bucket_batch_size",
            "Rows per batched model call, by length bucket (length_buckets).",
            ["model", "signature", "bucket"],
            BATCH_BUCKETS,
        )
        self.warmup = self._counter(
            "serving_warmup_requests",
            "Warmup requests replayed at load time.",
            ["model", "version"],
        )

        self.request_log_sampled = self._counter(
            "serving_request_log_sampled", "Requests sampled for the request log.", ["model"]
        )
        self.request_log_written = self._counter(
            "serving_request_log_written",
            "Request log records written (flushed) to their file.",
            ["model"],
        )
        self.request_log_dropped = self._counter(
            "serving_request_log_dropped",
            "Request log records dropped: queue_full (the writer is behind) or write_error.",
            ["model", "reason"],
        )

    def _counter(self, name, documentation, labels):
        """A labelled Counter in this object's own registry (never the global one)."""
        return prometheus_client.Counter(name, documentation, labels, registry=self.registry)

    def _histogram(self, name, documentation, labels, buckets):
        """A labelled Histogram with `buckets` in this object's own registry."""
        return prometheus_client.Histogram(
            name, documentation, labels, buckets=buckets, registry=self.registry
        )

    def exposition(self) -> tuple:
        """(body bytes, content type) for an HTTP response."""
        body = prometheus_client.generate_latest(self.registry) + self.tf.text().encode("utf-8")
        return body, prometheus_client.CONTENT_TYPE_LATEST
