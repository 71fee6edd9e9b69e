"""Your own labelled text: CSV, TSV or JSON-lines files for (pair) classification and regression.

Task types (`--task_name` of recipes/run_classifier.py):
  text_classification       one text column, string labels
  text_pair_classification  text + text_b columns, string labels
  text_regression           one text (optionally text_b) column, float labels

The format follows the extension: `.csv` (RFC 4180 quoting, header row), `.tsv`/`.tab` (tab
separated, header row, csv quoting), `.jsonl`/`.json` (one JSON object per line, lines ending in
"\n" or "\r\n"). Files are read by `keras_bert.fileio`'s one rule for user files (UTF-8, a
byte-order mark dropped; `read_user_text`, `csv_records`, `jsonl_lines`). Labels are kept
as strings (`1` and `1.0` are different classes); the label set is the sorted set of training labels,
all names or all ids (`keras_bert.data.labels`).
"""

from __future__ import annotations

import os

from keras_bert import fileio
from keras_bert.data import labels
from keras_bert.data.glue import InputExample

TASK_TYPES = ("text_classification", "text_pair_classification", "text_regression")


def read_text_file(
    path: str | os.PathLike,
    text_column: str = "text",
    text_b_column: str | None = None,
    label_column: str | None = "label",
    regression: bool = False,
) -> list[InputExample]:
    """Read a CSV / TSV / JSONL file into InputExamples.

    Args:
        path: the file; its extension selects the format.
        text_column, text_b_column: column (or JSON key) names of the segments.
        label_column: label column name; None reads unlabelled rows (label=None).
        regression: parse labels as float.

    Returns:
        list of InputExample, guid "<file name>-<line number>".

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: unknown extension; empty file (no rows); a missing column (naming it and the
            columns present); a CSV / TSV record with more or fewer fields than the header
            (`fileio.record_width_problem`); an empty label; a regression label that is not a
            finite number (`labels.regression_value`); a bad JSON line
            or a line holding another JSON value than an object; not UTF-8
            (`fileio.UserFileError`, naming file and byte offset).
    """
    path = os.fspath(path)
    if not fileio.isfile(path):
        raise FileNotFoundError(f"data file not found: {path}")
    name = fileio.basename(path)
    suffix = name[name.rfind(".") :].lower() if "." in name else ""
    wanted = [c for c in (text_column, text_b_column, label_column) if c is not None]
    rows: list[tuple[int, dict]] = []
    if suffix in (".csv", ".tsv", ".tab"):
        text = fileio.read_user_text(path)
        columns, records = fileio.csv_records(text, path, "," if suffix == ".csv" else "\t")
        if not columns:
            raise ValueError(f"{path}: empty file (no header row)")
        missing = [c for c in wanted if c not in columns]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing}; columns present: {columns}")
        rows = list(records)
        for lineno, row in rows:
            problem = fileio.record_width_problem(row)
            if problem:
                raise ValueError(f"{path}:{lineno}: {problem}")
    elif suffix in (".jsonl", ".json"):
        for lineno, line in fileio.jsonl_lines(fileio.read_user_text(path)):
            row = fileio.parse_json(line, f"{path}:{lineno}")
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{lineno}: not a JSON object but {type(row).__name__}")
            missing = [c for c in wanted if c not in row]
            if missing:
                raise ValueError(
                    f"{path}:{lineno}: missing key(s) {missing}; keys present: {sorted(row)}"
                )
            rows.append((lineno, row))
    else:
        raise ValueError(f"{path}: unknown file type {suffix!r}; use .csv, .tsv or .jsonl")
    if not rows:
        raise ValueError(f"{path}: empty file (no data rows)")
    examples = []
    for lineno, row in rows:
        label = None
        if label_column is not None:
            raw = row[label_column]
            raw = "" if raw is None else str(raw).strip()
            if raw == "":
                raise ValueError(f"{path}:{lineno}: empty label in column {label_column!r}")
            if regression:
                try:
                    label = labels.regression_value(raw)
                except ValueError:
                    raise ValueError(
                        f"{path}:{lineno}: regression label {raw!r} is not a number"
                    ) from None
            else:
                label = raw
        text_b = None if text_b_column is None else str(row[text_b_column] or "")
        examples.append(
            InputExample(f"{name}-{lineno}", str(row[text_column] or ""), text_b, label)
        )
    return examples


def file_labels_from_examples(
    examples: list[InputExample], source: str = "training data"
) -> list[str]:
    """The sorted set of labels in the (training) examples, all names or all ids
    (`keras_bert.data.labels.label_set`).

    Raises:
        LabelError (a ValueError): a mix of names and ids, or fewer than two distinct labels.
    """
    return labels.label_set([e.label for e in examples if e.label is not None], source)
