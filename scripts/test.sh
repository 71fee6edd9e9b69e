#!/usr/bin/env bash
# The README's test command: installs what it needs, then runs the whole suite, slow tests
# included. Real datasets come from $KERAS_BERT_DATA_DIR (default ../shared/data).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export KERAS_BERT_DATA_DIR="${KERAS_BERT_DATA_DIR:-../shared/data}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
exec .venv/bin/python -m pytest --run-slow -q -rs --durations=25 "$@"
