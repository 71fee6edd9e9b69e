#!/usr/bin/env bash
# The documented accuracy runs of three families, back to back on the one fine-tuning driver, to
# compare with the figures recorded before it (docs/results/accuracy.md "Fine-tuning families on
# one driver"): SQuAD v1.1 article split on core 0; CoNLL-2003 then the SST-2 main job (67,000 rows,
# mixed_bfloat16, seed 42) on core 1. Each with the flags of its doc (docs/squad.md,
# docs/ner_swag_features.md, docs/finetuning.md). Outputs under $OUT (default runs/family_accuracy).
set -euo pipefail
cd "$(dirname "$0")/.."
export KERAS_BERT_DATA_DIR="${KERAS_BERT_DATA_DIR:-../shared/data}" TF_CPP_MIN_LOG_LEVEL=3
OUT="${OUT:-runs/family_accuracy}"
PY=.venv/bin/python
mkdir -p "$OUT"
D="$KERAS_BERT_DATA_DIR"
(
  /usr/bin/time -f "squad wall %e s" taskset -c 0 "$PY" recipes/run_squad.py \
    --init_checkpoint=minilm_l6_h384_uncased --train_file="$D/squad/dev-v1.1.json" \
    --predict_file="$D/squad/dev-v1.1.json" --holdout_fraction=0.5 --max_seq_length=384 \
    --doc_stride=128 --max_query_length=64 --train_batch_size=32 --learning_rate=1e-4 \
    --num_train_epochs=1 --warmup_proportion=0.1 --mixed_precision=mixed_bfloat16 --verbose=2 \
    --output_dir="$OUT/squad_v1" > "$OUT/squad.log" 2>&1
) &
(
  /usr/bin/time -f "conll wall %e s" taskset -c 1 "$PY" recipes/run_ner.py --data_dir="$D/conll2003" \
    --init_checkpoint=minilm_l6_h384_uncased --max_seq_length=128 --train_batch_size=32 \
    --learning_rate=1e-4 --num_train_epochs=1.5 --max_train_seconds=900 \
    --mixed_precision=mixed_bfloat16 --verbose=2 --output_dir="$OUT/conll" > "$OUT/conll.log" 2>&1
  MAX_TRAIN_EXAMPLES=67000 MIXED_PRECISION=mixed_bfloat16 WORK_DIR="$OUT/main_job" \
    taskset -c 1 bash scripts/main_job.sh > "$OUT/main_job.log" 2>&1
) &
wait
grep -h "all metrics\|wall" "$OUT"/*.log
