"""Distillation family: a smaller student of a fine-tuned classifier (Hinton et al. 2015;
DistilBERT), trained by the same driver as every fine-tuning family, so it resumes after a kill,
takes mixed precision, restarts, early stopping and the time budget.

The teacher (`--teacher`: a fine-tuning output_dir or a saved task) is fixed: its logits on every
training and dev example are computed once and travel with the gold labels
(`student.DistillationLoss`). The student takes the teacher's layers 0, k, 2k, ...
(`--student_layers`, or `--layer_map=0,2,4`) with its embeddings, pooler and head, or starts from
`--student_preset`. Dev accuracy picks the best evaluation; each evaluation also records the
agreement with the teacher on dev and on the first training examples.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from keras_bert import fileio
from keras_bert.data import glue, text_files
from keras_bert.data.labels import label_ids
from keras_bert.metrics import classification as metrics_lib
from keras_bert.tasks.loading import load_task
from keras_bert.tasks.text_classifier import TextClassifier
from keras_bert.training import student as lib
from keras_bert.training.args import TrainingArgs
from keras_bert.training.argument_set import AT_LEAST_ONE, POSITIVE, Rule, arg, args_dataclass
from keras_bert.training.family import Family, epochs_trained
from keras_bert.training.families.classification import dev_loss

AGREEMENT_EXAMPLES = 2000  # training examples whose teacher agreement is tracked per evaluation


@args_dataclass
class DistillArgs(TrainingArgs):
    """`TrainingArgs` plus the teacher, the data and the student (no model source: the student
    comes from the teacher, or from `student_preset`)."""

    FLAG_TABLE = "distillation"

    teacher: str = arg(
        help="Fine-tuned teacher: an output_dir or a .keras task file.", required=True
    )
    task_name: str | None = arg(
        None, "GLUE task (sst2, ...) of the training data; or use --train_file / --dev_file."
    )
    data_dir: str | None = arg(None, "Local GLUE directory (else $KERAS_BERT_DATA_DIR).", path=True)
    train_file: str | None = arg(None, "Own training data: CSV / TSV / JSONL.", path=True)
    dev_file: str | None = arg(None, "Own dev data: CSV / TSV / JSONL.", path=True)
    text_column: str = arg("text", "Own data: text column.")
    text_b_column: str | None = arg(None, "Own data: second text column (pair tasks).")
    label_column: str = arg("label", "Own data: label column (the teacher's names or ids).")
    student_layers: int | None = arg(
        None, "Student layers taken from the teacher (default: half).", rule=AT_LEAST_ONE
    )
    layer_map: tuple | None = arg(None, "Teacher layer index per student layer, e.g. 0,2,4.")
    student_preset: str | None = arg(None, "Start the student from this pretrained preset instead.")
    temperature: float = arg(2.0, "Softmax temperature T of the soft targets.", rule=POSITIVE)
    alpha: float = arg(
        0.5,
        "Weight of the soft (T^2-scaled KL) loss; 1 - alpha: the hard loss.",
        rule=Rule(lambda v: 0 <= v <= 1, "in [0, 1]"),
    )

    def validate(self) -> None:
        super().validate()
        if not self.task_name and not (self.train_file and self.dev_file):
            raise ValueError("give --task_name (GLUE) or both --train_file and --dev_file")
        if self.student_preset and (self.student_layers or self.layer_map):
            raise ValueError("--student_preset excludes --student_layers / --layer_map")
        if not fileio.exists(self.teacher):
            raise ValueError(f"--teacher {self.teacher}: no such file or directory")


@dataclasses.dataclass
class DistillData:
    teacher: TextClassifier
    train: list
    dev: list
    gold: np.ndarray  # int64 [N] training label ids (the teacher's)
    dev_gold: np.ndarray
    teacher_train: np.ndarray  # float32 [N, C] teacher logits
    teacher_dev: np.ndarray


def load_examples(args: DistillArgs) -> tuple[list, list]:
    """(train, dev) InputExamples, cut to max_train_examples / max_eval_examples."""
    if args.task_name:
        task = glue.get_task(args.task_name)
        train = glue.read_glue(task.name, "train", args.data_dir)
        dev = glue.read_glue(task.name, task.dev_splits[0], args.data_dir)
    else:
        kw = dict(
            text_column=args.text_column,
            text_b_column=args.text_b_column,
            label_column=args.label_column,
        )
        train = text_files.read_text_file(args.train_file, **kw)
        dev = text_files.read_text_file(args.dev_file, **kw)
    return train[: args.max_train_examples], dev[: args.max_eval_examples]


def labelled_examples(args: DistillArgs, label_names) -> tuple[list, list, np.ndarray, np.ndarray]:
    """(train, dev, train gold ids int64 [N], dev gold ids) through the teacher's label names.

    Raises:
        LabelError (a ValueError): labels that break `keras_bert.data.labels`' rule, naming the
            file (own data) or the GLUE split and the data row.
    """
    train, dev = load_examples(args)
    sources = (
        (args.train_file, args.dev_file)
        if not args.task_name
        else (f"{args.task_name} train", f"{args.task_name} dev")
    )
    return (
        train,
        dev,
        label_ids([e.label for e in train], label_names, str(sources[0])),
        label_ids([e.label for e in dev], label_names, str(sources[1])),
    )


class Distillation(Family):
    name = "distillation"
    Args = DistillArgs
    monitor = "dev_accuracy"

    def source(self, args):
        return {}, None  # the student's vocabulary is the teacher's (or the preset's)

    def read(self, args, preprocessor) -> DistillData:
        teacher = load_task(args.teacher)
        if not isinstance(teacher, TextClassifier) or teacher.is_regression:
            raise ValueError(
                f"the teacher must be a classification TextClassifier, got "
                f"{type(teacher).__name__} ({getattr(teacher, 'task_type', '?')})"
            )
        train, dev, gold, dev_gold = labelled_examples(args, teacher.label_names)
        step = lib.logit_fn(teacher)
        return DistillData(
            teacher,
            train,
            dev,
            gold,
            dev_gold,
            lib.logits_of(teacher, train, args.eval_batch_size, step),
            lib.logits_of(teacher, dev, args.eval_batch_size, step),
        )

    def build_task(self, args, data, preprocessor) -> TextClassifier:
        rate = args.dropout_rate if "dropout_rate" in args.given() else None  # else the teacher's
        if args.student_preset:
            return lib.student_from_preset(data.teacher, args.student_preset, rate)
        return lib.student_from_teacher(data.teacher, args.student_layers, args.layer_map, rate)

    def train_arrays(self, task, data):
        targets = np.concatenate([data.gold[:, None].astype(np.float32), data.teacher_train], 1)
        return lib.encoded(task, data.train, 256), targets

    def loss(self, task, args):
        return lib.DistillationLoss(args.temperature, args.alpha)

    def evaluator(self, args, data):
        n = min(len(data.train), AGREEMENT_EXAMPLES)
        steps = {}

        def evaluate(student):
            step = steps.setdefault(id(student), lib.logit_fn(student))
            logits = lib.logits_of(student, data.dev, args.eval_batch_size, step)
            return {
                "dev_accuracy": metrics_lib.accuracy(data.dev_gold, logits.argmax(-1)),
                "dev_agreement": lib.agreement(logits, data.teacher_dev),
                "train_agreement": lib.agreement(
                    lib.logits_of(student, data.train[:n], args.eval_batch_size, step),
                    data.teacher_train[:n],
                ),
                "loss": dev_loss(logits, data.dev_gold, False),
            }

        return evaluate

    def finish(self, args, data, task, out) -> dict:
        teacher = data.teacher
        return {
            "teacher": {
                "path": str(args.teacher),
                "layers": teacher.encoder.bert_config.num_layers,
                "dev_accuracy": metrics_lib.accuracy(data.dev_gold, data.teacher_dev.argmax(-1)),
                "parameters": int(teacher.count_params()),
            },
            "student": {
                "layers": task.encoder.bert_config.num_layers,
                "parameters": int(task.count_params()),
            },
            "train_examples": len(data.train),
            "dev_examples": len(data.dev),
        }

    def headline(self, summary: dict) -> dict:
        best = summary["best"] or {}
        return {
            "student dev accuracy": best.get("dev_accuracy"),
            "teacher": summary["teacher"]["dev_accuracy"],
            "agreement": best.get("dev_agreement"),
            "after": epochs_trained(best.get("epoch")),
        }


FAMILY = Distillation()
