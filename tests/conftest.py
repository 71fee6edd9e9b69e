"""Shared pytest setup: the `slow` and `gpu` markers, the real-data directory and the repository root."""

import os
import pathlib

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    _skip_gpu_tests_without_a_gpu(items)
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="needs --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def _skip_gpu_tests_without_a_gpu(items):
    """Tests marked `gpu` are skipped, with the reason, where TensorFlow sees no GPU (TensorFlow
    is imported only when such a test was collected)."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return
    skip = pytest.mark.skip(
        reason="needs a GPU: TensorFlow sees none (tf.config.list_physical_devices('GPU') is "
        "empty; no CUDA device, driver or CUDA build of TensorFlow, or CUDA_VISIBLE_DEVICES hides it)"
    )
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
    """Real datasets: $KERAS_BERT_DATA_DIR, else ../shared/data beside the repository."""
    path = pathlib.Path(os.environ.get("KERAS_BERT_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))
    if not (path / "glue").is_dir():
        pytest.fail(f"real data not found at {path}; set KERAS_BERT_DATA_DIR (see README)")
    return path


@pytest.fixture(scope="session")
def uncased_vocab(data_dir) -> pathlib.Path:
    return data_dir / "vocab" / "bert-base-uncased-vocab.txt"


@pytest.fixture(scope="session")
def cased_vocab(data_dir) -> pathlib.Path:
    return data_dir / "vocab" / "bert-base-cased-vocab.txt"


class _LongRunning:
    """Names the tests that run long, where a quiet run shows only dots: every `every_s` seconds,
    one line per test running for more than `after_s` ("[still running, 3 min] tests/a.py::t").
    On the controller only (under pytest-xdist the workers' starts and ends reach it as hooks)."""

    def __init__(self, every_s: float = 60.0, after_s: float = 60.0):
        import threading

        self.every_s, self.after_s = every_s, after_s
        self.running: dict[str, float] = {}
        self.lock, self.done = threading.Lock(), threading.Event()
        self.thread = threading.Thread(target=self._watch, name="long-running", daemon=True)

    def pytest_runtest_logstart(self, nodeid, location):
        import time

        with self.lock:
            self.running[nodeid] = time.monotonic()

    def pytest_runtest_logreport(self, report):
        if report.when == "teardown" or (report.when == "setup" and report.failed):
            with self.lock:
                self.running.pop(report.nodeid, None)

    def pytest_sessionfinish(self):
        self.done.set()

    def _watch(self):
        import sys
        import time

        while not self.done.wait(self.every_s):
            now = time.monotonic()
            with self.lock:
                long = [(now - t, n) for n, t in self.running.items() if now - t > self.after_s]
            for seconds, nodeid in sorted(long, reverse=True):
                print(
                    f"\n[still running, {seconds / 60:.0f} min] {nodeid}",
                    file=sys.stderr,
                    flush=True,
                )


def pytest_configure(config):
    if not hasattr(config, "workerinput") and config.getoption("verbose") <= 0:
        watcher = _LongRunning()
        config.pluginmanager.register(watcher, "long-running")
        watcher.thread.start()
