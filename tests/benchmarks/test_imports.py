"""Benchmark modules that tests import define no absl flag at import: every test file of a worker
process shares the global flags, and recipes run in process parse them (a required or repeated
flag from a benchmark failed tests/recipes/test_uri_paths.py once)."""

import subprocess
import sys

from tests.recipes.recipe_process import REPO

IMPORTED_BY_TESTS = (
    "benchmarks.bench_litert",
    "benchmarks.bench_memory",
    "benchmarks.bench_serving",
    "benchmarks.common",
    "benchmarks.peers.openvino_peer",
    "benchmarks.peers.squad_task_to_hf",
    "tools.learning_curves",
    "tools.soak",
)


def test_importing_a_benchmark_module_defines_no_flag():
    code = (
        "from absl import app, flags, logging; import importlib, sys\n"
        "before = set(flags.FLAGS)  # absl's own flags (app, logging) are defined by then\n"
        "for name in sys.argv[1:]:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(set(flags.FLAGS) - before))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *IMPORTED_BY_TESTS],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"
