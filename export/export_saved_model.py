"""Export a saved task (a fine-tuning `--output_dir` or a `.keras` file) as a versioned SavedModel.

What the model is (task type, pairing, labels, vocabulary, casing, sequence length) comes from the
task itself (`keras_bert.load_task`); the layout and signatures are `keras_bert.saved_model`'s
(`Task.export`). Flags may override two stored values, each checked against the task:
`max_seq_length` (within the encoder's position table and the pairing's minimum) and
`label_names` (display names, exactly one per class). Flags that restate what the task is
(`do_lower_case`, `is_pair`, `task_type`) must agree with it.
"""

from __future__ import annotations

import dataclasses

from keras_bert.config import check_max_seq_length
from keras_bert.tasks.loading import load_task
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert.training import args, argument_set


# The settings `python -m export` shares with the fine-tuning recipes' --export_dir: the
# catalogue's fields (one name, help text and choices each); its older spellings still work.
ExportArgs = argument_set.fields_of(
    "ExportArgs",
    args.TrainingArgs,
    {
        "export_dir": {"required": True, "deprecated_name": "export_base"},
        "export_dtype": {"deprecated_name": "dtype"},
        "export_tflite": {"deprecated_name": "tflite"},
        "export_quantize": {"deprecated_name": "quantize"},
    },
)


@dataclasses.dataclass
class Overrides:
    """Optional flag values; None means "as stored in the task"."""

    max_seq_length: int | None = None
    label_names: list | None = None
    do_lower_case: bool | None = None
    is_pair: bool | None = None
    task_type: str | None = None
    null_score_diff_threshold: float | None = None


def check_stated(task, overrides: Overrides) -> None:
    """Flags that restate what the task is must agree with it.

    Raises:
        ValueError: e.g. "--is_pair=False but the task stored in the model is a pair task
            (is_pair=True); drop the flag".
    """
    stated = {
        "do_lower_case": task.preprocessor.do_lower_case,
        "is_pair": task.is_pair,
        "task_type": task.task_type,
    }
    for name, stored in stated.items():
        given = getattr(overrides, name)
        if given is not None and given != stored:
            raise ValueError(
                f"--{name}={given} but the task stored in the model has "
                f"{name}={stored}; drop the flag (the task knows what it is)"
            )


def apply_overrides(task, overrides: Overrides):
    """The task with `max_seq_length` / `label_names` / the v2.0 null threshold replaced
    (checked); the task itself if none.

    Raises:
        ValueError: a max_seq_length the encoder or pairing cannot take, a label count other
            than the task's number of classes, or a null threshold that is NaN or given for a
            task other than SQuAD v2.0.
    """
    check_stated(task, overrides)
    if overrides.null_score_diff_threshold is not None:
        if not getattr(task, "version_2_with_negative", False):
            raise ValueError(
                "--null_score_diff_threshold applies to a SQuAD v2.0 task (span question "
                f"answering with version_2_with_negative); this task is {task.task_type}"
            )
        threshold = float(overrides.null_score_diff_threshold)
        if threshold != threshold:
            raise ValueError(
                "--null_score_diff_threshold must be a number, not NaN (no score difference "
                'would exceed it: the model would never answer "no answer")'
            )
        task.null_score_diff_threshold = threshold
    if overrides.label_names is not None:
        names = [str(x) for x in overrides.label_names]
        stored = task.label_names or []
        if len(names) != len(stored):
            raise ValueError(
                f"got {len(names)} label names {names} but the task has "
                f"{len(stored)} classes {stored}; give exactly one name per class, "
                "in id order (--label_names)"
            )
        task.label_names = names
    if (
        overrides.max_seq_length is not None
        and overrides.max_seq_length != task.preprocessor.max_seq_length
    ):
        check_max_seq_length(
            overrides.max_seq_length,
            task.encoder.bert_config.max_sequence_length,
            is_pair=task.is_pair,
        )
        p = task.preprocessor
        task.preprocessor = BertPreprocessor(
            vocabulary=p.vocabulary,
            do_lower_case=p.do_lower_case,
            max_seq_length=overrides.max_seq_length,
            tokenizer=p.tokenizer,
        )
    return task


def export_saved_task(
    model_dir,
    export_base,
    model_name,
    version=None,
    tokenizer="core",
    dtype=None,
    overrides: Overrides | None = None,
    litert: str | None = None,
) -> str:
    """Loads the task in `model_dir` and exports it; returns the version directory (a str; both
    paths may be any URI `keras_bert.fileio` handles).

    Raises:
        FileNotFoundError: no task in model_dir; TypeError: not a keras_bert task; ValueError:
            an override that does not fit (see `apply_overrides`) or a bad export argument.
    """
    task = apply_overrides(load_task(model_dir), overrides or Overrides())
    return task.export(
        export_base, model_name, version=version, dtype=dtype, tokenizer=tokenizer, litert=litert
    )
