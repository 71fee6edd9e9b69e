"""Distil a fine-tuned classifier into a smaller student (Hinton et al. 2015; DistilBERT).

    python recipes/distill.py --teacher=runs/sst2 --task_name=sst2 \
        --data_dir=$KERAS_BERT_DATA_DIR/glue --student_layers=3 --temperature=2 --alpha=0.5 \
        --learning_rate=1e-4 --num_train_epochs=3 --output_dir=runs/sst2_student \
        [--export_dir=models --model_name=sst2_student]

--teacher: a fine-tuning --output_dir (best_model.keras) or a saved task. The student takes the
teacher's layers 0, k, 2k, ... (--student_layers, or --layer_map=0,2,4) and its embeddings, pooler
and head, or starts from --student_preset. Writes config.json, metrics.json (per epoch: dev
accuracy, agreement with the teacher, loss) and best_model.keras to --output_dir (a rerun into an
--output_dir holding a run with other settings is refused; there is no resume); --export_dir
exports the student like any fine-tuned model (`task.export`). The library does the work:
keras_bert.training.distillation.distill. See docs/evaluation.md.
"""
import dataclasses
import json
import pathlib
import sys

from absl import app, flags

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from keras_bert.training import distillation  # noqa: E402
from keras_bert.cli import define_export_litert_flags, export_litert_option, fail_usage  # noqa: E402

D = {f.name: f.default for f in dataclasses.fields(distillation.DistillationConfig)}
F = flags
F.DEFINE_string("teacher", None, "Fine-tuned teacher: output_dir or .keras task file.")
F.DEFINE_string("task_name", None, "GLUE task (sst2, ...) of the training data; or use --train_file.")
F.DEFINE_string("data_dir", None, "Local GLUE directory (else $KERAS_BERT_DATA_DIR).")
F.DEFINE_string("train_file", None, "Own training data: CSV / TSV / JSONL.")
F.DEFINE_string("dev_file", None, "Own dev data: CSV / TSV / JSONL.")
F.DEFINE_string("text_column", D["text_column"], "Own data: text column.")
F.DEFINE_string("text_b_column", None, "Own data: second text column (pair tasks).")
F.DEFINE_string("label_column", D["label_column"], "Own data: label column (teacher's names or ids).")
F.DEFINE_integer("student_layers", None, "Student layers taken from the teacher (default: half).")
F.DEFINE_list("layer_map", None, "Teacher layer index per student layer, e.g. 0,2,4.")
F.DEFINE_string("student_preset", None, "Start the student from this pretrained preset instead.")
F.DEFINE_float("temperature", D["temperature"], "Softmax temperature T of the soft targets.")
F.DEFINE_float("alpha", D["alpha"], "Weight of the soft (T^2-scaled KL) loss; 1 - alpha: hard loss.")
F.DEFINE_float("learning_rate", D["learning_rate"], "Peak learning rate (AdamW, linear warmup/decay).")
F.DEFINE_integer("num_train_epochs", D["num_train_epochs"], "Passes over the training data.")
F.DEFINE_integer("train_batch_size", D["train_batch_size"], "Training batch size.")
F.DEFINE_integer("eval_batch_size", D["eval_batch_size"], "Batch size for teacher / dev predictions.")
F.DEFINE_float("warmup_proportion", D["warmup_proportion"], "Fraction of steps of linear warmup.")
F.DEFINE_float("weight_decay", D["weight_decay"], "AdamW decoupled weight decay.")
F.DEFINE_integer("max_train_examples", None, "Use only the first N training examples.")
F.DEFINE_integer("max_eval_examples", None, "Use only the first N dev examples.")
F.DEFINE_integer("seed", D["seed"], "Random seed.")
F.DEFINE_string("output_dir", None, "Output directory.")
F.DEFINE_string("export_dir", None, "Export the student as a SavedModel under this base directory.")
F.DEFINE_string("model_name", None, "Model name for --export_dir (default: the output_dir's name).")
define_export_litert_flags()
F.mark_flags_as_required(["teacher", "output_dir"])
FLAGS = F.FLAGS


def main(argv):
    del argv
    names = [f.name for f in dataclasses.fields(distillation.DistillationConfig)]
    values = {n: FLAGS[n].value for n in names}
    values["layer_map"] = None if not FLAGS.layer_map else tuple(int(i) for i in FLAGS.layer_map)
    try:
        config = distillation.DistillationConfig(**values)
        if not pathlib.Path(config.teacher).exists():
            raise ValueError(f"--teacher {config.teacher}: no such file or directory")
        result = distillation.distill(config)
    except (ValueError, FileNotFoundError) as e:  # bad settings or data: no traceback
        fail_usage(str(e))
    student = result.pop("student_model")
    print(json.dumps(result, indent=2))
    if FLAGS.export_dir:
        name = FLAGS.model_name or pathlib.Path(FLAGS.output_dir).name
        print(f"exported to {student.export(FLAGS.export_dir, name, litert=export_litert_option(FLAGS))}")


if __name__ == "__main__":
    app.run(main)
