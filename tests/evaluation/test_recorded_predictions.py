"""recorded_predictions: per-row outputs of a batch prediction as one array (`stacked`: rows padded
per batch to different widths padded again to the longest, as the signature pads), and its
JSON Lines read as written."""

import numpy as np
import pytest

from keras_bert import fileio
from keras_bert.batch_prediction import records
from keras_bert.batch_prediction.rows import RowError
from keras_bert.evaluation.evidence_pack import DataError
from keras_bert.evaluation.recorded_predictions import _jsonl, stacked


def test_rows_of_one_shape_stack_as_they_are():
    out = stacked([[0.1, 0.9], [0.7, 0.3]], "probabilities")
    assert out.shape == (2, 2) and out.dtype == np.float64
    np.testing.assert_array_equal(out, [[0.1, 0.9], [0.7, 0.3]])
    np.testing.assert_array_equal(stacked([3, 0, 2], "num_words"), [3, 0, 2])


def test_text_rows_of_different_widths_are_padded_with_empty_strings():
    out = stacked([["B-PER", "I-PER", ""], ["O"], ["O", "B-LOC"]], "tags")
    assert out.tolist() == [["B-PER", "I-PER", ""], ["O", "", ""], ["O", "B-LOC", ""]]


def test_number_rows_of_different_widths_are_padded_with_zeros():
    out = stacked([[[1, 2], [3, 4]], [[5, 6]]], "word_scores")
    assert out.tolist() == [[[1, 2], [3, 4]], [[5, 6], [0, 0]]]


def test_rows_of_different_ranks_are_refused_by_name():
    with pytest.raises(DataError, match=r"output 'tags': rows of different ranks \[\(\), \(2,\)\]"):
        stacked([["O", "O"], "O"], "tags")


def test_dead_letters_holding_line_breaks_of_splitlines_are_read_back(tmp_path):
    """A row whose raw text holds U+2028 (raw inside a JSON string, and written raw) is one record
    of errors-*.jsonl for `evaluate.py --predictions`, not an "Unterminated string"."""
    raw = {"id": "r1", "text": "one\u2028two\u2029three\x85four", "extra": "\x0b\x0c\x1c\x1d\x1e"}
    error = RowError(0, "in.jsonl", 0, "r1", raw, "missing text column 'label'")
    name = "errors-00000-of-00001.jsonl"
    fileio.write_text(str(tmp_path / name), records.error_json(error, error.reason, "id") + "\n")
    assert "\u2028" in (tmp_path / name).read_text(encoding="utf-8")
    assert _jsonl(str(tmp_path), [name]) == [
        {
            "id": "r1",
            "input_file": "in.jsonl",
            "input_row": 0,
            "raw": raw,
            "reason": "missing text column 'label'",
        }
    ]
