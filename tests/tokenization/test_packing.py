"""Packing and pair truncation (reference `_truncate_seq_pair`, `convert_single_example`)."""

import itertools

import pytest

from keras_bert.tokenization import pack_inputs, truncate_seq_pair
from keras_bert.tokenization.packing import truncated_lengths


def test_truncate_pops_longer_then_ties_from_b():
    a, b = [1, 2, 3, 4, 5], [6, 7]
    truncate_seq_pair(a, b, 4)
    assert (a, b) == ([1, 2], [6, 7])
    a, b = [1, 2, 3], [4, 5, 6]
    truncate_seq_pair(a, b, 4)
    assert (a, b) == ([1, 2], [4, 5])
    a, b = [1, 2, 3], [4, 5, 6]
    truncate_seq_pair(a, b, 3)
    assert (a, b) == ([1, 2], [4])  # tie pops B first
    a, b = [1], [2, 3, 4, 5, 6, 7]
    truncate_seq_pair(a, b, 2)
    assert (a, b) == ([1], [2])


def test_closed_form_equals_loop():
    for la, lb, m in itertools.product(range(9), range(9), range(12)):
        a, b = list(range(la)), list(range(lb))
        truncate_seq_pair(a, b, m)
        assert truncated_lengths(la, lb, m) == (len(a), len(b)), (la, lb, m)


def test_pack_single():
    out = pack_inputs([5, 6, 7], max_seq_length=7, cls_id=101, sep_id=102, pad_id=0)
    assert out == {
        "input_word_ids": [101, 5, 6, 7, 102, 0, 0],
        "input_mask": [1, 1, 1, 1, 1, 0, 0],
        "input_type_ids": [0, 0, 0, 0, 0, 0, 0],
    }
    out = pack_inputs([5, 6, 7, 8, 9], max_seq_length=4, cls_id=101, sep_id=102)
    assert out["input_word_ids"] == [101, 5, 6, 102]
    assert pack_inputs([], max_seq_length=3, cls_id=101, sep_id=102)["input_word_ids"] == [
        101,
        102,
        0,
    ]


def test_pack_pair():
    out = pack_inputs([5, 6, 7, 8], [9, 10, 11], max_seq_length=8, cls_id=101, sep_id=102)
    # budget 5: a=4,b=3 -> pop a -> 3,3 -> pop b -> 3,2
    assert out == {
        "input_word_ids": [101, 5, 6, 7, 102, 9, 10, 102],
        "input_mask": [1] * 8,
        "input_type_ids": [0, 0, 0, 0, 0, 1, 1, 1],
    }
    out = pack_inputs([], [], max_seq_length=5, cls_id=101, sep_id=102, pad_id=0)
    assert out["input_word_ids"] == [101, 102, 102, 0, 0]
    assert out["input_type_ids"] == [0, 0, 1, 0, 0]
    assert out["input_mask"] == [1, 1, 1, 0, 0]


def test_pack_errors():
    with pytest.raises(ValueError, match=">= 2"):
        pack_inputs([1], max_seq_length=1, cls_id=101, sep_id=102)
    with pytest.raises(ValueError, match=">= 3"):
        pack_inputs([1], [2], max_seq_length=2, cls_id=101, sep_id=102)
    with pytest.raises(ValueError, match=">= 0"):
        truncate_seq_pair([], [], -1)
