#!/usr/bin/env bash
# The README's test command: installs what it needs, then runs the whole suite, slow tests
# included. Real datasets come from $KERAS_BERT_DATA_DIR (default ../shared/data).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Debian's chromium, for the one test that opens recipes/evaluate.py's report.html in a headless
# browser (tests/recipes/test_evaluate.py); only this command installs it, and says so first.
# KERAS_BERT_NO_CHROMIUM=1 skips the install (that test is then skipped, with its reason).
if ! command -v chromium >/dev/null 2>&1 && [ "${KERAS_BERT_NO_CHROMIUM:-0}" != 1 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "[test] installing Debian's chromium with apt-get for the headless-browser report test" \
         "(KERAS_BERT_NO_CHROMIUM=1 skips it)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "[test] WARNING: could not install chromium; the headless-browser report test will be skipped"
  else
    echo "[test] NOTE: chromium not found; the headless-browser report test will be skipped" \
         "(as root: apt-get install chromium)"
  fi
fi
export KERAS_BERT_DATA_DIR="${KERAS_BERT_DATA_DIR:-../shared/data}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
# The linter and the formatter first (pyproject.toml [tool.ruff]): pyflakes, pycodestyle, unused
# `noqa`s, and `ruff format --check` (run `.venv/bin/ruff format .` to apply it).
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Two worker processes (pytest-xdist; KERAS_BERT_TEST_WORKERS=0 runs in this process), each
# taking whole test files (--dist loadfile), so a module's fixtures are built once.
exec .venv/bin/python -m pytest --run-slow -q -rs --durations=25 \
  -n "${KERAS_BERT_TEST_WORKERS:-2}" --dist loadfile "$@"
