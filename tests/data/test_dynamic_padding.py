"""keras_bert.data.dynamic_padding.trim_to_longest: the one cut of a batch to its longest row,
for the input pipelines (every key kept, dtypes kept) and for a model call (`model_inputs`)."""

import numpy as np
import tensorflow as tf

from keras_bert.data.dynamic_padding import trim_to_longest

MASK = np.array([[1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]], np.int64)  # longest row: 3 of 6


def _features():
    """A batch of int64 Tensors [2, 6], as a tf.data pipeline gives them."""
    return {
        "input_word_ids": tf.constant([[2, 7, 3, 0, 0, 0], [2, 0, 0, 0, 0, 0]], tf.int64),
        "input_mask": tf.constant(MASK),
        "input_type_ids": tf.constant([[0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0]], tf.int64),
        "labels": tf.constant([[5, 6, 7, 8, 9, 4], [1, 2, 3, 4, 5, 6]], tf.int64),
    }


def test_trim_to_longest_keeps_every_key_and_dtype():
    cut = trim_to_longest(_features(), multiple=2)
    assert sorted(cut) == ["input_mask", "input_type_ids", "input_word_ids", "labels"]
    assert {v.dtype for v in cut.values()} == {tf.int64}
    np.testing.assert_array_equal(cut["input_word_ids"], [[2, 7, 3, 0], [2, 0, 0, 0]])
    np.testing.assert_array_equal(cut["labels"], [[5, 6, 7, 8], [1, 2, 3, 4]])
    empty = {k: tf.zeros_like(MASK) for k in ("input_mask", "input_word_ids")}
    assert trim_to_longest(empty)["input_mask"].shape == (2, 1)  # minimum 1 by default


def test_trim_to_longest_model_inputs_gives_the_three_inputs_as_int32():
    cut = trim_to_longest(_features(), minimum=2, model_inputs=True)
    assert sorted(cut) == ["input_mask", "input_type_ids", "input_word_ids"]  # labels dropped
    assert {v.dtype for v in cut.values()} == {tf.int32}
    np.testing.assert_array_equal(cut["input_word_ids"], [[2, 7, 3], [2, 0, 0]])
    np.testing.assert_array_equal(cut["input_type_ids"], [[0, 0, 1], [0, 0, 0]])
    empty = {k: tf.zeros_like(MASK) for k in ("input_mask", "input_word_ids", "input_type_ids")}
    assert trim_to_longest(empty, minimum=2, model_inputs=True)["input_mask"].shape == (2, 2)
