"""benchmarks/bench_reload_under_load.py at a CI size: a few seconds of 4 closed-loop gRPC
clients while versions are published and removed and the config is reloaded (a model added, then
removed), with a tiny core-op SavedModel. No request may fail; latencies are reported, never
asserted (SPEC section 10)."""

from benchmarks import bench_reload_under_load as bench
from tests.serving import saved_models


def test_small_reload_run_fails_no_request(tmp_path):
    saved_models.build_classifier(str(tmp_path / "model"), seed=0)
    result = bench.run_benchmark(
        tmp_path / "model",
        clients=4,
        seconds=1.0,
        interval_s=0.2,
        poll_s=0.2,
        margin_s=0.2,
        work=tmp_path / "run",
    )
    assert result["requests"] > 0 and result["failed"] == 0
    assert result["events"][: len(bench.EVENTS)] == list(bench.EVENTS)
    publishes = result["events"].count("publish")
    assert set(result["versions"]) <= set(range(1, publishes + 2))  # only versions it published
    rows = {group: (count, failed) for group, count, failed, _, _ in result["rows"]}
    assert (
        sum(rows[g][0] for g in ("outside swap windows", "inside swap windows"))
        == (result["requests"])
    )
    assert rows["inside swap windows"][0] == sum(
        rows[f"inside: {kind}"][0] for kind in dict.fromkeys(bench.EVENTS)
    )
    text = bench.report(result)
    assert f"Failed requests: 0 of {result['requests']} (target 0)" in text
    assert "| inside swap windows |" in text
