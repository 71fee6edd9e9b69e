#!/usr/bin/env bash
# Small-scale version of the paper's table 5 (Devlin et al. 2018, section 5.1) on WikiText-2:
# WordPiece vocabulary, pretraining data, bert_tiny pretraining in three variants (MLM+NSP,
# --no_nsp, --ltr) with the same steps and schedule, then fine-tuning each encoder on SST-2 and RTE.
# Prints and writes $WORK_DIR/table5.json and table5.md. Reruns skip finished stages and resume
# killed pretraining runs from their last checkpoint.
#
#   bash scripts/pretraining_ablation.sh                 # defaults below
#   STEPS=4000 VARIANTS="full no_nsp" bash scripts/pretraining_ablation.sh
#
# Environment (all optional):
#   KERAS_BERT_DATA_DIR  real datasets (default ../shared/data): wikitext/, glue/sst2, glue/rte
#   WORK_DIR             outputs (default ${TMPDIR:-/tmp}/keras_bert_table5)
#   STEPS                pretraining steps per variant (default 3000), batch 32 x 128 tokens
#   VARIANTS             any of: full no_nsp ltr (default all three)
#   FT_EPOCHS            fine-tuning epochs (default 3); FT_LR fine-tuning peak learning rate (1e-4)
set -euo pipefail
cd "$(dirname "$0")/.."

DATA="${KERAS_BERT_DATA_DIR:-../shared/data}"
WORK_DIR="${WORK_DIR:-${TMPDIR:-/tmp}/keras_bert_table5}"
STEPS="${STEPS:-3000}"
VARIANTS="${VARIANTS:-full no_nsp ltr}"
FT_EPOCHS="${FT_EPOCHS:-3}"
FT_LR="${FT_LR:-1e-4}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
PY="${PYTHON:-.venv/bin/python}"
WIKI="$DATA/wikitext/wikitext-2-raw/wiki.test.raw"
mkdir -p "$WORK_DIR"

step() { echo; echo "=== [pretraining_ablation +${SECONDS}s] $*"; }

if [ ! -s "$WORK_DIR/vocab.txt" ]; then
  step "vocabulary (8,000 WordPieces) from $WIKI"
  $PY -m recipes.create_vocab --input_file="$WIKI" --input_format=wikitext \
      --vocab_file="$WORK_DIR/vocab.txt" --vocab_size=8000
fi
if [ ! -s "$WORK_DIR/data/wiki.tfrecord.summary.json" ]; then
  step "pretraining data (dupe_factor 10, seq 128, 20 predictions)"
  $PY -m recipes.create_pretraining_data --input_file="$WIKI" --input_format=wikitext \
      --output_file="$WORK_DIR/data/wiki.tfrecord" --num_shards=4 --vocab_file="$WORK_DIR/vocab.txt" \
      --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=10 --num_workers=1
fi

for v in $VARIANTS; do
  case "$v" in
    full) extra=() ;;
    no_nsp) extra=(--no_nsp) ;;
    ltr) extra=(--ltr) ;;
    *) echo "unknown variant $v (use full, no_nsp, ltr)" >&2; exit 2 ;;
  esac
  if [ ! -s "$WORK_DIR/pt_$v/metrics.json" ] || ! grep -q "\"steps\": $STEPS," "$WORK_DIR/pt_$v/metrics.json"; then
    step "pretraining $v: $STEPS steps"
    $PY -m recipes.run_pretraining --input_file="$WORK_DIR/data/wiki.tfrecord-*" \
        --vocab_file="$WORK_DIR/vocab.txt" --output_dir="$WORK_DIR/pt_$v" --preset=bert_tiny \
        --max_seq_length=128 --max_predictions_per_seq=20 --train_batch_size=32 \
        --num_train_steps="$STEPS" --num_warmup_steps=$((STEPS / 10)) --learning_rate=1e-3 \
        --save_checkpoints_steps=250 "${extra[@]}"
  fi
  for task in sst2 rte; do
    [ -s "$WORK_DIR/ft_${task}_$v/metrics.json" ] && continue
    step "fine-tuning $v on $task"
    seq=128; [ "$task" = sst2 ] && seq=64
    $PY recipes/run_classifier.py --task_name=$task --data_dir="$DATA/glue" \
        --init_checkpoint="$WORK_DIR/pt_$v/encoder" --max_seq_length=$seq --train_batch_size=32 \
        --learning_rate="$FT_LR" --num_train_epochs="$FT_EPOCHS" --output_dir="$WORK_DIR/ft_${task}_$v" \
        --verbose=2
  done
done

step "table"
$PY - "$WORK_DIR" $VARIANTS <<'EOF'
import json, pathlib, sys
work, variants = pathlib.Path(sys.argv[1]), sys.argv[2:]
names = {"full": "BERT-tiny (MLM + NSP)", "no_nsp": "No NSP", "ltr": "LTR & No NSP"}
rows, table = [], ["| model | steps | MLM acc (last 250 steps) | NSP acc | SST-2 dev acc | RTE dev acc |", "|---|---|---|---|---|---|"]
for v in variants:
    pt = json.loads((work / f"pt_{v}" / "metrics.json").read_text())
    ft = {t: json.loads((work / f"ft_{t}_{v}" / "metrics.json").read_text())["best"]["accuracy"] for t in ("sst2", "rte")}
    last = pt["history"][-1]
    row = {"variant": v, "steps": pt["steps"], "seconds": last.get("seconds"), "mlm_accuracy": last.get("mlm_accuracy"),
           "nsp_accuracy": last.get("nsp_accuracy"), "sst2": ft["sst2"], "rte": ft["rte"]}
    rows.append(row)
    nsp = "-" if row["nsp_accuracy"] is None else f"{row['nsp_accuracy']:.3f}"
    table.append(f"| {names[v]} | {row['steps']} | {row['mlm_accuracy']:.3f} | {nsp} | {row['sst2']:.4f} | {row['rte']:.4f} |")
(work / "table5.json").write_text(json.dumps(rows, indent=2))
(work / "table5.md").write_text("\n".join(table) + "\n")
print("\n".join(table))
EOF
