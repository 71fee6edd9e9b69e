"""Fixtures of the recipe tests."""

import pytest

from tests.recipes.on_ram import ram_root


@pytest.fixture
def ram(monkeypatch, tmp_path):
    """A fresh ram:// root holding vocab.txt (tests/recipes/on_ram.py); the cwd is an empty local
    directory, which must still be empty at the end."""
    monkeypatch.chdir(tmp_path)
    yield from ram_root(tmp_path)
