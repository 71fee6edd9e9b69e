"""The toy kind's data: JSON Lines, one {"text": str, "score": number in [0, 1]} per line."""

from __future__ import annotations

import math

from keras_bert import fileio


def read_scores(path: str) -> tuple[list[str], list[float]]:
    """(texts, scores) of a JSON Lines file.

    Raises:
        ValueError: a row that is not an object with a str "text" and a finite "score" in
            [0, 1], naming the file and line; a file without rows.
        FileNotFoundError: no such file.
    """
    texts, scores = [], []
    for number, line in fileio.jsonl_lines(fileio.read_user_text(path)):
        row = fileio.parse_json(line, f"{path}:{number}")
        score = row.get("score") if isinstance(row, dict) else None
        if not isinstance(row, dict) or not isinstance(row.get("text"), str):
            raise ValueError(f'{path}:{number}: want an object with a str "text"')
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise ValueError(f'{path}:{number}: "score" must be a number, got {score!r}')
        if not (math.isfinite(score) and 0.0 <= score <= 1.0):
            raise ValueError(f'{path}:{number}: "score" {score!r} is not in [0, 1]')
        texts.append(row["text"])
        scores.append(float(score))
    if not texts:
        raise ValueError(f"{path}: no rows")
    return texts, scores
