"""Side-by-side benchmark scripts (issue 7); run as `python -m benchmarks.bench_<name>`."""
