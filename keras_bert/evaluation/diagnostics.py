"""Why and where a model fails, beyond its metrics: the diagnostics every evidence pack carries.

`add_diagnostics` adds to one model's result (`evidence_pack.evaluate_outputs`):

- "data_health" (`data_health.health`): [UNK] and truncation rates, overall and per slice;
- "weak_segments" (`weak_segments.find_weak_segments`) when the evaluator gave per-row
  correctness ("correct", bool [N]);
- "label_issues" (`label_issues.find_label_issues`) when it gave class probabilities
  ("probabilities", float [N, C]) and gold label ids, or per-word tag probabilities
  ("token_probabilities", NER: a list of float [W, C]; `label_issues.find_token_label_issues`).

An evaluator of any task family opts in by returning "correct" and / or "probabilities" beside its
metrics; both are consumed here (popped), so metrics.json holds no per-row arrays.
"""

from __future__ import annotations

import numpy as np

from keras_bert.evaluation import data_health, label_issues
from keras_bert.evaluation import failure_catalogue as fc
from keras_bert.evaluation import weak_segments as ws


def add_diagnostics(result: dict, data, label_names) -> dict:
    """Adds "data_health", "weak_segments" and "label_issues" to `result` (see module doc).

    Args:
        result: an evaluator's dict; its "correct" / "probabilities" are popped.
        data: `evidence_pack.EvalData`; without `unknown` counted, no "data_health".
        label_names: the model's label names (classification).

    Returns:
        `result`.
    """
    correct = result.pop("correct", None)
    probabilities = result.pop("probabilities", None)
    token_probabilities = result.pop("token_probabilities", None)
    columns = fc.slice_columns(
        data.token_lengths, data.truncated, data.gold_names, data.slice_values, data.slice_column
    )
    counted = data.unknown is not None
    unknown = data.unknown if counted else np.zeros(len(data.examples), np.int64)
    if counted:
        result["data_health"] = data_health.health(data.pieces, unknown, data.truncated, columns)
    if correct is not None:
        properties = ws.text_properties(
            data.joined_texts,
            data.token_lengths,
            data.truncated,
            unknown,
            data.slice_values,
            data.slice_column,
        )
        result["weak_segments"] = ws.find_weak_segments(properties, correct, data.joined_texts)
    if probabilities is not None and data.gold_names is not None:
        result["label_issues"] = label_issues.find_label_issues(
            data.gold, probabilities, label_names
        )
    if token_probabilities is not None:
        result["label_issues"] = label_issues.find_token_label_issues(
            data.reference["tags"], token_probabilities, label_names, data.reference["words"]
        )
    return result
