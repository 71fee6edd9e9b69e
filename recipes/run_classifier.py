"""Fine-tune BERT on a GLUE task or your own (pair) classification / regression data.

    python recipes/run_classifier.py --task_name=sst2 --data_dir=$KERAS_BERT_DATA_DIR/glue \
        --init_checkpoint=minilm_l6_h384_uncased --max_seq_length=64 --train_batch_size=32 \
        --learning_rate=5e-5 --num_train_epochs=1 --output_dir=runs/sst2 [--export_dir=models]

Writes config.json, metrics.json (dev metrics per epoch, the best, and across
--num_restarts), checkpoints/, logs/ (TensorBoard) and best_model.keras (the task, with its
preprocessor and labels: `keras_bert.load_task(output_dir)`) to --output_dir. The library does the work: keras_bert.training.finetune.run_finetuning. See docs/finetuning.md.
"""
import dataclasses
import pathlib
import sys

from absl import app, flags

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from keras_bert.saved_model import exporter  # noqa: E402
from keras_bert.training import finetune  # noqa: E402
from keras_bert.cli import (define_export_litert_flags, define_group_by_length_flag,  # noqa: E402
                            export_litert_option, fail_usage, print_result)

D = finetune.FinetuneConfig.__dataclass_fields__
F = flags
F.DEFINE_string("task_name", None, "GLUE task (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli) or "
                "text_classification / text_pair_classification / text_regression.")
F.DEFINE_string("data_dir", None, "Local GLUE directory (else $KERAS_BERT_DATA_DIR, else tensorflow-datasets).")
F.DEFINE_string("train_file", None, "Own data: training CSV / TSV / JSONL.")
F.DEFINE_string("dev_file", None, "Own data: dev CSV / TSV / JSONL.")
F.DEFINE_string("text_column", "text", "Own data: text column.")
F.DEFINE_string("text_b_column", None, "Own data: second text column (pair tasks).")
F.DEFINE_string("label_column", "label", "Own data: label column.")
F.DEFINE_string("init_checkpoint", None, "Preset name (minilm_l6_h384_uncased) or checkpoint path.")
F.DEFINE_string("bert_config_file", None, "BERT config JSON for a randomly initialised encoder.")
F.DEFINE_string("preset", None, "Preset config (bert_tiny, ...) for a randomly initialised encoder.")
F.DEFINE_string("vocab_file", None, "WordPiece vocab (default: the checkpoint's).")
F.DEFINE_boolean("do_lower_case", None, "Lower-case input (default: the checkpoint's, else True).")
F.DEFINE_integer("max_seq_length", D["max_seq_length"].default, "Tokens per example incl. [CLS]/[SEP].")
F.DEFINE_integer("pad_to_multiple_of", D["pad_to_multiple_of"].default,
                 "Dynamic padding: cut each batch to its longest row rounded up to a multiple of this "
                 "many tokens (0: pad every batch to --max_seq_length).")
define_group_by_length_flag(D["group_by_length"].default)
F.DEFINE_integer("train_batch_size", D["train_batch_size"].default, "Global training batch size.")
F.DEFINE_integer("eval_batch_size", D["eval_batch_size"].default, "Evaluation batch size.")
F.DEFINE_float("learning_rate", None, "Peak learning rate (default: 1e-4 for encoders with "
               "hidden_size <= 512, 3e-5 above; see docs/finetuning.md, small data).")
F.DEFINE_float("num_train_epochs", D["num_train_epochs"].default, "Epochs (may be fractional).")
F.DEFINE_integer("min_train_steps", D["min_train_steps"].default, "Train more epochs when "
                 "--num_train_epochs gives fewer optimizer steps than this (small data sets); 0: off.")
F.DEFINE_float("warmup_proportion", D["warmup_proportion"].default, "Fraction of steps of linear warmup.")
F.DEFINE_float("weight_decay", D["weight_decay"].default, "AdamW/LAMB decoupled weight decay.")
F.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
F.DEFINE_integer("gradient_accumulation_steps", 1, "Batches per optimizer update.")
F.DEFINE_float("max_grad_norm", D["max_grad_norm"].default, "Global-norm gradient clipping (0: off).")
F.DEFINE_float("ema_momentum", D["ema_momentum"].default,
               "Largest decay of a moving average of the weights that is evaluated and kept "
               "instead of the last weights (e.g. 0.999; 0: off); see docs/finetuning.md.")
F.DEFINE_float("layerwise_lr_decay", D["layerwise_lr_decay"].default,
               "Layer-wise learning-rate decay d in (0, 1]: the task head trains at "
               "--learning_rate, each Transformer block at d times the block above it, the "
               "embeddings lowest (ELECTRA's 0.8; 1: one rate for all); see docs/finetuning.md.")
F.DEFINE_float("classifier_dropout", D["classifier_dropout"].default, "Dropout on pooled_output.")
F.DEFINE_enum("classifier_pooling", "cls", ["cls", "mean"],
              "cls: pooled [CLS] output (BERT); mean: masked mean of sequence_output.")
F.DEFINE_enum("strategy", "default", ["default", "mirrored", "multi_worker_mirrored", "tpu"], "Distribution.")
F.DEFINE_string("tpu", None, "TPU name or address for --strategy=tpu.")
F.DEFINE_enum("mixed_precision", "float32", ["float32", "mixed_float16", "mixed_bfloat16"], "Precision.")
F.DEFINE_boolean("jit_compile", False, "XLA-compile the train step.")
F.DEFINE_integer("num_restarts", 1, "Runs with seeds seed..seed+N-1; keeps the best.")
F.DEFINE_integer("max_train_examples", None, "Use only the first N training examples.")
F.DEFINE_integer("max_eval_examples", None, "Use only the first N dev examples.")
F.DEFINE_integer("seed", D["seed"].default, "Random seed.")
F.DEFINE_integer("save_checkpoints_steps", D["save_checkpoints_steps"].default, "Batches between checkpoints.")
F.DEFINE_integer("early_stopping_patience", None, "Stop after N epochs without dev improvement.")
F.DEFINE_integer("evaluations_per_epoch", D["evaluations_per_epoch"].default,
                 "Dev evaluations per epoch (the best one is kept); 1: at epoch ends only.")
F.DEFINE_string("output_dir", None, "Output directory (a rerun with the same flags resumes).")
F.DEFINE_string("export_dir", None, "Export the best model as a SavedModel under this base dir.")
F.DEFINE_string("model_name", None, "Model name for --export_dir (default: the task name).")
F.DEFINE_enum("export_dtype", None, ["float32", "bfloat16"],
              "Dtype policy of the --export_dir SavedModel (default: as trained); see docs/export.md.")
define_export_litert_flags()
F.DEFINE_integer("verbose", 1, "Keras fit verbosity: 0 silent, 1 progress bar, 2 one line per epoch.")
F.mark_flags_as_required(["task_name", "output_dir"])
FLAGS = F.FLAGS


def export_once(task, result):
    """Exports the best task unless a version with the same weights is already there (a rerun of
    a finished or killed run must not publish a second copy)."""
    name = FLAGS.model_name or result["task_name"]
    litert = export_litert_option(FLAGS)
    existing = exporter.find_export(FLAGS.export_dir, name, exporter.weights_fingerprint(task),
                                    litert=litert)
    if existing is not None and FLAGS.export_dtype is None:
        print(f"already exported to {existing}")
        return existing
    path = task.export(FLAGS.export_dir, name, dtype=FLAGS.export_dtype, litert=litert,
                       extra_config={"dev_metrics": result["best"], "monitor": result["monitor"]})
    print(f"exported to {path}")
    return path


def main(argv):
    del argv
    names = {f.name for f in dataclasses.fields(finetune.FinetuneConfig)}
    try:
        config = finetune.FinetuneConfig(**{n: FLAGS[n].value for n in names if n in FLAGS})
        prepared = finetune.prepare_run(config)
    except (ValueError, FileNotFoundError) as e:  # bad flags or data: one line, exit code 2
        fail_usage(str(e))
    result = finetune.run_finetuning(config, prepared)
    monitor, best = result["monitor"], result["best"]
    headline = {f"dev {monitor}": best.get(monitor), "at epoch": best.get("epoch")}
    if len(result["runs"]) > 1:
        headline |= {f"mean over {len(result['runs'])} runs": result["mean"], "std": result["std"]}
    print_result(headline, FLAGS.output_dir)
    if FLAGS.export_dir:
        export_once(result["task"], result)


if __name__ == "__main__":
    app.run(main)
