#!/usr/bin/env bash
# The prepared device check: on a machine with an NVIDIA GPU, under 8 minutes, one
# Markdown table of devices, build, the pytest tests marked gpu, fine-tuning and encoder speed in
# float32 / mixed_float16 / mixed_bfloat16 with and without XLA, MirroredStrategy, and the
# keras-hub and PyTorch peers where installed (tools/device_check.py says what and how).
#   bash scripts/device_check.sh [--output=runs/device_check/gpu.md]
#   bash scripts/device_check.sh --dry_run    # the same code paths on the CPU, tiny, < 1 minute
# Reads $KERAS_BERT_DATA_DIR (default ../shared/data) for SST-2; $PY picks the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
export KERAS_BERT_DATA_DIR="${KERAS_BERT_DATA_DIR:-../shared/data}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
PY="${PY:-.venv/bin/python}"
exec "$PY" -m tools.device_check "$@"
