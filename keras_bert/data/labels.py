"""The one rule for the class labels of a user's file: names or ids, never a mix.

Every reader of labelled rows (the fine-tuning own-data reader, `recipes/evaluate.py`, distillation)
turns label strings into class ids here, so they accept and refuse the same files with the same
message. A label is a **name** when it is one of the label names, an **id** when it is a whole
number ("0", "1", ...). A file gives every label as a name or every label as an id 0..C-1:

- if any label is a name, every label must be a name;
- otherwise every label must be an id in 0..C-1;
- when the names are themselves whole numbers ("1".."5" stars), a number is read as a name only.

Without label names (the training file of a fine-tuning run, whose labels make the label set) the
same rule holds with "name" = a label that is not a whole number.

Errors name the first offending row as its 0-based data row (the header line and blank JSONL lines
not counted), as `row` in metrics.json's `label_issues` does.
"""

from __future__ import annotations

import math

import numpy as np


class LabelError(ValueError):
    """A label that breaks the rule, with its data row."""


def regression_value(raw: str) -> float:
    """A regression label's text as a float, by one rule for every reader: a finite number
    ("nan" and "inf" parse as floats, but no loss or metric can use them).

    Raises:
        ValueError: text that is not a finite number.
    """
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {raw!r}")
    return value


def _is_id(label: str) -> bool:
    return label.isascii() and label.isdigit()


def _fail(source: str, row: int, label: str, problem: str, label_names) -> LabelError:
    if label_names is None:
        rule = "give every label as a name or every label as an id, not a mix"
    elif any(_is_id(n) for n in label_names):
        rule = f"give every label as one of the names {list(label_names)}"
    else:
        rule = (
            f"give every label as a name of {list(label_names)} or every label as an id "
            f"0..{len(label_names) - 1}, not a mix"
        )
    return LabelError(f"{source}: data row {row} (0-based): label {label!r} {problem}; {rule}")


def _first_name(labels, is_name):
    return next(((row, label) for row, label in enumerate(labels) if is_name(label)), None)


def label_ids(labels, label_names, source: str) -> np.ndarray:
    """File labels -> int64 class ids [N] through `label_names` (the rule of the module docstring).

    Args:
        labels: sequence of str, one per data row, in file order.
        label_names: the label names in id order (a model's, or the training label set).
        source: the file, for the message.

    Raises:
        LabelError: at the first offending row: a mix of names and ids, an unknown label, an id
            out of range.
    """
    index = {name: i for i, name in enumerate(label_names)}
    numeric_names = any(_is_id(n) for n in label_names)
    first_name = _first_name(labels, index.__contains__)
    ids = []
    for row, label in enumerate(labels):
        if label in index:
            ids.append(index[label])
            continue
        if numeric_names:
            problem = "is not a label name (the names are numbers, so ids are not read)"
        elif first_name is not None and _is_id(label):
            problem = f"is an id but data row {first_name[0]} is the name {first_name[1]!r}"
        elif first_name is None and _is_id(label) and int(label) < len(label_names):
            ids.append(int(label))
            continue
        elif _is_id(label):
            problem = "is an id out of range"
        else:
            problem = "is neither a label name nor an id"
        raise _fail(source, row, label, problem, label_names)
    return np.asarray(ids, np.int64)


def label_set(labels, source: str) -> list[str]:
    """The label set of a training file: its sorted distinct labels, all names or all ids.

    Raises:
        LabelError: a mix of names and ids (at the first id after a name is seen anywhere), or
            fewer than two distinct labels.
    """
    first_name = _first_name(labels, lambda label: not _is_id(label))
    if first_name is not None:
        for row, label in enumerate(labels):
            if _is_id(label):
                raise _fail(
                    source,
                    row,
                    label,
                    f"is an id but data row {first_name[0]} is the name {first_name[1]!r}",
                    None,
                )
    distinct = sorted(set(labels))
    if len(distinct) < 2:
        raise LabelError(f"{source}: {len(distinct)} distinct label(s) {distinct}; need at least 2")
    return distinct
