"""recorded_predictions.stacked: per-row outputs of a batch prediction as one array, rows padded
per batch to different widths padded again to the longest, as the signature pads."""

import numpy as np
import pytest

from keras_bert.evaluation.evidence_pack import DataError
from keras_bert.evaluation.recorded_predictions import stacked


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
