"""`load_task`: a saved task model back, from a `.keras` file or a fine-tuning output_dir."""

from __future__ import annotations

import logging
import os

from keras_bert import fileio
from keras_bert.checkpoints import keras_format
from keras_bert.tasks.task import Task
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor

logger = logging.getLogger(__name__)

BEST_MODEL = "best_model.keras"


def find_task_file(path) -> str:
    """The `.keras` file of `path`: the file itself, or a directory's `best_model.keras` (else its
    only `.keras` file).

    Raises:
        FileNotFoundError: no such file or directory, or a directory with no or several candidates.
    """
    path = os.fspath(path)
    if path.endswith(".keras") and fileio.isfile(path):
        return path
    if fileio.isdir(path):
        if fileio.isfile(fileio.join(path, BEST_MODEL)):
            return fileio.join(path, BEST_MODEL)
        candidates = [p for p in fileio.glob(fileio.join(path, "*.keras")) if fileio.isfile(p)]
        if len(candidates) == 1:
            return candidates[0]
        raise FileNotFoundError(
            f"{path} holds {len(candidates)} .keras files (want {BEST_MODEL} "
            "or exactly one); pass the file itself"
        )
    raise FileNotFoundError(f"{path}: not a .keras file or a directory holding one")


def _attach_legacy_preprocessor(task: Task, run_dir: str) -> None:
    """Runs written before the Task API kept the preprocessor settings in config.json and the
    pair flag in labels.json; rebuild the preprocessor from them (the vocab file must exist)."""
    config_path = fileio.join(run_dir, "config.json")
    labels_path = fileio.join(run_dir, "labels.json")
    if not fileio.isfile(config_path):
        return
    config = fileio.read_json(config_path)
    labels = fileio.read_json(labels_path) if fileio.isfile(labels_path) else {}
    if not config.get("vocab_file") or not fileio.isfile(config["vocab_file"]):
        return
    task.is_pair = bool(labels.get("is_pair", False))
    task.preprocessor = BertPreprocessor(
        config["vocab_file"],
        do_lower_case=bool(config.get("do_lower_case", True)),
        max_seq_length=int(config.get("max_seq_length", 128)),
    )
    logger.info("attached the preprocessor of %s (a run saved before the Task API)", config_path)


def load_task(path, compile: bool = False) -> Task:
    """Loads a saved task (`keras_bert.tasks.Task`) with its preprocessor and metadata.

    Args:
        path: a `.keras` file written by `task.save(...)`, or a fine-tuning `--output_dir` (its
            `best_model.keras`).
        compile: bool, passed to `keras.saving.load_model` (weights read through disk:
            `keras_format.weights_through_disk`).

    Returns:
        The task (e.g. a `TextClassifier`), ready for `predict` on raw strings and `export`.

    Raises:
        FileNotFoundError: see `find_task_file`.
        TypeError: the file holds a Keras model that is not a keras_bert task.
    """
    keras_file = find_task_file(path)
    model = keras_format.load_keras_model(keras_file, compile=compile)
    if not isinstance(model, Task):
        raise TypeError(
            f"{keras_file} holds a {type(model).__name__}, not a keras_bert task "
            "(keras_bert.tasks.Task)"
        )
    if model.preprocessor is None:
        _attach_legacy_preprocessor(model, fileio.parent(keras_file))
    return model
