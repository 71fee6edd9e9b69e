"""benchmarks/bench_bucketed_batching.py's workload and batching file. A run of both arms at the
smallest size still starts two servers (about 35 s on a 2-core machine), too long for CI; the
benchmark is run by hand (its docstring)."""

import dataclasses

from benchmarks import bench_bucketed_batching as bench
from serving.dispatch.batching import BatchingOptions, parse_batching_parameters

ARGS = {
    "max_batch_size": 8,
    "allowed_batch_sizes": [4, 8],
    "batch_timeout_micros": 2000,
    "num_batch_threads": 2,
}


def test_workload_mixes_long_texts_in():
    sentences = ["a b c", "d e", "f g h i"]
    texts = bench.workload(sentences, 0.25, 10, 16)
    assert len(texts) == 16
    longs = [t for t in texts if len(t.split()) >= 10]
    assert len(longs) == 4 and sorted(set(texts) - set(longs)) == sentences


def test_batching_config_parses_as_the_server_reads_it():
    padded, bucketed = bench.batching_config(ARGS, ()), bench.batching_config(ARGS, (8, 16))
    want = BatchingOptions(
        max_batch_size=8,
        batch_timeout_micros=2000,
        num_batch_threads=2,
        max_enqueued_batches=1000,
        allowed_batch_sizes=(4, 8),
    )
    assert parse_batching_parameters(padded) == want
    assert parse_batching_parameters(bucketed) == dataclasses.replace(want, length_buckets=(8, 16))
