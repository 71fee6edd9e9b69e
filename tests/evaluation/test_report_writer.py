"""The report writer: number format, key lookup, Markdown / HTML rendering of the same blocks."""

import json
import math

import numpy as np
import pytest

from keras_bert.evaluation import report_writer as rw


def test_number_format():
    assert [
        rw.fmt(v)
        for v in (0.0054, 0.00054, -1.2e-4, 0.0, 1.5, 3, np.int64(7), None, math.nan, True)
    ] == ["0.0054", "5.400e-04", "-1.200e-04", "0.0000", "1.5000", "3", "7", "n/a", "n/a", "yes"]


def test_lookup_and_json_ready():
    metrics = {"a": {"b": [10, {"c": 0.5}]}}
    assert rw.lookup(metrics, "a.b.1.c") == 0.5 and rw.lookup(metrics, "a.b.0") == 10
    ready = rw.json_ready(
        {"x": np.float32(0.25), "y": np.array([1, 2]), "z": float("nan"), 3: (np.bool_(True),)}
    )
    assert json.dumps(ready) == '{"x": 0.25, "y": [1, 2], "z": null, "3": [true]}'


def test_markdown_and_html_show_the_same_numbers(tmp_path):
    metrics = {"headline": {"accuracy": 0.75}, "slices": [{"error_rate": 0.5}, {"error_rate": 0.1}]}
    blocks = [
        ("h2", "Numbers"),
        "a <b> & c",
        rw.Table(
            ["name", "value"],
            [
                ["acc", rw.Num("headline.accuracy", 0.75)],
                ["s0", rw.Num("slices.0.error_rate", 0.5)],
                ["s1", rw.Num("slices.1.error_rate", 0.1)],
            ],
            flagged=[1],
            legend="flagged: an error rate above 0.3.",
        ),
        rw.Figure("p.png", b"\x89PNG\r\n\x1a\nfake", "a plot"),
    ]
    md = rw.to_markdown("T", blocks)
    assert "| acc | 0.7500 |" in md and "| **s0** (flagged) | 0.5000 |" in md
    assert "| s1 | 0.1000 |\n\nLegend: flagged: an error rate above 0.3.\n" in md
    assert "![a plot](p.png)" in md and "## Numbers" in md
    page = rw.to_html("T", blocks)
    assert (
        '<td class="text">acc</td><td><span data-key="headline.accuracy">0.7500</span></td>' in page
    )
    assert '<tr class="flag"><td class="text">s0 (flagged)</td>' in page
    assert '<p class="legend">Legend: flagged: an error rate above 0.3.</p>' in page
    assert "a &lt;b&gt; &amp; c" in page
    assert 'src="data:image/png;base64,iVBORw0KGgpmYWtl"' in page
    paths = rw.write_report(tmp_path, "T", metrics, blocks)
    assert paths["metrics"] == str(tmp_path / "metrics.json")
    assert json.loads((tmp_path / "metrics.json").read_text()) == metrics
    assert (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")


def test_a_table_that_marks_rows_must_define_its_mark():
    with pytest.raises(ValueError) as e:
        rw.Table(["test"], [["typo"]], flagged=[0], mark="failing", legend="tested: inputs.")
    assert str(e.value) == (
        "a table that marks rows 'failing' needs a legend defining it ('failing: ...'), "
        "got 'tested: inputs.'"
    )
    rw.Table(["test"], [["typo"]])  # nothing marked: no legend needed
