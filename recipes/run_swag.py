"""Fine-tune BERT on SWAG multiple choice (BERT section 4.4).

    python recipes/run_swag.py --train_file=swag/train.csv --dev_file=swag/val.csv \
        --init_checkpoint=minilm_l6_h384_uncased --max_seq_length=128 --train_batch_size=16 \
        --learning_rate=2e-5 --num_train_epochs=3 --output_dir=runs/swag [--export_dir=models]

The CSVs are the official rowanz/swagaf files (`keras_bert.data.swag` describes the layout).
Writes config.json, metrics.json (dev accuracy per evaluation and of the best weights),
checkpoints/, logs/ and best_model.keras to --output_dir. The work is
keras_bert.training.swag_training.run_swag; see docs/ner_swag_features.md.
"""
import dataclasses
import pathlib
import sys

from absl import app, flags

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from keras_bert.training import swag_training  # noqa: E402
from keras_bert.cli import (define_export_litert_flags, define_group_by_length_flag,  # noqa: E402
                            export_litert_option, fail_usage, print_result)

D = swag_training.SwagConfig.__dataclass_fields__
F = flags
F.DEFINE_string("train_file", None, "SWAG train.csv (official layout).")
F.DEFINE_string("dev_file", None, "SWAG val.csv (official layout).")
F.DEFINE_string("output_dir", None, "Output directory (a rerun with the same flags resumes).")
F.DEFINE_string("init_checkpoint", None, "Preset name (minilm_l6_h384_uncased) or checkpoint path.")
F.DEFINE_string("bert_config_file", None, "BERT config JSON for a randomly initialised encoder.")
F.DEFINE_string("preset", None, "Preset config (bert_tiny, ...) for a randomly initialised encoder.")
F.DEFINE_string("vocab_file", None, "WordPiece vocab (default: the checkpoint's).")
F.DEFINE_boolean("do_lower_case", None, "Lower-case input (default: the checkpoint's, else True).")
F.DEFINE_integer("max_seq_length", D["max_seq_length"].default, "Pieces per choice incl. [CLS]/[SEP]s.")
F.DEFINE_integer("train_batch_size", D["train_batch_size"].default, "Examples (x 4 choices) per batch.")
F.DEFINE_integer("eval_batch_size", D["eval_batch_size"].default, "Examples per prediction batch.")
F.DEFINE_float("learning_rate", D["learning_rate"].default, "Peak learning rate.")
F.DEFINE_float("num_train_epochs", D["num_train_epochs"].default, "Epochs (may be fractional).")
F.DEFINE_float("warmup_proportion", D["warmup_proportion"].default, "Fraction of steps of warmup.")
F.DEFINE_float("weight_decay", D["weight_decay"].default, "AdamW decoupled weight decay.")
F.DEFINE_float("max_grad_norm", D["max_grad_norm"].default, "Global-norm clipping (0: off).")
F.DEFINE_float("dropout_rate", D["dropout_rate"].default, "Dropout on the pooled [CLS] vector.")
F.DEFINE_integer("max_train_examples", None, "Use only the first N training examples.")
F.DEFINE_integer("max_eval_examples", None, "Use only the first N dev examples.")
F.DEFINE_float("max_train_seconds", None, "Stop training after this many seconds.")
define_group_by_length_flag(D["group_by_length"].default)
F.DEFINE_integer("seed", D["seed"].default, "Random seed.")
F.DEFINE_integer("save_checkpoints_steps", D["save_checkpoints_steps"].default, "Batches between checkpoints.")
F.DEFINE_integer("evaluations_per_epoch", D["evaluations_per_epoch"].default, "Dev evaluations per epoch.")
F.DEFINE_integer("early_stopping_patience", None, "Stop after N epochs without dev improvement.")
F.DEFINE_enum("mixed_precision", "float32", ["float32", "mixed_float16", "mixed_bfloat16"], "Precision.")
F.DEFINE_enum("strategy", "default", ["default", "mirrored"], "Distribution (one machine).")
F.DEFINE_integer("verbose", 1, "Keras fit verbosity: 0 silent, 1 progress bar, 2 one line per epoch.")
F.DEFINE_string("export_dir", None, "Export the best model as a SavedModel under this base dir.")
F.DEFINE_string("model_name", "swag", "Model name for --export_dir.")
define_export_litert_flags()
F.mark_flags_as_required(["train_file", "dev_file", "output_dir"])
FLAGS = F.FLAGS


def main(argv):
    del argv
    names = {f.name for f in dataclasses.fields(swag_training.SwagConfig)}
    try:
        config = swag_training.SwagConfig(**{n: FLAGS[n].value for n in names})
        prepared = swag_training.prepare_swag(config)
    except (ValueError, FileNotFoundError) as e:  # bad flags or data: one line, exit code 2
        fail_usage(str(e))
    result = swag_training.run_swag(config, prepared)
    print_result({"dev accuracy": result["dev"].get("accuracy"), "steps": result["steps"]},
                 FLAGS.output_dir)
    if FLAGS.export_dir:
        path = result["task"].export(FLAGS.export_dir, FLAGS.model_name,
                                     extra_config={"dev": result["dev"]},
                                     litert=export_litert_option(FLAGS))
        print(f"exported to {path}")


if __name__ == "__main__":
    app.run(main)
