"""Latency percentiles, throughput and cost per 1,000 predictions."""

import pytest

from keras_bert.evaluation.latency import latency_summary


def test_percentiles_throughput_and_cost():
    seconds = [0.01 * k for k in range(1, 101)]  # 10 ms .. 1000 ms
    s = latency_summary(seconds, [4] * 100, 4, "in-process", machine_cost_per_hour=3.6)
    assert s["p50_ms"] == pytest.approx(505.0) and s["p95_ms"] == pytest.approx(950.5)
    assert s["p99_ms"] == pytest.approx(990.1)
    assert s["throughput_per_s"] == pytest.approx(400 / 50.5)
    # 3.6 per hour = 0.001 per second; 1000 predictions take 1000 / throughput seconds
    assert s["cost_per_1000"] == pytest.approx(0.001 * 1000 / (400 / 50.5))
    assert s["examples"] == 400 and s["num_batches"] == 100


def test_no_price_no_cost_and_bad_input():
    assert latency_summary([0.5], [3], 4, "x")["cost_per_1000"] is None
    with pytest.raises(ValueError, match="one length"):
        latency_summary([0.5, 0.2], [3], 4, "x")
    with pytest.raises(ValueError, match=">= 0"):
        latency_summary([0.5], [3], 4, "x", machine_cost_per_hour=-1)
