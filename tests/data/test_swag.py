"""SWAG reader on a small file in the official CSV layout (the official files are not shipped)."""

import csv

import pytest

from keras_bert.data import swag

HEADER = [
    "",
    "video-id",
    "fold-ind",
    "startphrase",
    "sent1",
    "sent2",
    "gold-source",
    "ending0",
    "ending1",
    "ending2",
    "ending3",
    "label",
]
ROWS = [
    [
        "0",
        "anetv_jkn6uvmqwh4",
        "3416",
        "Members of the procession walk down the street "
        "holding small horn brass instruments. A drum line",
        "Members of the procession walk down the street holding small horn brass instruments.",
        "A drum line",
        "gold",
        "passes by walking down the street playing their instruments.",
        "has heard approaching them.",
        "arrives and they're outside dancing and asleep.",
        "turns the lead singer watches the performance.",
        "0",
    ],
    [
        "1",
        "lsmdc3001_21_JUMP_STREET-422",
        "11783",
        "Someone looks at her. She",
        "Someone looks at her.",
        "She",
        "gen",
        "smiles.",
        'frowns, "quietly".',
        "leaves, then returns.",
        "sleeps.",
        "2",
    ],
]


def write(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_reads_official_layout(tmp_path):
    examples = swag.read_swag(write(tmp_path / "val.csv", HEADER, ROWS))
    assert len(examples) == 2
    first, second = examples
    assert first.example_id == "anetv_jkn6uvmqwh4-3416" and first.label == 0
    assert first.context.startswith("Members of the procession") and first.start == "A drum line"
    assert first.second_segments()[0] == (
        "A drum line passes by walking down the street playing their instruments."
    )
    assert second.endings[1] == 'frowns, "quietly".' and second.label == 2
    assert second.second_segments() == [
        "She smiles.",
        'She frowns, "quietly".',
        "She leaves, then returns.",
        "She sleeps.",
    ]


def test_unlabelled_test_file_and_errors(tmp_path):
    test_rows = [r[:-1] for r in ROWS]
    examples = swag.read_swag(
        write(tmp_path / "test.csv", HEADER[:-1], test_rows), require_labels=False
    )
    assert [e.label for e in examples] == [None, None]
    with pytest.raises(ValueError, match="no 'label' column"):
        swag.read_swag(tmp_path / "test.csv")
    bad = [ROWS[0][:-1] + ["4"]]
    with pytest.raises(ValueError, match=r"row 1: label must be 0..3, got '4'"):
        swag.read_swag(write(tmp_path / "bad.csv", HEADER, bad))
    with pytest.raises(ValueError, match=r"missing SWAG columns \['ending3'\]"):
        swag.read_swag(write(tmp_path / "cut.csv", HEADER[:10], [r[:10] for r in ROWS]))
    # The own_data fuzz target's finding, of the same kind here: an unquoted comma in an ending
    # added a field past the header, and the reader kept the cut ending.
    path = tmp_path / "wide.csv"
    path.write_text(",".join(HEADER) + "\n" + ",".join(ROWS[0]) + ",more\n")
    with pytest.raises(ValueError) as raised:
        swag.read_swag(path)
    assert str(raised.value) == f"{path}: row 1: 1 more field(s) than the header"
