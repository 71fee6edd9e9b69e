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
