"""Own-data readers: CSV, TSV, JSONL; every error names the problem."""

import json

import pytest

from keras_bert.data import text_files
from keras_bert.data.glue import InputExample


def test_csv_tsv_jsonl_read_the_same(tmp_path):
    (tmp_path / "a.csv").write_text('text,other,label\n"Hello, world",x,pos\nbad movie,y,neg\n')
    (tmp_path / "a.tsv").write_text("text\tlabel\nHello, world\tpos\nbad movie\tneg\n")
    (tmp_path / "a.jsonl").write_text(
        json.dumps({"text": "Hello, world", "label": "pos"})
        + "\n\n"
        + json.dumps({"text": "bad movie", "label": "neg"})
        + "\n"
    )
    for name in ("a.csv", "a.tsv", "a.jsonl"):
        examples = text_files.read_text_file(tmp_path / name)
        assert [(e.text_a, e.text_b, e.label) for e in examples] == [
            ("Hello, world", None, "pos"),
            ("bad movie", None, "neg"),
        ], name
    assert text_files.read_text_file(tmp_path / "a.jsonl")[1].guid == "a.jsonl-3"
    assert text_files.file_labels_from_examples(text_files.read_text_file(tmp_path / "a.csv")) == [
        "neg",
        "pos",
    ]


def test_pair_and_regression(tmp_path):
    (tmp_path / "p.csv").write_text("q,a,score\nwho,me,4.5\nwhy,because,1\n")
    examples = text_files.read_text_file(tmp_path / "p.csv", "q", "a", "score", regression=True)
    assert examples == [
        InputExample("p.csv-2", "who", "me", 4.5),
        InputExample("p.csv-3", "why", "because", 1.0),
    ]
    (tmp_path / "bad.csv").write_text("q,a,score\nwho,me,high\n")
    with pytest.raises(ValueError, match=r"bad.csv:2: regression label 'high' is not a number"):
        text_files.read_text_file(tmp_path / "bad.csv", "q", "a", "score", regression=True)


def test_errors_name_the_problem(tmp_path):
    (tmp_path / "t.csv").write_text("sentence,label\nhi,a\n")
    with pytest.raises(
        ValueError,
        match=r"missing column\(s\) \['text'\]; columns present: \['sentence', 'label'\]",
    ):
        text_files.read_text_file(tmp_path / "t.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ValueError, match="empty.csv: empty file"):
        text_files.read_text_file(tmp_path / "empty.csv")
    (tmp_path / "header_only.tsv").write_text("text\tlabel\n")
    with pytest.raises(ValueError, match="header_only.tsv: empty file"):
        text_files.read_text_file(tmp_path / "header_only.tsv")
    (tmp_path / "k.jsonl").write_text('{"text": "a"}\n')
    with pytest.raises(ValueError, match=r"k.jsonl:1: missing key\(s\) \['label'\]"):
        text_files.read_text_file(tmp_path / "k.jsonl")
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        text_files.read_text_file(tmp_path / "nope.csv")
    with pytest.raises(ValueError, match="unknown file type '.xlsx'"):
        (tmp_path / "x.xlsx").write_text("")
        text_files.read_text_file(tmp_path / "x.xlsx")
    with pytest.raises(
        ValueError, match=r"^training data: 1 distinct label\(s\) \['pos'\]; need at least 2$"
    ):
        text_files.file_labels_from_examples([InputExample("a", "x", None, "pos")])


@pytest.mark.parametrize(
    "suffix, body, message",
    [
        # Found by the own_data fuzz target: a short record read its missing texts as "", and
        # an unquoted comma cut a text, both silently. Its property (a regression label is a
        # finite number) found "nan" and "inf" labels.
        (".csv", "text,label\na\n", "t.csv:2: fewer fields than the header"),
        (".csv", "text,label\na, b,pos\n", "t.csv:2: 1 more field(s) than the header"),
        (".tsv", "text\tlabel\nx\t1\ny\t1\tz\tw\n", "t.tsv:3: 2 more field(s) than the header"),
    ],
)
def test_records_of_another_width_than_the_header_are_refused(tmp_path, suffix, body, message):
    path = tmp_path / f"t{suffix}"
    path.write_text(body)
    with pytest.raises(ValueError) as raised:
        text_files.read_text_file(path, label_column=None)
    assert str(raised.value) == f"{tmp_path}/{message}"


@pytest.mark.parametrize("raw", ["nan", "inf", "-Infinity"])
def test_regression_labels_are_finite(tmp_path, raw):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"text": "a", "label": raw}) + "\n")
    with pytest.raises(ValueError) as raised:
        text_files.read_text_file(path, regression=True)
    assert str(raised.value) == f"{path}:1: regression label {raw!r} is not a number"
