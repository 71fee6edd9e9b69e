"""Data health of a held-out set: [UNK] and truncation rates, and overlap with the training data.

- [UNK] rate: WordPiece pieces that are the vocabulary's [UNK] over all pieces (without [CLS] /
  [SEP]), counted with the model's own tokenizer (`evidence_pack.token_statistics`); also the
  fraction of rows with at least one [UNK].
- Truncation rate: rows whose pieces (with [CLS] / [SEP]) exceed the model's `max_seq_length`,
  i.e. rows the model saw only part of.
Both overall and per slice (`failure_catalogue.slice_columns`: length bucket, gold label, the
user's slice column).
- Leakage: held-out rows whose text also occurs in a given training file, exactly (the same
  string) or nearly (the same after `normalize`: lower case, punctuation dropped, runs of
  whitespace folded). A pair's text is both segments joined by a space.

Family-independent: it needs texts, token counts and slice values, no prediction.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np

from keras_bert.data import text_files
from keras_bert.evaluation import failure_catalogue as fc

LEAK_ROWS = 100  # listed in metrics.json; all are counted


def rates(pieces, unknown, truncated) -> dict:
    """{"examples", "pieces", "unk_pieces", "unk_rate", "rows_with_unk", "truncated",
    "truncation_rate"} of rows with `pieces` [N] pieces of which `unknown` [N] are [UNK]."""
    pieces, unknown = np.asarray(pieces, np.int64), np.asarray(unknown, np.int64)
    truncated = np.asarray(truncated, bool)
    total = int(pieces.sum())
    return {
        "examples": int(len(pieces)),
        "pieces": total,
        "unk_pieces": int(unknown.sum()),
        "unk_rate": float(unknown.sum() / total) if total else 0.0,
        "rows_with_unk": int((unknown > 0).sum()),
        "truncated": int(truncated.sum()),
        "truncation_rate": float(truncated.mean()) if len(truncated) else 0.0,
    }


def health(pieces, unknown, truncated, columns: dict) -> dict:
    """Overall and per-slice rates.

    Args:
        pieces: int [N] WordPiece pieces per row, without [CLS] / [SEP].
        unknown: int [N] of them [UNK].
        truncated: bool [N].
        columns: slice family -> list of N str (`failure_catalogue.slice_columns`).

    Returns:
        {"overall": `rates`, "slices": [{"family", "value", **rates}] in family order, values
        sorted}.
    """
    pieces, unknown = np.asarray(pieces), np.asarray(unknown)
    truncated = np.asarray(truncated, bool)
    slices = [
        {"family": family, "value": value} | rates(pieces[m], unknown[m], truncated[m])
        for family, value, m in fc.slice_members(columns)
    ]
    return {"overall": rates(pieces, unknown, truncated), "slices": slices}


_PUNCTUATION = re.compile(r"[\W_]+", re.UNICODE)


def normalize(text: str) -> str:
    """Lower case, NFKC, every run of punctuation / whitespace -> one space, stripped."""
    return _PUNCTUATION.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


def leakage(train_texts, heldout_texts, limit: int = LEAK_ROWS) -> dict:
    """Held-out rows that also occur in the training data.

    Args:
        train_texts, heldout_texts: lists of str.

    Returns:
        {"train_examples", "exact": count of held-out rows equal to a training text, "near": count
        of the others whose `normalize`d text equals a normalized training text, "rows": up to
        `limit` of [{"row": 0-based held-out row, "train_row": the first matching training row,
        "kind": "exact" | "near", "text"}], in row order}.
    """
    exact_index, near_index = {}, {}
    for i, text in enumerate(train_texts):
        exact_index.setdefault(text, i)
        near_index.setdefault(normalize(text), i)
    rows, counts = [], {"exact": 0, "near": 0}
    for row, text in enumerate(heldout_texts):
        if text in exact_index:
            kind, train_row = "exact", exact_index[text]
        elif normalize(text) in near_index:
            kind, train_row = "near", near_index[normalize(text)]
        else:
            continue
        counts[kind] += 1
        if len(rows) < limit:
            rows.append({"row": row, "train_row": train_row, "kind": kind, "text": text})
    return {"train_examples": len(train_texts), **counts, "rows": rows}


def table_texts(path: str, text_column: str, text_b_column) -> list[str]:
    """A CSV / TSV / JSONL file's texts, a pair's segments joined by a space (as
    `EvalData.joined_texts`).

    Raises:
        ValueError / FileNotFoundError: the file cannot be read (missing column, empty file).
    """
    examples = text_files.read_text_file(path, text_column, text_b_column, None)
    return [e.text_a if e.text_b is None else f"{e.text_a} {e.text_b}" for e in examples]


def train_leakage(train_path: str, text_column: str, text_b_column, heldout_texts) -> dict:
    """`leakage` of the held-out texts against a training file's texts (same columns,
    `table_texts`), with "train_file".

    Raises:
        ValueError / FileNotFoundError: the file cannot be read (missing column, empty file).
    """
    texts = table_texts(train_path, text_column, text_b_column)
    return {"train_file": str(train_path)} | leakage(texts, heldout_texts)
