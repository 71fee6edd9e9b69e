"""Latency, throughput and cost of a prediction path, from per-batch wall times.

Percentiles are numpy's linear interpolation over the batch latencies (one request = one batch of
`batch_size` examples, end to end: tokenization, model and, over gRPC, the network). Throughput is
examples / total seconds of the timed batches (one after another, nothing concurrent). Cost per
1,000 predictions = machine price per hour / 3600 / throughput * 1000 (the machine busy only
with this model).
"""

from __future__ import annotations

import numpy as np


def latency_summary(
    seconds, sizes, batch_size: int, path: str, machine_cost_per_hour: float | None = None
) -> dict:
    """Summary of timed batches.

    Args:
        seconds: float [num_batches] wall seconds per batch.
        sizes: int [num_batches] examples per batch.
        batch_size: the requested batch size (the last batch may be smaller).
        path: str, how predictions were made (shown in reports).
        machine_cost_per_hour: price of the machine in any currency per hour, or None.

    Returns:
        {"path", "batch_size", "num_batches", "examples", "p50_ms", "p95_ms", "p99_ms",
        "mean_ms", "throughput_per_s", "machine_cost_per_hour", "cost_per_1000"} (cost None
        without a price).

    Raises:
        ValueError: no batches, mismatched lengths, or a negative price.
    """
    seconds = np.asarray(seconds, np.float64)
    sizes = np.asarray(sizes, np.int64)
    if seconds.size == 0 or seconds.shape != sizes.shape:
        raise ValueError(
            f"need per-batch seconds and sizes of one length, got {seconds.shape} and {sizes.shape}"
        )
    if machine_cost_per_hour is not None and machine_cost_per_hour < 0:
        raise ValueError(f"machine_cost_per_hour must be >= 0, got {machine_cost_per_hour}")
    p50, p95, p99 = np.percentile(seconds * 1000.0, [50, 95, 99])
    throughput = float(sizes.sum() / seconds.sum()) if seconds.sum() > 0 else float("inf")
    cost = None
    if machine_cost_per_hour is not None:
        cost = float(machine_cost_per_hour / 3600.0 / throughput * 1000.0)
    return {
        "path": path,
        "batch_size": int(batch_size),
        "num_batches": int(seconds.size),
        "examples": int(sizes.sum()),
        "p50_ms": float(p50),
        "p95_ms": float(p95),
        "p99_ms": float(p99),
        "mean_ms": float(seconds.mean() * 1000.0),
        "throughput_per_s": throughput,
        "machine_cost_per_hour": machine_cost_per_hour,
        "cost_per_1000": cost,
    }
