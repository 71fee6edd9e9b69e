"""keras_bert.batch_prediction.rows (and the dead letters `records.error_json` makes of them): a
dead letter keeps every field that could be read, JSON lines split at "\\n" only, bytes that are
not UTF-8 refused row by row."""

import pytest

from keras_bert import fileio
from keras_bert.batch_prediction import records, rows
from keras_bert.batch_prediction.rows import Columns, InputRow, RowError

COLUMNS = Columns("text", key="id")


def _rows(tmp_path, name, data: bytes, columns=COLUMNS):
    path = str(tmp_path / name)
    fileio.write_bytes(path, data)
    return path, list(rows.read_rows(0, path, columns))


def _dead_letter(item) -> dict:
    """The errors-*.jsonl record of a `RowError`, as written and read back."""
    return fileio.parse_jsonl(records.error_json(item, item.reason, "id"), "errors")[0]


def test_a_dead_letter_keeps_the_key_of_a_row_whose_key_could_be_read(tmp_path):
    path, got = _rows(
        tmp_path,
        "a.jsonl",
        b'{"id": "j0", "text": "caf\xe9", "note": "kept"}\n'  # a Latin-1 byte in the text
        b'{"id": "j1", "txt": "no text key"}\n'
        b'{"id": "j2", "text": "   "}\n'
        b'{"id": 7, "text": ["not", "text"]}\n'
        b'{"id": "j4", "text": "fine", "note": "caf\xe9"}\n',  # a bad byte elsewhere: predicted
    )
    assert got == [
        RowError(
            0,
            path,
            0,
            "j0",
            {"id": "j0", "text": "caf\\xe9", "note": "kept"},
            "text column 'text' is not UTF-8",
        ),
        RowError(
            0, path, 1, "j1", {"id": "j1", "txt": "no text key"}, "missing text column 'text'"
        ),
        RowError(0, path, 2, "j2", {"id": "j2", "text": "   "}, "empty text in column 'text'"),
        RowError(
            0,
            path,
            3,
            7,
            {"id": 7, "text": ["not", "text"]},
            "text column 'text' holds list, not text",
        ),
        InputRow(0, path, 4, "j4", "fine", None, {"id": "j4", "text": "fine", "note": "caf\\xe9"}),
    ]
    assert _dead_letter(got[0]) == {
        "id": "j0",
        "input_file": path,
        "input_row": 0,
        "raw": {"id": "j0", "text": "caf\\xe9", "note": "kept"},
        "reason": "text column 'text' is not UTF-8",
    }
    assert _dead_letter(got[3])["id"] == 7


def test_a_csv_row_with_extra_fields_keeps_its_key(tmp_path):
    path, got = _rows(tmp_path, "b.csv", b"id,text\nc0,fine\nc1,too,many\nc2\n")
    assert got[1] == RowError(
        0,
        path,
        1,
        "c1",
        {"id": "c1", "text": "too", "(extra fields)": ["many"]},
        "3 fields; the header has 2",
    )
    assert got[2] == RowError(
        0, path, 2, "c2", {"id": "c2", "text": None}, "missing text column 'text'"
    )
    assert _dead_letter(got[1])["id"] == "c1"


def test_a_dead_letter_without_a_readable_key_says_null(tmp_path):
    path, got = _rows(
        tmp_path,
        "c.jsonl",
        b'{"id": "j0", "text": "cut\n'  # not JSON
        b'["j1", "a list"]\n'
        b'{"text": "no key"}\n'
        b'{"id": "caf\xe9", "text": "x"}\n'
        b'{"id": "\\ud800", "text": "x"}\n'
        b'{"id": \xff, "text": "x"}\n',
    )
    assert [(r.row, r.key, r.reason) for r in got] == [
        (0, None, "not JSON: Unterminated string starting at: line 1 column 22 (char 21)"),
        (1, None, "not a JSON object but list"),
        (2, None, "missing key column 'id'"),
        (3, None, "key column 'id' is not UTF-8"),
        (4, None, "key column 'id' is not UTF-8"),
        (5, None, "line is not UTF-8"),
    ]
    assert [_dead_letter(r)["raw"] for r in got[3:]] == [
        {"id": "caf\\xe9", "text": "x"},
        {"id": "\\ud800", "text": "x"},
        '{"id": \\xff, "text": "x"}',
    ]


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85"])
def test_a_line_break_of_splitlines_inside_a_text_stays_in_its_row(char, tmp_path):
    data = f'{{"id": "a", "text": "one{char}row"}}\r\n\r\n{{"id": "b", "text": "{char}y"}}\n'
    path, got = _rows(tmp_path, "d.jsonl", data.encode())
    assert [(r.row, r.key, r.text) for r in got] == [
        (0, "a", f"one{char}row"),
        (1, "b", f"{char}y"),
    ]
    line = records.error_json(got[0], "failed", "id")  # the dead letter holds the text raw
    assert char in line and fileio.parse_jsonl(line, "errors")[0]["raw"]["text"] == f"one{char}row"


def test_a_csv_file_the_csv_module_gives_up_on_is_one_error_for_the_rest(tmp_path, monkeypatch):
    def refusing(text, where, delimiter):
        def records():
            yield 2, {"id": "c0", "text": "fine"}
            raise fileio.UserFileError(f"{where}:3", "not CSV: refused")

        return ["id", "text"], records()

    monkeypatch.setattr(fileio, "csv_records", refusing)
    path, got = _rows(tmp_path, "e.csv", b"id,text\nc0,fine\n")
    assert got[1] == RowError(
        0, path, None, None, None, f"after 1 rows: {path}:3: not CSV: refused"
    )


def test_the_header_check_reads_a_carriage_return_as_the_rows_do(tmp_path):
    """A lone "\\r" ends the header row for the csv module; `GFile.readline`, which the check
    once used, drops it and joined the header to the first row (fuzz finding
    tests/fuzz/corpus/batch_rows/finding-carriage-return-in-the-header)."""
    path, got = _rows(tmp_path, "a.csv", b"text,id\rhello,r1\n")
    assert rows.csv_header(path) == ["text", "id"]
    rows.check_columns(path, COLUMNS)  # no error: both columns are there
    assert got == [InputRow(0, path, 0, "r1", "hello", None, {"text": "hello", "id": "r1"})]


@pytest.mark.parametrize(
    "header",
    [
        b"a" * 65535 + b",id\r\n",  # "\r" the last byte of the first read, "\n" the next
        b'"' + b"x\r\n" * 30000 + b'",id\n',  # a quoted name spanning several reads
        b"\xef\xbb\xbftext,id\r",  # a byte-order mark and a header without a row after it
        b"",  # an empty file
    ],
    ids=["split-crlf", "quoted-newlines", "bom-no-rows", "empty"],
)
def test_the_header_check_reads_the_header_the_whole_file_gives(header, tmp_path):
    path = str(tmp_path / "a.tsv")
    data = header.replace(b",", b"\t") + b"hello\tr1\n" * 3
    fileio.write_bytes(path, data)
    whole = fileio.csv_records(fileio.decode_user_text(data, path), path, "\t")[0]
    assert fileio.csv_header(path, "\t") == whole
    assert len(whole) == 2
