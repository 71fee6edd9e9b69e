"""The examples of a fine-tuning run: GLUE or the user's own files, read, labelled and encoded.

`load_task_data(config)` reads train and dev examples (GLUE `.tsv` or CSV / TSV / JSONL own data,
`keras_bert.data.text_files`); `encode_splits` runs the task's in-graph preprocessor once over every
split (as google-research/bert writes TFRecords once) and keeps the packed ids.
"""
from __future__ import annotations

import dataclasses

from keras_bert.data import classification_pipeline, glue, text_files
from keras_bert.data.labels import label_ids
from keras_bert.evaluation import metrics as metrics_lib
from keras_bert.training.finetune_config import FinetuneConfig


@dataclasses.dataclass
class TaskData:
    """The examples and label space of a run."""

    metric_task: str                # key for keras_bert.evaluation.metrics
    train: list
    dev: dict                       # dev split name -> examples
    label_list: list | None         # label strings in id order as in the data; None for regression
    is_regression: bool
    is_pair: bool
    label_names: list | None = None  # display names in id order (GLUE SST-2: negative/positive)

    def __post_init__(self):
        if self.label_names is None:
            self.label_names = self.label_list


def load_task_data(config: FinetuneConfig) -> TaskData:
    """Read train and dev examples for a GLUE task or own files (see module docstring).

    Raises:
        ValueError: unknown task, missing --train_file/--dev_file, a missing column, an empty file,
            or labels that break `keras_bert.data.labels`' rule (training labels all names or all
            ids; dev labels the training names or their ids 0..C-1, not a mix), naming the row.
    """
    name = config.task_name.lower()
    if name in text_files.TASK_TYPES:
        if not config.train_file or not config.dev_file:
            raise ValueError(f"--task_name={name} needs --train_file and --dev_file")
        regression = name == "text_regression"
        if name == "text_pair_classification" and not config.text_b_column:
            raise ValueError("--task_name=text_pair_classification needs --text_b_column")
        kw = dict(text_column=config.text_column, text_b_column=config.text_b_column,
                  label_column=config.label_column, regression=regression)
        train = text_files.read_text_file(config.train_file, **kw)
        dev = text_files.read_text_file(config.dev_file, **kw)
        labels = None
        if not regression:
            labels = text_files.label_list_from_examples(train, source=str(config.train_file))
            dev_ids = label_ids([e.label for e in dev], labels, source=str(config.dev_file))
            dev = [dataclasses.replace(e, label=labels[i]) for e, i in zip(dev, dev_ids)]
        data = TaskData(name, train, {"dev": dev}, labels, regression,
                        is_pair=name == "text_pair_classification" or bool(config.text_b_column))
    else:
        try:
            task = glue.get_task(name)
        except ValueError as e:
            raise ValueError(f"{e}; for your own files: {', '.join(text_files.TASK_TYPES)} "
                             "(with --train_file / --dev_file)") from None
        train = glue.read_glue(task.name, "train", config.data_dir)
        dev = {split: glue.read_glue(task.name, split, config.data_dir) for split in task.dev_splits}
        data = TaskData(task.name, train, dev, None if task.is_regression else list(task.labels),
                        task.is_regression, task.is_pair,
                        None if task.is_regression else list(task.label_names))
    if config.max_train_examples:
        data.train = data.train[: config.max_train_examples]
    if config.max_eval_examples:
        data.dev = {k: v[: config.max_eval_examples] for k, v in data.dev.items()}
    return data


def dev_prefix(split: str) -> str:
    return "" if split == "dev" else split.replace("dev_", "") + "_"   # MNLI: matched_, mismatched_


def monitor_name(data: TaskData) -> str:
    """The metric that picks the best checkpoint, e.g. "accuracy", "matched_accuracy", "pearson"."""
    return dev_prefix(next(iter(data.dev))) + metrics_lib.primary_metric(data.metric_task)


def encode_splits(data: TaskData, preprocessor, batch_size: int = 64) -> dict:
    """Split name ("train", "dev", ...) -> `EncodedExamples`, from one tokenization pass (one trace
    of the in-graph tokenizer) over all splits."""
    splits = {"train": data.train, **data.dev}
    everything = classification_pipeline.encode_examples(
        [e for v in splits.values() for e in v], preprocessor, data.label_list, data.is_regression,
        batch_size=batch_size)
    encoded, start = {}, 0
    for name, examples in splits.items():
        encoded[name] = classification_pipeline.EncodedExamples(
            {f: a[start:start + len(examples)] for f, a in everything.features.items()},
            everything.labels[start:start + len(examples)])
        start += len(examples)
    return encoded
