"""The modules of benchmarks/ and tools/ that tests import (found by reading every test file)
define no absl flag at import: every test file of a worker process shares the global flags, and
recipes run in process parse them (a required or repeated flag from a benchmark failed
tests/recipes/test_uri_paths.py once, and a peer's data program's --output_dir failed 67 recipe
tests in one run)."""

import ast
import subprocess
import sys

from tests.recipes.recipe_process import REPO

PACKAGES = ("benchmarks", "tools")  # programs whose modules the tests import


def imported_by_tests() -> list[str]:
    """Every module of `PACKAGES` that a file under tests/ imports (at its top or in a function)."""
    found = set()
    for path in (REPO / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:  # a submodule where one is named, else the module
                    sub = f"{node.module}.{alias.name}"
                    is_module = (REPO / (sub.replace(".", "/") + ".py")).exists()
                    found.add(sub if is_module else node.module)
    return sorted(m for m in found if m.split(".")[0] in PACKAGES)


def test_importing_a_benchmark_module_defines_no_flag():
    code = (
        "from absl import app, flags, logging; import importlib, sys, tensorflow\n"
        "before = set(flags.FLAGS)  # absl's (app, logging) and TensorFlow's own flags\n"
        "for name in sys.argv[1:]:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(set(flags.FLAGS) - before))"
    )
    modules = imported_by_tests()
    for known in ("benchmarks.peers.ner_peer_data", "benchmarks.bench_serving", "tools.soak"):
        assert known in modules
    proc = subprocess.run(
        [sys.executable, "-c", code, *modules],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"
