"""Classification family: GLUE and your own (pair) classification / regression data (BERT §4.1).

Reads train and dev examples (GLUE `.tsv`, or CSV / TSV / JSONL own data through
`keras_bert.data.text_files`), labels them by one rule (`keras_bert.data.labels`), encodes every
split once with the task's in-graph preprocessor (as google-research/bert writes TFRecords once),
and builds a `TextClassifier`. Dev metrics are the GLUE metrics of the task
(`keras_bert.metrics.classification`); MNLI evaluates both dev splits and monitors the matched one.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf
from scipy.special import logsumexp

from keras_bert.config import check_max_seq_length
from keras_bert.data import classification_pipeline, glue, text_files
from keras_bert.data.labels import label_ids
from keras_bert.metrics import classification as metrics_lib
from keras_bert.tasks.text_classifier import TextClassifier
from keras_bert.training import model_setup
from keras_bert.training.args import FinetuneArgs, default_learning_rate
from keras_bert.training.argument_set import args_dataclass, arg
from keras_bert.training.family import Family


@args_dataclass
class ClassifierArgs(FinetuneArgs):
    """`FinetuneArgs` plus the data of a classification run."""

    FLAG_TABLE = "classification"

    task_name: str = arg(
        help="GLUE task (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli) or "
        "text_classification / text_pair_classification / text_regression.",
        required=True,
    )
    data_dir: str | None = arg(
        None,
        "Local GLUE directory (else $KERAS_BERT_DATA_DIR, else tensorflow-datasets).",
        path=True,
    )
    train_file: str | None = arg(None, "Own data: training CSV / TSV / JSONL.", path=True)
    dev_file: str | None = arg(None, "Own data: dev CSV / TSV / JSONL.", path=True)
    text_column: str = arg("text", "Own data: text column.")
    text_b_column: str | None = arg(None, "Own data: second text column (pair tasks).")
    label_column: str = arg("label", "Own data: label column.")
    classifier_pooling: str = arg(
        "cls",
        "cls: pooled [CLS] output (BERT); mean: masked mean of sequence_output.",
        choices=("cls", "mean"),
    )


@dataclasses.dataclass
class TaskData:
    """The examples and label space of a run."""

    metric_task: str  # key for keras_bert.metrics.classification
    train: list
    dev: dict  # dev split name -> examples
    file_labels: list | None  # labels as the data files write them, in id order; None: regression
    is_regression: bool
    is_pair: bool
    label_names: list | None = None  # display names in id order (GLUE SST-2: negative/positive)
    encoded: dict | None = None  # split name -> EncodedExamples (`encode_splits`)

    def __post_init__(self):
        if self.label_names is None:
            self.label_names = self.file_labels


def read_own_files(args) -> tuple[list, list, list | None, bool]:
    """(train, dev, file labels or None, is_regression) of own CSV / TSV / JSONL files; dev labels
    mapped to the training label strings (`keras_bert.data.labels` rule)."""
    name = args.task_name.lower()
    if not args.train_file or not args.dev_file:
        raise ValueError(f"--task_name={name} needs --train_file and --dev_file")
    if name == "text_pair_classification" and not args.text_b_column:
        raise ValueError("--task_name=text_pair_classification needs --text_b_column")
    regression = name == "text_regression"
    kw = dict(
        text_column=args.text_column,
        text_b_column=args.text_b_column,
        label_column=args.label_column,
        regression=regression,
    )
    train = text_files.read_text_file(args.train_file, **kw)
    dev = text_files.read_text_file(args.dev_file, **kw)
    labels = None
    if not regression:
        labels = text_files.file_labels_from_examples(train, source=str(args.train_file))
        dev_ids = label_ids([e.label for e in dev], labels, source=str(args.dev_file))
        dev = [dataclasses.replace(e, label=labels[i]) for e, i in zip(dev, dev_ids)]
    return train, dev, labels, regression


def load_task_data(args) -> TaskData:
    """Read train and dev examples for a GLUE task or own files (see module docstring).

    Raises:
        ValueError: unknown task, missing --train_file/--dev_file, a missing column, an empty file,
            or labels that break `keras_bert.data.labels`' rule (training labels all names or all
            ids; dev labels the training names or their ids 0..C-1, not a mix), naming the row.
    """
    name = args.task_name.lower()
    if name in text_files.TASK_TYPES:
        train, dev, labels, regression = read_own_files(args)
        data = TaskData(
            name,
            train,
            {"dev": dev},
            labels,
            regression,
            is_pair=name == "text_pair_classification" or bool(args.text_b_column),
        )
    else:
        try:
            task = glue.get_task(name)
        except ValueError as e:
            raise ValueError(
                f"{e}; for your own files: {', '.join(text_files.TASK_TYPES)} "
                "(with --train_file / --dev_file)"
            ) from None
        train = glue.read_glue(task.name, "train", args.data_dir)
        dev = {split: glue.read_glue(task.name, split, args.data_dir) for split in task.dev_splits}
        data = TaskData(
            task.name,
            train,
            dev,
            None if task.is_regression else list(task.labels),
            task.is_regression,
            task.is_pair,
            None if task.is_regression else list(task.label_names),
        )
    if args.max_train_examples:
        data.train = data.train[: args.max_train_examples]
    if args.max_eval_examples:
        data.dev = {k: v[: args.max_eval_examples] for k, v in data.dev.items()}
    return data


def dev_prefix(split: str) -> str:
    return "" if split == "dev" else split.replace("dev_", "") + "_"  # MNLI: matched_, mismatched_


def monitor_name(data: TaskData) -> str:
    """The metric that picks the best checkpoint, e.g. "accuracy", "matched_accuracy", "pearson"."""
    return dev_prefix(next(iter(data.dev))) + metrics_lib.primary_metric(data.metric_task)


def encode_splits(data: TaskData, preprocessor, batch_size: int = 64) -> dict:
    """Split name ("train", "dev", ...) -> `EncodedExamples`, from one tokenization pass (one trace
    of the in-graph tokenizer) over all splits."""
    splits = {"train": data.train, **data.dev}
    everything = classification_pipeline.encode_examples(
        [e for v in splits.values() for e in v],
        preprocessor,
        data.file_labels,
        data.is_regression,
        batch_size=batch_size,
    )
    encoded, start = {}, 0
    for name, examples in splits.items():
        encoded[name] = classification_pipeline.EncodedExamples(
            {f: a[start : start + len(examples)] for f, a in everything.features.items()},
            everything.labels[start : start + len(examples)],
        )
        start += len(examples)
    return encoded


def inference_step(model):
    """tf.function: features -> model(features, training=False), traced for relaxed shapes.

    Dev batches are cut to their longest row (dynamic padding), so their widths vary; without
    `reduce_retracing` every new width would trace the model again (seconds each).
    """
    return tf.function(lambda features: model(features, training=False), reduce_retracing=True)


def predict(model, dataset, step=None) -> np.ndarray:
    """Model outputs (float32 [N, C]) on a dataset of features or (features, labels)."""
    step = step or inference_step(model)
    outs = []
    for batch in dataset:
        features = batch[0] if isinstance(batch, tuple) else batch
        outs.append(np.asarray(step(features), np.float32))
    return np.concatenate(outs, axis=0)


def dev_loss(outputs: np.ndarray, labels: np.ndarray, is_regression: bool) -> float:
    """The training loss on dev: mean squared error (regression), else mean softmax
    cross-entropy of the logits [N, C] and the label ids [N]."""
    if is_regression:
        return float(np.mean((outputs[:, 0] - labels) ** 2))
    picked = np.take_along_axis(outputs, labels[:, None].astype(np.int64), axis=1)[:, 0]
    return float(np.mean(logsumexp(outputs, axis=1) - picked))


class Classification(Family):
    name = "classification"
    Args = ClassifierArgs

    def read(self, args, preprocessor) -> TaskData:
        data = load_task_data(args)
        data.encoded = encode_splits(data, preprocessor, batch_size=max(args.eval_batch_size, 64))
        return data

    def build_task(self, args, data, preprocessor) -> TextClassifier:
        encoder = model_setup.build_encoder(args, len(preprocessor.vocabulary))
        check_max_seq_length(
            args.max_seq_length, encoder.bert_config.max_sequence_length, is_pair=data.is_pair
        )
        num_classes = 1 if data.is_regression else len(data.file_labels)
        return TextClassifier(
            encoder,
            num_classes,
            dropout_rate=args.dropout_rate,
            label_names=data.label_names,
            task_name=data.metric_task,
            pooling=args.classifier_pooling,
            preprocessor=preprocessor,
            is_pair=data.is_pair,
        )

    def default_learning_rate(self, task) -> float:
        return default_learning_rate(task.encoder.bert_config.hidden_size)

    def train_arrays(self, task, data):
        return data.encoded["train"].features, data.encoded["train"].labels

    def monitor_of(self, data) -> str:
        return monitor_name(data)

    def evaluator(self, args, data):
        """Dev metrics {name: float} over every dev split (MNLI: both), with the dev loss of the
        first split as "loss"."""
        pad = args.pad_to_multiple_of or None
        dev_sets = {
            split: classification_pipeline.make_classification_dataset(
                data.encoded[split],
                None,
                batch_size=args.eval_batch_size,
                with_labels=False,
                pad_to_multiple_of=pad,
            )
            for split in data.dev
        }
        positive = (
            data.file_labels.index("1") if data.file_labels and "1" in data.file_labels else 1
        )
        step = []

        def evaluate(model):
            if not step:
                step.append(inference_step(model))
            out = {}
            for split, ds in dev_sets.items():
                outputs = predict(model, ds, step[0])
                labels = data.encoded[split].labels
                preds = outputs[:, 0] if data.is_regression else outputs.argmax(-1)
                scores = metrics_lib.compute_metrics(data.metric_task, labels, preds, positive)
                scores["loss"] = dev_loss(outputs, labels, data.is_regression)
                out.update({dev_prefix(split) + k: v for k, v in scores.items()})
            out["loss"] = out[dev_prefix(next(iter(dev_sets))) + "loss"]  # the monitored split's
            return out

        return evaluate

    def finish(self, args, data, task, out) -> dict:
        return {
            "task_name": data.metric_task,
            "dev_examples": {split: len(v) for split, v in data.dev.items()},
        }

    def model_name_of(self, summary: dict) -> str:
        return summary["task_name"]

    def headline(self, summary: dict) -> dict:
        headline = super().headline(summary)
        if len(summary["runs"]) > 1:
            headline |= {
                f"mean over {len(summary['runs'])} runs": summary["mean"],
                "std": summary["std"],
            }
        return headline


FAMILY = Classification()
