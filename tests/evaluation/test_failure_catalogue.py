"""Slices, error rates, flags and the failure catalogue against hand-computed values."""

import numpy as np
import pytest

from keras_bert.data.glue import InputExample
from keras_bert.evaluation import failure_catalogue as fc

GOLD = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
PRED = np.array([0, 0, 1, 2, 1, 1, 0, 2, 2, 2])
USER = ["x", "x", "x", "x", "y", "y", "x", "y", "y", "y"]  # x: 5 examples, 3 errors


def test_length_buckets():
    assert [fc.length_bucket(n) for n in (3, 8, 9, 16, 17, 512, 513)] == [
        "<=8",
        "<=8",
        "9-16",
        "9-16",
        "17-32",
        "257-512",
        ">512",
    ]


def test_slice_with_known_error_rate():
    columns = fc.slice_columns([5] * 10, [False] * 9 + [True], [str(g) for g in GOLD], USER, "src")
    rows = {(r["family"], r["value"]): r for r in fc.slice_table(columns, PRED != GOLD)}
    x = rows[("column src", "x")]
    assert (x["count"], x["errors"], x["error_rate"]) == (5, 3, 0.6)
    # P(X >= 3), X ~ Binomial(5, 0.3) = 0.1323 + 0.02835 + 0.00243
    assert x["p_value"] == pytest.approx(0.16308) and not x["flagged"]
    assert rows[("column src", "y")]["error_rate"] == 0.0
    assert rows[("gold label", "0")]["error_rate"] == 0.5
    assert rows[("gold label", "1")]["error_rate"] == pytest.approx(1 / 3)
    assert (
        rows[("truncated", "yes")]["count"] == 1 and rows[("length (tokens)", "<=8")]["count"] == 10
    )


def test_slice_order_worst_first_within_family():
    columns = {"user": USER}
    table = fc.slice_table(columns, PRED != GOLD)
    assert [r["value"] for r in table] == ["x", "y"]


def test_flag_rule():
    assert fc.is_flagged(5, 5, 0.2) == (True, pytest.approx(0.2**5))
    assert fc.is_flagged(4, 4, 0.2)[0] is False  # too few examples
    assert fc.is_flagged(1, 10, 0.2)[0] is False  # below the overall rate
    assert fc.is_flagged(0, 0, 0.2) == (False, 1.0)


def test_regression_slices_flag_twice_the_mean_abs_error():
    table = fc.slice_table({"s": ["a"] * 5 + ["b"] * 5}, [1.0] * 5 + [0.0] * 5, regression=True)
    assert [(r["value"], r["error_rate"], r["flagged"]) for r in table] == [
        ("a", 1.0, True),
        ("b", 0.0, False),
    ]


def test_catalogue_lists_every_error_most_confident_first():
    examples = [InputExample(f"f-{i}", f"t{i}", None, None) for i in range(4)]
    rows = fc.catalogue(
        examples,
        ["a", "b", "a", "b"],
        ["b", "b", "b", "a"],
        [0.6, 0.99, 0.9, 0.7],
        {"tokens": [3, 4, 5, 6]},
    )
    assert [(r["guid"], r["gold"], r["predicted"], r["confidence"], r["tokens"]) for r in rows] == [
        ("f-2", "a", "b", 0.9, 5),
        ("f-3", "b", "a", 0.7, 6),
        ("f-0", "a", "b", 0.6, 3),
    ]


def test_regression_catalogue_largest_error_first():
    examples = [InputExample(f"f-{i}", f"t{i}", None, None) for i in range(3)]
    rows = fc.regression_catalogue(examples, [1.0, 2.0, 3.0], [1.5, 0.0, 3.0], limit=2)
    assert [(r["guid"], r["abs_error"]) for r in rows] == [("f-1", 2.0), ("f-0", 0.5)]
