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


def test_a_percentile_from_too_few_batches_is_not_given_and_says_why():
    """Two timed batches: the 'p99' was the slower of the two, the machine's load of the moment
    (a gate went from NOT_BLESSED at 2,545 ms to BLESSED at 48.9 ms on the same model)."""
    s = latency_summary([0.05, 2.5], [32, 14], 32, "in-process")
    assert s["p50_ms"] == pytest.approx(1275.0)
    assert (s["p95_ms"], s["p99_ms"]) == (None, None)
    assert s["too_few"] == {
        "p95_ms": "2 timed batches: a p95 needs at least 20",
        "p99_ms": "2 timed batches: a p99 needs at least 100",
    }
    assert latency_summary([0.01] * 99, [1] * 99, 1, "x")["too_few"] == {
        "p99_ms": "99 timed batches: a p99 needs at least 100"
    }
    assert latency_summary([0.01] * 100, [1] * 100, 1, "x")["too_few"] == {}
    machine = s["machine"]
    assert machine["cpu"] and machine["cores"] >= 1 and machine["load_average_1m"] >= 0
