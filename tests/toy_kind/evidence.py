"""The toy kind in the evidence pack (`recipes/evaluate.py`): registered on import under
"toy_scoring". Data: the family's JSON Lines file (`reader`); metrics: hit rate (|score - gold|
<= 0.2) and mean absolute error; slices by length and truncation (mean absolute error); the
largest errors first."""

from __future__ import annotations

import numpy as np

from keras_bert.data.glue import InputExample
from keras_bert.evaluation import failure_catalogue as fc
from keras_bert.evaluation.eval_data import DataError, EvalData, token_statistics
from keras_bert.evaluation.kinds.evidence_kind import EvidenceKind, own_format, register
from tests.toy_kind.family import TOLERANCE
from tests.toy_kind.reader import read_scores

FAILURE_COLUMNS = (
    ("row", "row", True),
    ("text", "text", False),
    ("gold", "gold", True),
    ("score", "predicted", True),
    ("error", "abs_error", True),
)


def read_data(path, info, slice_column=None) -> EvalData:
    """The toy kind's held-out file as `EvalData` (gold: float64 scores).

    Raises:
        DataError: the reader's error, naming the file and line.
    """
    try:
        texts, scores = read_scores(path)
    except (ValueError, FileNotFoundError) as e:
        raise DataError(str(e)) from None
    lengths, truncated, unknown = token_statistics(
        info.vocabulary, info.do_lower_case, info.max_seq_length, texts, None
    )
    return EvalData(
        str(path),
        [InputExample(str(i), text) for i, text in enumerate(texts)],
        np.asarray(scores, np.float64),
        None,
        None,
        None,
        lengths,
        truncated,
        unknown,
    )


def evaluate(data: EvalData, outputs: dict, info) -> dict:
    """`score` outputs [N] -> headline, slices (mean absolute error), the largest errors."""
    del info
    scores = np.asarray(outputs["score"], np.float64).reshape(-1)
    error = np.abs(scores - data.gold)
    columns = fc.slice_columns(data.token_lengths, data.truncated, None)
    extra = {"tokens": data.token_lengths.tolist(), "truncated": data.truncated.tolist()}
    return {
        "headline": {
            "hit_rate": float(np.mean(error <= TOLERANCE)),
            "mae": float(np.mean(error)),
        },
        "slices": fc.slice_table(columns, error, regression=True),
        "failures": fc.regression_catalogue(data.examples, data.gold, scores, extra),
        "predicted": scores,
    }


TOY_SCORING = register(
    EvidenceKind(
        "toy_scoring",
        read=own_format(read_data),
        evaluate=evaluate,
        train_texts=lambda path, columns: read_scores(path)[0],
        failure_columns=lambda m: FAILURE_COLUMNS,
        failure_title="{n} texts, the largest error first",
        regression=True,
    )
)
