#!/usr/bin/env bash
# Small-scale version of the paper's table 5 (Devlin et al. 2018, section 5.1) on WikiText-2:
# WordPiece vocabulary, pretraining data, bert_tiny pretraining in three variants (MLM+NSP,
# --no_nsp, --ltr) with the same steps and schedule, then fine-tuning each encoder (and, as a
# floor, a randomly initialised bert_tiny: variant "none") on SST-2 and RTE at each learning rate
# of FT_LRS, keeping the best dev accuracy per task as the paper does. Prints and writes
# $WORK_DIR/table5_s<STEPS>_e<FT_EPOCHS>_<FT_POOLING>.json and .md. Reruns skip finished stages and resume killed runs.
#
#   bash scripts/pretraining_ablation.sh                 # defaults below
#   STEPS=4000 VARIANTS="full no_nsp" bash scripts/pretraining_ablation.sh
#
# Environment (all optional):
#   KERAS_BERT_DATA_DIR  real datasets (default ../shared/data): wikitext/, glue/sst2, glue/rte
#   WORK_DIR             outputs (default ${TMPDIR:-/tmp}/keras_bert_table5)
#   STEPS                pretraining steps per variant (default 5000), batch 32 x 128 tokens
#   VARIANTS             any of: full no_nsp ltr none (default all four)
#   FT_EPOCHS            fine-tuning epochs (default 3); FT_LRS peak learning rates (1e-4 3e-4 1e-3)
#   FT_POOLING           classifier input: cls (BERT's pooled [CLS], default) or mean. The ltr
#                        variant always uses mean: in a causal encoder [CLS] attends only to itself.
#   PYTHON               interpreter (default .venv/bin/python); TF_CPP_MIN_LOG_LEVEL (default 2)
# Output directories carry the settings that shape them (pt_<variant>_s<STEPS>,
# ft_<task>_<variant>_s<STEPS>_e<FT_EPOCHS>_<pooling>_lr<lr>), so a rerun with other settings never reuses
# results made with the old ones.
set -euo pipefail
cd "$(dirname "$0")/.."

DATA="${KERAS_BERT_DATA_DIR:-../shared/data}"
WORK_DIR="${WORK_DIR:-${TMPDIR:-/tmp}/keras_bert_table5}"
STEPS="${STEPS:-5000}"
VARIANTS="${VARIANTS:-full no_nsp ltr none}"
FT_EPOCHS="${FT_EPOCHS:-3}"
FT_LRS="${FT_LRS:-1e-4 3e-4 1e-3}"
FT_POOLING="${FT_POOLING:-cls}"
case "$FT_POOLING" in cls|mean) ;; *) echo "FT_POOLING must be cls or mean, got $FT_POOLING" >&2; exit 2 ;; esac
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
PY="${PYTHON:-.venv/bin/python}"
WIKI="$DATA/wikitext/wikitext-2-raw/wiki.test.raw"
for v in $VARIANTS; do
  case "$v" in full|no_nsp|ltr|none) ;; *) echo "unknown variant $v (use full, no_nsp, ltr, none)" >&2; exit 2 ;; esac
done
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
    none) extra=() ;;
  esac
  if [ "$v" = none ]; then
    model=(--preset=bert_tiny --vocab_file="$WORK_DIR/vocab.txt")
  else
    pt="$WORK_DIR/pt_${v}_s$STEPS"
    model=(--init_checkpoint="$pt/encoder")
    if [ ! -s "$pt/metrics.json" ] || ! grep -q "\"steps\": $STEPS," "$pt/metrics.json"; then
      step "pretraining $v: $STEPS steps"
      $PY -m recipes.run_pretraining --input_file="$WORK_DIR/data/wiki.tfrecord-*" \
          --vocab_file="$WORK_DIR/vocab.txt" --output_dir="$pt" --preset=bert_tiny \
          --max_seq_length=128 --max_predictions_per_seq=20 --train_batch_size=32 \
          --num_train_steps="$STEPS" --num_warmup_steps=$((STEPS / 10)) --learning_rate=1e-3 \
          --save_checkpoints_steps=250 "${extra[@]}"
    fi
  fi
  pooling="$FT_POOLING"; [ "$v" = ltr ] && pooling=mean
  for task in sst2 rte; do
    for lr in $FT_LRS; do
      out="$WORK_DIR/ft_${task}_${v}_s${STEPS}_e${FT_EPOCHS}_${pooling}_lr$lr"
      [ -s "$out/metrics.json" ] && continue
      step "fine-tuning $v on $task, $pooling pooling, learning rate $lr"
      seq=128; [ "$task" = sst2 ] && seq=64
      $PY recipes/run_classifier.py --task_name=$task --data_dir="$DATA/glue" "${model[@]}" \
          --max_seq_length=$seq --train_batch_size=32 --learning_rate="$lr" --classifier_pooling=$pooling \
          --num_train_epochs="$FT_EPOCHS" --output_dir="$out" --verbose=2
    done
  done
done

step "table"
$PY - "$WORK_DIR" "$FT_LRS" "s${STEPS}" "e${FT_EPOCHS}" "$FT_POOLING" $VARIANTS <<'PYEOF'
import json, pathlib, sys
work, lrs, steps, epochs, pooling_flag = pathlib.Path(sys.argv[1]), sys.argv[2].split(), sys.argv[3], sys.argv[4], sys.argv[5]
variants = sys.argv[6:]
names = {"full": "BERT-tiny (MLM + NSP)", "no_nsp": "No NSP", "ltr": "LTR & No NSP",
         "none": "no pretraining (random init)"}
table = ["| model | pretraining steps | MLM acc (last 250 steps) | NSP acc (last 250 steps) | pooling | SST-2 dev acc (lr) | RTE dev acc (lr) |",
         "|---|---|---|---|---|---|---|"]
rows = []
for v in variants:
    pooling = "mean" if v == "ltr" else pooling_flag
    row = {"variant": v, "pooling": pooling}
    if v != "none":
        pt = json.loads((work / f"pt_{v}_{steps}" / "metrics.json").read_text())
        last = pt["history"][-1]
        row.update(steps=pt["steps"], seconds=last.get("seconds"), mlm_accuracy=last.get("mlm_accuracy"),
                   nsp_accuracy=last.get("nsp_accuracy"))
    for task in ("sst2", "rte"):
        scores = {lr: json.loads((work / f"ft_{task}_{v}_{steps}_{epochs}_{pooling}_lr{lr}" / "metrics.json").read_text())["best"]["accuracy"]
                  for lr in lrs}
        best = max(scores, key=scores.get)
        row[task] = {"best": scores[best], "learning_rate": best, "all": scores}
    rows.append(row)
    fmt = lambda x: "-" if x is None else f"{x:.3f}"
    table.append(f"| {names[v]} | {row.get('steps', 0)} | {fmt(row.get('mlm_accuracy'))} | "
                 f"{fmt(row.get('nsp_accuracy'))} | {pooling} | {row['sst2']['best']:.4f} ({row['sst2']['learning_rate']}) | "
                 f"{row['rte']['best']:.4f} ({row['rte']['learning_rate']}) |")
(work / f"table5_{steps}_{epochs}_{pooling_flag}.json").write_text(json.dumps(rows, indent=2))
(work / f"table5_{steps}_{epochs}_{pooling_flag}.md").write_text("\n".join(table) + "\n")
print("\n".join(table))
PYEOF
