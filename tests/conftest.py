"""Shared pytest setup: the `slow` marker, the real-data directory and the repository root."""

import os
import pathlib

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="needs --run-slow")
    for item in items:
        if "slow" in item.keywords:
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
