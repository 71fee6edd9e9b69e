"""Side-by-side benchmark scripts; run as `python -m benchmarks.bench_<name>`."""
