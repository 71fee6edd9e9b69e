"""SWAG (Zellers et al. 2018) multiple-choice CSV files -> examples.

Official layout (rowanz/swagaf `data/train.csv`, `val.csv`, `test.csv`): a header row with
`video-id, fold-ind, startphrase, sent1, sent2, gold-source, ending0, ending1, ending2, ending3,
label` (the released files also start with an unnamed index column; `test.csv` has no labels).
BERT section 4.4: segment A is the first sentence (`sent1`), segment B is the start of the second
sentence (`sent2`) followed by one ending; four such sequences per example (PITFALLS: data).
"""

from __future__ import annotations

import dataclasses
import os

from keras_bert import fileio

NUM_CHOICES = 4
REQUIRED = ("sent1", "sent2") + tuple(f"ending{i}" for i in range(NUM_CHOICES))


@dataclasses.dataclass(frozen=True)
class SwagExample:
    """One example: `context` (sent1), `start` (sent2, the start of the second sentence),
    `endings` (4 str) and `label` (index of the right ending, or None for unlabelled test rows)."""

    example_id: str
    context: str
    start: str
    endings: tuple
    label: int | None

    def second_segments(self) -> list[str]:
        """Segment B of each choice: the start of the second sentence, a space, the ending."""
        return [f"{self.start} {e}".strip() for e in self.endings]


def read_swag(path, require_labels: bool = True) -> list[SwagExample]:
    """Reads a SWAG CSV file.

    Args:
        path: str or path-like, UTF-8 CSV with a header row (official layout above), read by
            `keras_bert.fileio.read_user_text` (a byte-order mark dropped) and
            `fileio.csv_records` (fields of any length).
        require_labels: True: every row needs `label` in 0..3 (train / val); False: a missing or
            empty label gives None (test).

    Returns:
        list of `SwagExample` in file order; `example_id` is `video-id` + `-` + `fold-ind` when
        present, else the 0-based row number.

    Raises:
        FileNotFoundError: no such file.
        ValueError: missing columns (named), a bad label or a row with fewer or more fields than
            the header (naming the row), or a file that is not UTF-8 (`fileio.UserFileError`).
    """
    path = os.fspath(path)
    header, records = fileio.csv_records(fileio.read_user_text(path), path)
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ValueError(f"{path}: missing SWAG columns {missing} (header: {header})")
    if require_labels and "label" not in header:
        raise ValueError(f"{path}: no 'label' column (pass require_labels=False for test.csv)")
    return [_example(row, i, path, require_labels) for i, (_, row) in enumerate(records)]


def _example(row: dict, index: int, path, require_labels: bool) -> SwagExample:
    short = [c for c in REQUIRED if row[c] is None]
    if short:
        raise ValueError(f"{path}: row {index + 1}: no {short} (fewer fields than the header)")
    problem = fileio.record_width_problem(row)
    if problem:  # an unquoted comma in a text: the endings would be cut
        raise ValueError(f"{path}: row {index + 1}: {problem}")
    raw = (row.get("label") or "").strip()
    label = None
    if raw or require_labels:
        if raw not in {str(i) for i in range(NUM_CHOICES)}:
            raise ValueError(
                f"{path}: row {index + 1}: label must be 0..{NUM_CHOICES - 1}, got {raw!r}"
            )
        label = int(raw)
    example_id = (
        f"{row['video-id']}-{row['fold-ind']}"
        if row.get("video-id") and row.get("fold-ind")
        else str(index)
    )
    return SwagExample(
        example_id,
        row["sent1"],
        row["sent2"],
        tuple(row[f"ending{i}"] for i in range(NUM_CHOICES)),
        label,
    )
