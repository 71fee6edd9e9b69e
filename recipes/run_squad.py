"""Fine-tune BERT on SQuAD v1.1 / v2.0 span question answering, predict, score, export.

    python recipes/run_squad.py --init_checkpoint=minilm_l6_h384_uncased \
        --train_file=$KERAS_BERT_DATA_DIR/squad/dev-v1.1.json \
        --predict_file=$KERAS_BERT_DATA_DIR/squad/dev-v1.1.json --holdout_fraction=0.5 \
        --max_seq_length=384 --doc_stride=128 --train_batch_size=32 --learning_rate=5e-5 \
        --num_train_epochs=1 --output_dir=runs/squad [--version_2_with_negative] \
        [--export_dir=models --model_name=squad]

Writes config.json, predictions.json, nbest_predictions.json, null_odds.json, metrics.json
(official EM/F1; v2.0 also HasAns/NoAns and the best null threshold), best_model.keras
(`keras_bert.load_task(output_dir)`), checkpoints/ and logs/ to --output_dir. The library does
the work: keras_bert.training.squad_training.run_squad. See docs/squad.md.
"""
import dataclasses
import pathlib
import sys

from absl import app, flags

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from keras_bert.training import squad_training  # noqa: E402
from keras_bert.cli import (define_export_litert_flags, define_group_by_length_flag,  # noqa: E402
                            export_litert_option, fail_usage, print_result)

D = {f.name: f.default for f in dataclasses.fields(squad_training.SquadConfig)}
F = flags
F.DEFINE_string("train_file", None, "SQuAD JSON to train on.")
F.DEFINE_string("predict_file", None, "SQuAD JSON to predict and score.")
F.DEFINE_boolean("version_2_with_negative", False, "SQuAD v2.0: questions may have no answer.")
F.DEFINE_float("holdout_fraction", None, "Split both files by article title: train on the first "
               "titles, predict on the last fraction (disjoint articles).")
F.DEFINE_string("init_checkpoint", None, "Preset name (minilm_l6_h384_uncased) or checkpoint path.")
F.DEFINE_string("bert_config_file", None, "BERT config JSON for a randomly initialised encoder.")
F.DEFINE_string("preset", None, "Preset config (bert_tiny, ...) for a randomly initialised encoder.")
F.DEFINE_string("vocab_file", None, "WordPiece vocab (default: the checkpoint's).")
F.DEFINE_boolean("do_lower_case", None, "Lower-case input (default: the checkpoint's, else True).")
F.DEFINE_integer("max_seq_length", D["max_seq_length"], "Tokens per window incl. [CLS]/[SEP].")
F.DEFINE_integer("doc_stride", D["doc_stride"], "Context pieces between window starts.")
F.DEFINE_integer("max_query_length", D["max_query_length"], "Question pieces kept.")
F.DEFINE_integer("n_best_size", D["n_best_size"], "Start/end positions tried per window.")
F.DEFINE_integer("max_answer_length", D["max_answer_length"], "Longest answer, in pieces.")
F.DEFINE_float("null_score_diff_threshold", D["null_score_diff_threshold"],
               "v2.0: predict no answer when null score - best span score exceeds this.")
F.DEFINE_integer("train_batch_size", D["train_batch_size"], "Global training batch (windows).")
F.DEFINE_integer("predict_batch_size", D["predict_batch_size"], "Prediction batch (windows).")
F.DEFINE_float("learning_rate", D["learning_rate"], "Peak learning rate.")
F.DEFINE_float("num_train_epochs", D["num_train_epochs"], "Epochs (may be fractional).")
F.DEFINE_float("warmup_proportion", D["warmup_proportion"], "Fraction of steps of linear warmup.")
F.DEFINE_float("weight_decay", D["weight_decay"], "AdamW decoupled weight decay.")
F.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
F.DEFINE_integer("gradient_accumulation_steps", 1, "Batches per optimizer update.")
F.DEFINE_float("max_grad_norm", D["max_grad_norm"], "Global-norm gradient clipping (0: off).")
F.DEFINE_enum("strategy", "default", ["default", "mirrored", "multi_worker_mirrored", "tpu"],
              "Distribution.")
F.DEFINE_string("tpu", None, "TPU name or address for --strategy=tpu.")
F.DEFINE_enum("mixed_precision", "float32", ["float32", "mixed_float16", "mixed_bfloat16"],
              "Precision.")
F.DEFINE_boolean("jit_compile", False, "XLA-compile the train step.")
define_group_by_length_flag(D["group_by_length"])
F.DEFINE_integer("max_train_examples", None, "Use only the first N training questions.")
F.DEFINE_integer("max_predict_examples", None, "Use only the first N questions to predict.")
F.DEFINE_integer("seed", D["seed"], "Random seed.")
F.DEFINE_integer("save_checkpoints_steps", D["save_checkpoints_steps"], "Batches between checkpoints.")
F.DEFINE_string("output_dir", None, "Output directory (a rerun with the same flags resumes).")
F.DEFINE_string("export_dir", None, "Export the trained task as a SavedModel under this base dir.")
F.DEFINE_string("model_name", D["model_name"], "Model name for --export_dir.")
F.DEFINE_enum("export_dtype", None, ["float32", "bfloat16"],
              "Dtype policy of the --export_dir SavedModel (default: as trained).")
define_export_litert_flags()
F.DEFINE_integer("verbose", 1, "Keras fit verbosity: 0 silent, 1 progress bar, 2 one line per epoch.")
F.mark_flags_as_required(["output_dir"])
FLAGS = F.FLAGS


def main(argv):
    del argv
    names = {f.name for f in dataclasses.fields(squad_training.SquadConfig)}
    try:
        config = squad_training.SquadConfig(**{n: FLAGS[n].value for n in names if n in FLAGS},
                                            export_litert=export_litert_option(FLAGS))
    except ValueError as e:  # a bad flag value: a usage error, not a traceback
        fail_usage(str(e))
    metrics = squad_training.run_squad(config)
    print_result({name: metrics[name] for name in ("exact_match", "exact", "f1", "train_steps")
                  if name in metrics}, FLAGS.output_dir)  # v1.1 says exact_match, v2.0 exact


if __name__ == "__main__":
    app.run(main)
