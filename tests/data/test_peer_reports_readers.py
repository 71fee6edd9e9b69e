"""What peers reported about the data files users give (pandas read_csv / read_json, Python's csv
module, JSON Lines readers), checked against our readers: each test names the report
(repo#number) and the value we expect for the same bytes.

The readers: own data (`text_files.read_text_file`: CSV, TSV, JSONL), GLUE TSVs
(`glue.read_tsv_file`), CoNLL (`conll.read_conll`), SWAG CSV (`swag.read_swag`), SQuAD JSON
(`squad.read_squad_examples`) and batch-prediction rows (`rows.read_rows`, `rows.check_columns`).
"""

import pytest

from keras_bert.batch_prediction import rows
from keras_bert.data import conll, glue, squad, swag, text_files
from keras_bert.data.conll import NerSentence
from keras_bert.data.glue import InputExample

BATCH = rows.Columns("text", key="id")
NOT_UTF8_AT_0 = (
    "not UTF-8 text: byte 0xff at byte offset 0 (line 1) (invalid start byte); save the file as "
    "UTF-8"
)
SWAG_HEADER = (
    "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label"
)


def _file(tmp_path, name, data) -> str:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(path)


def _own(path, **columns):
    return [(e.guid, e.text_a, e.label) for e in text_files.read_text_file(path, **columns)]


def _batch(path):
    """(row, key, text) of each InputRow; (row, key, reason) of each RowError."""
    return [
        (r.row, r.key, r.text if isinstance(r, rows.InputRow) else r.reason)
        for r in rows.read_rows(0, path, BATCH)
    ]


# ---------------------------------------------------------------- byte-order marks, encodings
def test_a_byte_order_mark_before_a_quoted_header_leaves_the_names_clean(tmp_path):
    """pandas-dev/pandas#4793 and #13497: with a UTF-8 BOM before a quoted header, the first
    column's name kept the BOM and its quote ('\\ufeff"Name"'). Expected: the names as typed
    ("text", "id"), so the columns are found, in own data and in batch prediction."""
    own = _file(tmp_path, "own.csv", b'\xef\xbb\xbf"text","label"\r\n"hi",pos\r\nlo,neg\r\n')
    assert _own(own) == [("own.csv-2", "hi", "pos"), ("own.csv-3", "lo", "neg")]
    batch = _file(tmp_path, "batch.csv", b'\xef\xbb\xbf"id","text"\r\n1,a\r\n')
    assert rows.csv_header(batch) == ["id", "text"]
    rows.check_columns(batch, BATCH)
    assert _batch(batch) == [(0, "1", "a")]


@pytest.mark.parametrize(
    "name, read",
    [
        ("own.csv", text_files.read_text_file),
        ("own.jsonl", text_files.read_text_file),
        ("train.tsv", lambda p: glue.read_tsv_file(p, "sst2", "train", "raise")),
        ("train.txt", conll.read_conll),
        ("swag.csv", swag.read_swag),
        ("squad.json", squad.read_squad_examples),
    ],
)
def test_a_utf16_file_is_refused_naming_the_encoding_problem(tmp_path, name, read):
    """vividvilla/csvtotable#35 and csv2db/csv2db#50 (a UTF-16 file: "'utf-8' codec can't decode
    byte 0xff in position 0"). Expected: one line naming the file, the byte and what to do."""
    path = _file(tmp_path, name, "text,label\nhi,pos\n".encode("utf-16"))
    with pytest.raises(ValueError) as info:
        read(path)
    assert str(info.value) == f"{path}: {NOT_UTF8_AT_0}"


def test_a_utf16_batch_file_is_refused_before_the_run_showing_its_bytes(tmp_path):
    """csv2db/csv2db#50, in batch prediction (which refuses undecodable bytes row by row): the
    header check before the run. Expected: refused, the header's bytes shown as \\xNN (the
    UTF-16 byte-order mark ff fe, then NULs)."""
    path = _file(tmp_path, "batch.csv", "id,text\n1,hi\n".encode("utf-16"))
    with pytest.raises(ValueError) as info:
        rows.check_columns(path, BATCH)
    assert str(info.value) == (
        f"{path}: no column(s) ['text', 'id']; columns present: "
        "['\\\\xff\\\\xfei\\x00d\\x00', '\\x00t\\x00e\\x00x\\x00t\\x00']"
    )


def test_a_nul_byte_inside_a_field_is_text(tmp_path):
    """facebook/ThreatExchange#298 and codeinthehole/csvfilter#8 ("_csv.Error: line contains
    NUL"). Expected (the csv module of Python 3.11 reads NUL): the field keeps its NUL, no
    error, in own data and batch rows."""
    own = _file(tmp_path, "own.csv", "text,label\n2\x003,pos\nb,neg\n")
    assert _own(own) == [("own.csv-2", "2\x003", "pos"), ("own.csv-3", "b", "neg")]
    batch = _file(tmp_path, "batch.csv", "id,text\n1,a\x00b\n")
    assert _batch(batch) == [(0, "1", "a\x00b")]


# ---------------------------------------------------------------- quoting
def test_quoted_fields_with_embedded_line_breaks_are_one_record(tmp_path):
    """pmgraham/datagrunt#87 (quoted embedded newlines counted as rows) and
    JoshClose/CsvHelper#550 (a CR/LF inside quotes ended the record). Expected: one record per
    quoted multi-line field, its line breaks kept byte for byte ("\\r\\n", "\\n", a lone
    "\\r"), the guid the line where the record ends, batch rows counted as records."""
    own = _file(
        tmp_path, "own.csv", 'text,label\n"line1\r\nline2",pos\r\n"a\nb",neg\r\n"c\rd",pos\r\n'
    )
    assert _own(own) == [
        ("own.csv-3", "line1\r\nline2", "pos"),
        ("own.csv-5", "a\nb", "neg"),
        ("own.csv-7", "c\rd", "pos"),
    ]
    batch = _file(tmp_path, "batch.csv", 'id,text\r\n1,"x\r\ny"\r\n2,z\r\n')
    assert _batch(batch) == [(0, "1", "x\r\ny"), (1, "2", "z")]


def test_doubled_quotes_inside_a_quoted_field_are_one_quote(tmp_path):
    """queryverse/TextParse.jl#40 and frictionlessdata/frictionless-py#142 (RFC 4180 "" escapes
    not understood). Expected: 'Fred "Big Freddy" Fredson', in CSV and in own-data TSV."""
    csv_path = _file(tmp_path, "own.csv", 'text,label\n"Fred ""Big Freddy"" Fredson",pos\n')
    tsv_path = _file(tmp_path, "own.tsv", 'text\tlabel\n"Fred ""Big Freddy"" Fredson"\tpos\n')
    assert _own(csv_path) == [("own.csv-2", 'Fred "Big Freddy" Fredson', "pos")]
    assert _own(tsv_path) == [("own.tsv-2", 'Fred "Big Freddy" Fredson', "pos")]


def test_backslash_escaped_quotes_are_refused_instead_of_splitting_the_text(tmp_path):
    """pandas-dev/pandas#18382 and #16682: '"follow \\"buyers what they want,\\" and to "' is
    not RFC 4180 (no backslash escapes); the comma inside split the field. Expected: refused
    naming the line (own data), or that row alone refused keeping its key (batch), never a
    text silently cut at the comma."""
    own = _file(
        tmp_path,
        "own.csv",
        'date,text,label\n2014,"follow \\"buyers what they want,\\" and to ",pos\n2015,ok,neg\n',
    )
    with pytest.raises(ValueError) as info:
        text_files.read_text_file(own)
    assert str(info.value) == f"{own}:2: 1 more field(s) than the header"
    batch = _file(tmp_path, "batch.csv", 'id,text\n1,"say \\"hi, there\\" now"\n2,ok\n')
    assert _batch(batch) == [(0, "1", "3 fields; the header has 2"), (1, "2", "ok")]


def test_quotes_inside_an_unquoted_tsv_field_are_kept_and_a_stray_opening_quote_is_refused(
    tmp_path,
):
    """activeviam/atoti-notebooks#135 ('Rate my "BDP" (Bear Denial Picks)' in a delimited file;
    "Double-quote not closed"). Expected in own-data TSV (csv quoting): quotes inside a field
    are characters; a field opening a quote it never closes swallows the rows after it and is
    refused naming the line where the file ends, never taken as fewer rows."""
    mid = _file(tmp_path, "mid.tsv", 'text\tlabel\nRate my "BDP" (Bear Denial Picks)\tpos\n')
    assert _own(mid) == [("mid.tsv-2", 'Rate my "BDP" (Bear Denial Picks)', "pos")]
    stray = _file(tmp_path, "stray.tsv", 'text\tlabel\n"Hello world\tpos\nbye\tneg\nok\tpos\n')
    with pytest.raises(ValueError) as info:
        text_files.read_text_file(stray)
    assert str(info.value) == f"{stray}:4: fewer fields than the header"


# ---------------------------------------------------------------- delimiters and headers
def test_a_trailing_delimiter_on_each_row_is_refused_instead_of_shifting_columns(tmp_path):
    """pandas-dev/pandas#14124 and #15203 (a trailing comma on the data rows made pandas take
    the first column as the index, shifting every name by one). Expected: refused naming the
    line (own data); that row refused with its key, the others read (batch)."""
    own = _file(tmp_path, "own.csv", "text,label,x\na,pos,1,\nb,neg,2,\n")
    with pytest.raises(ValueError) as info:
        text_files.read_text_file(own)
    assert str(info.value) == f"{own}:2: 1 more field(s) than the header"
    batch = _file(tmp_path, "batch.csv", "id,text\n1,hello,\n2,bye\n")
    assert _batch(batch) == [(0, "1", "3 fields; the header has 2"), (1, "2", "bye")]


@pytest.mark.parametrize(
    "name, data, read, column",
    [
        (
            "own.csv",
            "text,label,text\nfirst,pos,second\n",
            text_files.read_text_file,
            "text",
        ),
        (
            "batch.tsv",
            "id\ttext\ttext\n1\tfirst\tsecond\n",
            lambda p: rows.check_columns(p, BATCH),
            "text",
        ),
        (
            "swag.csv",
            SWAG_HEADER + ",ending0\nv,1,s,A,B,gold,e0,e1,e2,e3,2,other\n",
            swag.read_swag,
            "ending0",
        ),
    ],
    ids=["own-data", "batch-prediction", "swag"],
)
def test_a_header_naming_a_used_column_twice_is_refused(tmp_path, name, data, read, column):
    """pandas-dev/pandas#14704, #7160 and #19383 (duplicate column names: pandas renames the
    second to "text.1"; with the names kept, data was overwritten). Expected: a header that
    names a column the reader uses twice is refused, naming the file and the column (the second
    column's value was taken silently)."""
    path = _file(tmp_path, name, data)
    with pytest.raises(ValueError) as info:
        read(path)
    assert path in str(info.value) and repr(column) in str(info.value), str(info.value)


def test_blank_lines_are_skipped_and_a_row_of_empty_fields_is_refused(tmp_path):
    """santiagobasulto/smartcsv#9 and adaltas/node-csv-parse#107 (",,," rows from a
    spreadsheet export, and blank lines). Expected: blank lines are no rows; a row of empty
    fields is refused naming its line (own data), or refused alone (batch), the rows counted
    without the blank lines."""
    own = _file(tmp_path, "own.csv", "text,label\n\na,pos\n,\n\nb,neg\n")
    with pytest.raises(ValueError) as info:
        text_files.read_text_file(own)
    assert str(info.value) == f"{own}:4: empty label in column 'label'"
    batch = _file(tmp_path, "batch.csv", "id,text\n\n1,a\n,\n\n2,b\n")
    assert _batch(batch) == [(0, "1", "a"), (1, "", "empty text in column 'text'"), (2, "2", "b")]


def test_fields_longer_than_the_csv_modules_limit_are_read_whole(tmp_path):
    """wireservice/csvkit#812, turicas/rows#299 and simonw/datasette-lite#84 ("_csv.Error:
    field larger than field limit (131072)"). Expected: a 200,000-character text read whole in
    own-data CSV and SWAG, a 300,000-character one in batch TSV, and a 200,000-character column
    name in the batch header check."""
    long_text = "x" * 200_000
    own = _file(tmp_path, "own.csv", f'text,label\n"{long_text}",pos\n')
    assert _own(own) == [("own.csv-2", long_text, "pos")]
    swag_path = _file(
        tmp_path, "swag.csv", f'{SWAG_HEADER}\nv,1,s,A,B,gold,"{long_text}",b,c,d,2\n'
    )
    assert swag.read_swag(swag_path)[0].endings == (long_text, "b", "c", "d")
    batch = _file(tmp_path, "batch.tsv", "id\ttext\n1\t" + "y" * 300_000 + "\n")
    assert _batch(batch) == [(0, "1", "y" * 300_000)]
    header = _file(tmp_path, "header.csv", "id," + "h" * 200_000 + "\n1,a\n")
    assert rows.csv_header(header) == ["id", "h" * 200_000]


# ---------------------------------------------------------------- line ends
def test_crlf_lf_and_cr_line_ends_mixed_in_one_csv_are_rows(tmp_path):
    """juspay/neurolink#1099 (support CRLF and CR line endings) and OpenTreeMap/otm-core#1998
    (an Excel for Mac CSV, CR only: "new-line character seen in unquoted field"). Expected:
    each of "\\r\\n", "\\n" and "\\r" ends a CSV row, in own data and batch rows."""
    own = _file(tmp_path, "own.csv", "text,label\r\na,pos\nb,neg\rc,pos\r\n")
    assert _own(own) == [
        ("own.csv-2", "a", "pos"),
        ("own.csv-3", "b", "neg"),
        ("own.csv-4", "c", "pos"),
    ]
    batch = _file(tmp_path, "batch.csv", "id,text\r1,a\r2,b\r")
    assert _batch(batch) == [(0, "1", "a"), (1, "2", "b")]


def test_windows_line_ends_in_glue_conll_and_jsonl_files_are_read(tmp_path):
    """juspay/neurolink#1099 (CRLF files from Windows). Expected: "\\r\\n" ends a line in GLUE
    TSVs, CoNLL files and JSON Lines, the "\\r" never part of a label, tag or value."""
    tsv = _file(tmp_path, "train.tsv", "sentence\tlabel\r\nhello\t1\r\nbye\t0\r\n")
    assert glue.read_tsv_file(tsv, "sst2", "train", "raise") == [
        InputExample("train-2", "hello", None, "1"),
        InputExample("train-3", "bye", None, "0"),
    ]
    txt = _file(
        tmp_path,
        "train.txt",
        "-DOCSTART- -X- O O\r\n\r\nEU NNP B-NP B-ORG\r\nrejects VBZ B-VP O\r\n\r\n",
    )
    assert conll.read_conll(txt) == [NerSentence(("EU", "rejects"), ("B-ORG", "O"), 0)]
    jsonl = _file(tmp_path, "own.jsonl", '{"text":"a","label":"p"}\r\n{"text":"b","label":"n"}\n')
    assert _own(jsonl) == [("own.jsonl-1", "a", "p"), ("own.jsonl-2", "b", "n")]


def test_a_cr_only_glue_file_is_not_read_as_empty(tmp_path):
    """BaseXdb/basex#164 and evanplaice/jquery-csv#18 (CR-only line ends, as Excel for Mac
    writes them, read as one line). Expected: a CR-only GLUE TSV is never an empty split:
    either its rows are read or it is refused naming the file."""
    path = _file(tmp_path, "train.tsv", "sentence\tlabel\rhello\t1\rbye\t0\r")
    try:
        examples = glue.read_tsv_file(path, "sst2", "train", "raise")
    except ValueError as e:
        assert str(e).startswith(f"{path}:")
        return
    assert examples == [
        InputExample("train-2", "hello", None, "1"),
        InputExample("train-3", "bye", None, "0"),
    ]


def test_a_cr_only_conll_file_is_not_read_as_one_token(tmp_path):
    """BaseXdb/basex#164 (CR-only line ends thrown into one line), in a CoNLL file. Expected:
    the two sentences, or a refusal naming the file; here one sentence ("EU",) tagged B-PER,
    the last tag of the file."""
    path = _file(tmp_path, "train.txt", "EU B-ORG\rrejects O\r\rPeter B-PER\r")
    try:
        sentences = conll.read_conll(path)
    except ValueError as e:
        assert str(e).startswith(f"{path}:")
        return
    assert sentences == [
        NerSentence(("EU", "rejects"), ("B-ORG", "O"), 0),
        NerSentence(("Peter",), ("B-PER",), 0),
    ]


def test_a_cr_only_jsonl_file_is_refused_naming_its_line(tmp_path):
    """BaseXdb/basex#164 (CR-only line ends), in JSON Lines, whose lines end at "\\n" only.
    Expected: refused, naming line 1 and the JSON error (two objects on one line)."""
    path = _file(tmp_path, "own.jsonl", '{"text":"a","label":"p"}\r{"text":"b","label":"n"}\r')
    with pytest.raises(ValueError) as info:
        text_files.read_text_file(path)
    assert str(info.value) == f"{path}:1: not JSON: Extra data: line 1 column 26 (char 25)"


# ---------------------------------------------------------------- JSON Lines
def test_blank_and_whitespace_only_jsonl_lines_are_skipped(tmp_path):
    """pandas-dev/pandas#17615, microsoft/graphrag#2424 and microsoft/PyRIT#1479 (a blank line
    between records raised JSONDecodeError or dropped the file). Expected: blank,
    whitespace-only and CRLF-blank lines skipped; guids keep the physical line numbers; batch
    rows count records only."""
    data = '{"id":1,"text":"a","label":"p"}\r\n\r\n  \t\r\n\n{"id":2,"text":"b","label":"n"}\n'
    own = _file(tmp_path, "own.jsonl", data)
    assert _own(own) == [("own.jsonl-1", "a", "p"), ("own.jsonl-5", "b", "n")]
    batch = _file(tmp_path, "batch.jsonl", data)
    assert _batch(batch) == [(0, 1, "a"), (1, 2, "b")]


@pytest.mark.parametrize(
    "ending", ["", "\n\n\n", "\r\n\r\n"], ids=["no-final-newline", "newlines", "crlfs"]
)
def test_the_last_jsonl_line_is_read_with_or_without_line_ends_after_it(tmp_path, ending):
    """Modalities/modalities#395 (the last record, without "\\n", concatenated with the next
    file), quinnj/JSON3.jl#263 (two trailing newlines failed) and ckan/ckanapi#80 (a trailing
    newline raised). Expected: both records, whatever follows the last one."""
    data = '{"id":1,"text":"a","label":"p"}\n{"id":2,"text":"b","label":"n"}' + ending
    own = _file(tmp_path, "own.jsonl", data)
    assert _own(own) == [("own.jsonl-1", "a", "p"), ("own.jsonl-2", "b", "n")]
    batch = _file(tmp_path, "batch.jsonl", data)
    assert _batch(batch) == [(0, 1, "a"), (1, 2, "b")]
