"""GLUE readers: the nine tasks in their distributed TSV formats, or tensorflow-datasets.

The column layouts follow google-research/bert `run_classifier.py` (its `*Processor` classes) and the
files written by the standard `download_glue_data.py`:

=======  ==================================  =============  ============================
task     columns (train/dev)                 header         labels
=======  ==================================  =============  ============================
cola     source, label, star, sentence       no (test: yes) "0", "1"
sst2     sentence, label                     yes            "0", "1"
mrpc     label, id1, id2, string1, string2   yes (BOM)      "0", "1"
stsb     10 cols; sentence1=7, sentence2=8   yes            float score in [0, 5]
qqp      id, qid1, qid2, q1, q2, is_dup      yes            "0", "1"
mnli     12 (train) / 16 (dev) cols; 8, 9    yes            contradiction/entailment/neutral
qnli     index, question, sentence, label    yes            entailment, not_entailment
rte      index, sentence1, sentence2, label  yes            entailment, not_entailment
wnli     index, sentence1, sentence2, label  yes            "0", "1"
=======  ==================================  =============  ============================

Quoting quirk: the GLUE files are *not* CSV-quoted. A field may start with an unbalanced `"` (MRPC
dev line 2 starts its second string with one), so each physical line is one row and `"` is an
ordinary character (google-research/bert reads with `quotechar=None`). A row whose column count
differs from the header's (QQP and MNLI train hold a few), or whose label is not in the task's
label set, is malformed: it is reported with file and line number and dropped (or raises, with
`on_error="raise"`); because rows are physical lines, it never shifts the rows after it.

Labels stay the strings of the files ("0"/"1") and define the class ids in that order; `label_names`
gives display names where GLUE / tensorflow-datasets define them (SST-2 negative/positive, CoLA
unacceptable/acceptable, MRPC not_equivalent/equivalent, QQP not_duplicate/duplicate), same order.

Test splits carry no labels: their examples have `label=None` and are never used as classes.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Iterable, Sequence

from keras_bert import fileio
from keras_bert.data.labels import regression_value

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One sentence (pair) example.

    Attributes:
        guid: str. "<split>-<n>" where n is the 1-based line number in the source file (or the
            row index for tensorflow-datasets), so it points back at the row.
        text_a: str. First segment.
        text_b: str or None. Second segment for pair tasks.
        label: str (classification, one of the task's labels), float (regression), or None for
            unlabelled test rows.
    """

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | float | None = None


@dataclasses.dataclass(frozen=True)
class _Columns:
    text_a: int
    text_b: int | None
    label: int | None  # negative = counted from the end
    header: bool
    num_columns: int | None = None  # None = as many as the header has


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """Static description of one GLUE task.

    Attributes:
        name: canonical lower-case name ("sst2", "mnli", ...).
        labels: tuple of label strings in id order; empty for regression (STS-B).
        is_regression: True for STS-B.
        dirnames: directory names the task's files are found under (ours, then GLUE's).
        splits: split name -> file stem, e.g. {"dev": "dev"} or {"dev_matched": ...}.
        dev_splits: the splits evaluated as "dev" (MNLI: matched and mismatched).
        tfds_name: the tensorflow-datasets config, e.g. "glue/sst2".
        names: display names in id order where they differ from `labels` (see `label_names`).
    """

    name: str
    labels: tuple[str, ...]
    is_regression: bool
    dirnames: tuple[str, ...]
    splits: dict
    dev_splits: tuple[str, ...]
    tfds_name: str
    labelled: _Columns
    unlabelled: _Columns
    tfds_text: tuple[str, str | None]
    tfds_splits: dict = dataclasses.field(default_factory=dict)
    names: tuple[str, ...] = ()

    @property
    def label_names(self) -> tuple[str, ...]:
        """Human display names in id order (SST-2: negative, positive), as the GLUE / tensorflow-
        datasets ClassLabel names; same order as `labels` (id 0 = GLUE label "0")."""
        return self.names or self.labels

    @property
    def num_classes(self) -> int:
        """1 for regression, else the number of labels."""
        return 1 if self.is_regression else len(self.labels)

    @property
    def is_pair(self) -> bool:
        return self.labelled.text_b is not None


def _task(
    name,
    labels,
    dirnames,
    labelled,
    unlabelled,
    tfds_text,
    *,
    mnli=False,
    regression=False,
    names=(),
):
    if mnli:
        splits = {
            "train": "train",
            "dev_matched": "dev_matched",
            "dev_mismatched": "dev_mismatched",
            "test_matched": "test_matched",
            "test_mismatched": "test_mismatched",
        }
        dev_splits = ("dev_matched", "dev_mismatched")
        tfds_splits = {
            "train": "train",
            "dev_matched": "validation_matched",
            "dev_mismatched": "validation_mismatched",
            "test_matched": "test_matched",
            "test_mismatched": "test_mismatched",
        }
    else:
        splits = {"train": "train", "dev": "dev", "test": "test"}
        dev_splits = ("dev",)
        tfds_splits = {"train": "train", "dev": "validation", "test": "test"}
    return GlueTask(
        name,
        tuple(labels),
        regression,
        dirnames,
        splits,
        dev_splits,
        f"glue/{name}",
        labelled,
        unlabelled,
        tfds_text,
        tfds_splits,
        tuple(names),
    )


_BINARY = ("0", "1")
_NLI2 = ("entailment", "not_entailment")

TASKS: dict[str, GlueTask] = {
    t.name: t
    for t in [
        _task(
            "cola",
            _BINARY,
            ("cola", "CoLA"),
            _Columns(3, None, 1, False, 4),
            _Columns(1, None, None, True),
            ("sentence", None),
            names=("unacceptable", "acceptable"),
        ),
        _task(
            "sst2",
            _BINARY,
            ("sst2", "SST-2", "sst-2"),
            _Columns(0, None, 1, True),
            _Columns(1, None, None, True),
            ("sentence", None),
            names=("negative", "positive"),
        ),
        _task(
            "mrpc",
            _BINARY,
            ("mrpc", "MRPC"),
            _Columns(3, 4, 0, True),
            _Columns(3, 4, None, True),
            ("sentence1", "sentence2"),
            names=("not_equivalent", "equivalent"),
        ),
        _task(
            "stsb",
            (),
            ("stsb", "STS-B", "sts-b"),
            _Columns(7, 8, -1, True),
            _Columns(7, 8, None, True),
            ("sentence1", "sentence2"),
            regression=True,
        ),
        _task(
            "qqp",
            _BINARY,
            ("qqp", "QQP"),
            _Columns(3, 4, 5, True),
            _Columns(1, 2, None, True),
            ("question1", "question2"),
            names=("not_duplicate", "duplicate"),
        ),
        _task(
            "mnli",
            ("contradiction", "entailment", "neutral"),
            ("mnli", "MNLI"),
            _Columns(8, 9, -1, True),
            _Columns(8, 9, None, True),
            ("premise", "hypothesis"),
            mnli=True,
        ),
        _task(
            "qnli",
            _NLI2,
            ("qnli", "QNLI"),
            _Columns(1, 2, -1, True),
            _Columns(1, 2, None, True),
            ("question", "sentence"),
        ),
        _task(
            "rte",
            _NLI2,
            ("rte", "RTE"),
            _Columns(1, 2, -1, True),
            _Columns(1, 2, None, True),
            ("sentence1", "sentence2"),
        ),
        _task(
            "wnli",
            _BINARY,
            ("wnli", "WNLI"),
            _Columns(1, 2, -1, True),
            _Columns(1, 2, None, True),
            ("sentence1", "sentence2"),
        ),
    ]
}

_ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "mnli-m": "mnli", "mnli_matched": "mnli"}


class MalformedRowError(ValueError):
    """A GLUE row that does not fit its file's layout; the message names file and line."""


def get_task(task_name: str) -> GlueTask:
    """The GlueTask for a case-insensitive name ("SST-2", "sst2", "MNLI", ...).

    Raises:
        ValueError: naming the unknown task and listing the known ones.
    """
    key = task_name.lower()
    key = _ALIASES.get(key, key)
    if key not in TASKS:
        raise ValueError(f"unknown GLUE task {task_name!r}; known tasks: {sorted(TASKS)}")
    return TASKS[key]


def find_split_file(task_name: str, split: str, data_dir: str | os.PathLike) -> str:
    """Locate `<split>.tsv` of a task under data_dir.

    data_dir may be the task's own directory, a GLUE root holding `sst2/` or `SST-2/` (any of the
    task's `dirnames`), or a data root holding `glue/<task>/`.

    Raises:
        ValueError: unknown split for the task.
        FileNotFoundError: naming every path tried.
    """
    task = get_task(task_name)
    if split not in task.splits:
        raise ValueError(f"task {task.name!r} has no split {split!r}; splits: {list(task.splits)}")
    stem = task.splits[split] + ".tsv"
    root = os.fspath(data_dir)
    candidates = [fileio.join(root, stem)]
    for base in (root, fileio.join(root, "glue")):
        candidates += [fileio.join(base, d, stem) for d in task.dirnames]
    for path in candidates:
        if fileio.isfile(path):
            return path
    raise FileNotFoundError(
        f"no {stem} for GLUE task {task.name!r} under {root}; tried: " + ", ".join(candidates)
    )


def read_tsv_file(
    path: str | os.PathLike, task_name: str, split: str, on_error: str = "warn"
) -> list[InputExample]:
    """Read one GLUE TSV file (see the module docstring for layouts and quirks).

    Args:
        path: the .tsv file (UTF-8, an optional BOM is dropped).
        task_name: a GLUE task name.
        split: a split of the task; "test*" splits are read without labels.
        on_error: "warn" (log file:line and drop the row), "raise" (MalformedRowError) or "ignore".

    Returns:
        list of InputExample, in file order; guid = "<split>-<line number>".

    Raises:
        MalformedRowError: with on_error="raise", naming file, line and the problem; whatever
            on_error says, a header with fewer columns than the task's rows use.
        ValueError: a bad on_error value.
    """
    if on_error not in ("warn", "raise", "ignore"):
        raise ValueError(f"on_error must be 'warn', 'raise' or 'ignore', got {on_error!r}")
    task = get_task(task_name)
    cols = task.unlabelled if split.startswith("test") else task.labelled
    path = os.fspath(path)
    # Physical lines only: "\n" (with an optional "\r" before it). Never a csv quote parser.
    lines = fileio.text_lines(fileio.read_user_text(path), path)
    examples: list[InputExample] = []
    num_columns = cols.num_columns
    start = 0
    if cols.header:
        if not lines:
            raise MalformedRowError(f"{path}: empty file, expected a header line")
        num_columns = len(lines[0].rstrip("\r").split("\t"))
        used = [i for i in (cols.text_a, cols.text_b, cols.label) if i is not None]
        needed = max(i + 1 if i >= 0 else -i for i in used)
        if num_columns < needed:
            raise MalformedRowError(
                f"{path}:1: the header has {num_columns} tab-separated columns; {task.name} "
                f"{split} rows need at least {needed}"
            )
        start = 1
    for index in range(start, len(lines)):
        lineno = index + 1
        fields = lines[index].rstrip("\r").split("\t")
        problem = None
        if num_columns is not None and len(fields) != num_columns:
            problem = f"expected {num_columns} tab-separated columns, found {len(fields)}"
        label = None
        if problem is None and cols.label is not None:
            raw = fields[cols.label].strip()
            if task.is_regression:
                try:
                    label = regression_value(raw)
                except ValueError:
                    problem = f"label {raw!r} is not a number"
            elif raw not in task.labels:
                problem = f"label {raw!r} is not one of {list(task.labels)}"
            else:
                label = raw
        if problem is not None:
            message = f"{path}:{lineno}: malformed {task.name} row: {problem}"
            if on_error == "raise":
                raise MalformedRowError(message)
            if on_error == "warn":
                logger.warning(message)
            continue
        text_b = fields[cols.text_b] if cols.text_b is not None else None
        examples.append(InputExample(f"{split}-{lineno}", fields[cols.text_a], text_b, label))
    return examples


def examples_from_tfds(
    task_name: str, split: str, rows: Iterable[dict], label_names: Sequence[str] | None = None
) -> list[InputExample]:
    """Turn tensorflow-datasets GLUE rows (dicts of numpy values) into InputExamples.

    Args:
        rows: e.g. `tfds.as_numpy(tfds.load("glue/sst2", split="validation"))`.
        label_names: the tfds ClassLabel names in id order (tfds MNLI uses
            entailment/neutral/contradiction, not our order), mapped to our label strings.
            Label -1 (test rows) becomes None.
    """
    task = get_task(task_name)
    key_a, key_b = task.tfds_text

    def _str(v):
        return v.decode("utf-8") if isinstance(v, bytes) else str(v)

    out = []
    for i, row in enumerate(rows):
        raw = row.get("label", -1)
        label = None
        if task.is_regression:
            label = float(raw) if float(raw) >= 0 else None
        elif int(raw) >= 0:
            name = label_names[int(raw)] if label_names is not None else str(int(raw))
            if (
                name not in task.labels and name in task.label_names
            ):  # tfds SST-2: "positive" -> "1"
                name = task.labels[task.label_names.index(name)]
            if name not in task.labels:
                raise ValueError(f"tfds label {name!r} of {task.tfds_name} not in {task.labels}")
            label = name
        out.append(
            InputExample(
                f"{split}-{i}", _str(row[key_a]), _str(row[key_b]) if key_b else None, label
            )
        )
    return out


def load_glue_tfds(task_name: str, split: str) -> list[InputExample]:
    """Read a split through tensorflow-datasets (needs the network, or a prepared TFDS cache)."""
    import tensorflow_datasets as tfds  # Imported lazily: optional, slow to import.

    task = get_task(task_name)
    ds, info = tfds.load(task.tfds_name, split=task.tfds_splits[split], with_info=True)
    names = None if task.is_regression else info.features["label"].names
    return examples_from_tfds(task.name, split, tfds.as_numpy(ds), names)


def read_glue(
    task_name: str, split: str, data_dir: str | os.PathLike | None = None, on_error: str = "warn"
) -> list[InputExample]:
    """Read a GLUE split from local TSVs, else (no data_dir) through tensorflow-datasets.

    Args:
        task_name: one of TASKS (case-insensitive; "SST-2" etc. accepted).
        split: "train", "dev", "test"; MNLI: "train", "dev_matched", "dev_mismatched",
            "test_matched", "test_mismatched".
        data_dir: local directory (see find_split_file); None uses $KERAS_BERT_DATA_DIR if set,
            else tensorflow-datasets.

    Raises:
        FileNotFoundError: see find_split_file; or no data_dir and tensorflow-datasets unusable
            (not installed, no network...), naming the reason.
        ValueError, MalformedRowError: see find_split_file / read_tsv_file.
    """
    data_dir = data_dir or os.environ.get("KERAS_BERT_DATA_DIR")
    if data_dir:
        return read_tsv_file(
            find_split_file(task_name, split, data_dir), task_name, split, on_error
        )
    try:
        return load_glue_tfds(task_name, split)
    except Exception as e:  # ImportError, no network, a broken tfds install: all end the same way.
        raise FileNotFoundError(
            f"no local GLUE data for task {get_task(task_name).name!r} (looked in: no data_dir / --data_dir "
            f"given, $KERAS_BERT_DATA_DIR not set); pass --data_dir or set KERAS_BERT_DATA_DIR "
            f"(tensorflow-datasets fallback failed: {type(e).__name__}: {e})"
        ) from e
