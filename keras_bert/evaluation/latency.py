"""Latency, throughput and cost of a prediction path, from per-batch wall times.

Percentiles are numpy's linear interpolation over the batch latencies (one request = one batch of
`batch_size` examples, end to end: tokenization, model and, over gRPC, the network). A percentile
p is given only from at least 1 / (1 - p) batches (p95: 20, p99: 100): from fewer, the largest
batch stands in for it, and the figure would say the machine's load of the moment, not the
model's tail (2 timed batches: "p99" is the slower of two). Such a figure is None, and
`too_few` says why. Every summary records the machine it was measured on (`machine`: CPU
model, cores, load average when it started). Throughput is
examples / total seconds of the timed batches (one after another, nothing concurrent). Cost per
1,000 predictions = machine price per hour / 3600 / throughput * 1000 (the machine busy only
with this model).
"""

from __future__ import annotations

import os
import platform

import numpy as np

# Each percentile reported, and the fewest batches that measure it (n >= 1 / (1 - p)).
PERCENTILES = {"p50_ms": (50, 2), "p95_ms": (95, 20), "p99_ms": (99, 100)}


def machine() -> dict:
    """The machine a latency was measured on: CPU model, cores this process may use, and the
    1-minute load average (a busy machine's figures are not an idle one's)."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        model = names[0] if names else model
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"cpu": model, "cores": cores, "load_average_1m": load}


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
        "mean_ms", "throughput_per_s", "machine_cost_per_hour", "cost_per_1000", "too_few",
        "machine"} (cost None without a price; a percentile None from too few batches, and
        `too_few` maps it to why).

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
    n = int(seconds.size)
    percentiles, too_few = {}, {}
    for key, (q, needed) in PERCENTILES.items():
        if n >= needed:
            percentiles[key] = float(np.percentile(seconds * 1000.0, q))
        else:
            percentiles[key] = None
            too_few[key] = (
                f"{n} timed batch{'' if n == 1 else 'es'}: a p{q} needs at least {needed}"
            )
    throughput = float(sizes.sum() / seconds.sum()) if seconds.sum() > 0 else float("inf")
    cost = None
    if machine_cost_per_hour is not None:
        cost = float(machine_cost_per_hour / 3600.0 / throughput * 1000.0)
    return {
        "path": path,
        "batch_size": int(batch_size),
        "num_batches": int(seconds.size),
        "examples": int(sizes.sum()),
        **percentiles,
        "mean_ms": float(seconds.mean() * 1000.0),
        "throughput_per_s": throughput,
        "machine_cost_per_hour": machine_cost_per_hour,
        "cost_per_1000": cost,
        "too_few": too_few,
        "machine": machine(),
    }
