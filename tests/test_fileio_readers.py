"""Every reader of a file a user gives follows `keras_bert.fileio`'s one rule: the same result with
and without a byte-order mark, one line naming the file (and byte offset) for bytes that are not
UTF-8, JSON nested too deep refused by name, CSV fields of any length, and, fuzzed from the seed
corpus in tests/corpus/readers/, nothing but that documented error for any bytes.

The readers: GLUE, CoNLL, SWAG, SQuAD, own CSV / TSV / JSONL data, a pretraining corpus,
vocab.txt (ours and keras-hub's reading), BERT configs, JSON files (labels, configs), behavioural
templates, release gates, recorded batch predictions, batch-prediction inputs (CSV / TSV / JSONL
rows and the CSV header check) and the model server's model config file.
"""

import pathlib

import hypothesis
import pytest
from hypothesis import strategies as st

from keras_bert import fileio
from keras_bert.batch_prediction import records, rows
from keras_bert.checkpoints import keras_hub_preset
from keras_bert.config import BertConfig
from keras_bert.data import conll, glue, pretraining_data, squad, swag, text_files
from keras_bert.evaluation import behaviour, recorded_predictions, release_gate
from keras_bert.tokenization import full_tokenizer
from serving import server

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus" / "readers"
HOSTILE = sorted(CORPUS.glob("hostile_*"))
BATCH_COLUMNS = rows.Columns("text", key="id")


def _recorded(path):
    return recorded_predictions._jsonl(fileio.parent(path), [fileio.basename(path)])


# name -> (seed file in CORPUS, the reader called on a path). Each reads the seed without error.
READERS = {
    "glue": ("glue_sst2_train.tsv", lambda p: glue.read_tsv_file(p, "sst2", "train", "raise")),
    "conll": ("conll.txt", conll.read_conll),
    "swag": ("swag.csv", swag.read_swag),
    "squad": ("squad.json", squad.read_squad_examples),
    "own csv": ("own.csv", lambda p: text_files.read_text_file(p, "text", None, "label")),
    "own tsv": ("own.tsv", lambda p: text_files.read_text_file(p, "text", None, "label")),
    "own jsonl": ("own.jsonl", lambda p: text_files.read_text_file(p, "text", None, "label")),
    "corpus": ("corpus.txt", pretraining_data.read_raw_documents),
    "vocab": ("vocab.txt", full_tokenizer.load_vocab),
    "keras-hub vocab": ("vocab.txt", keras_hub_preset._vocabulary_lines),
    "bert config": ("bert_config.json", BertConfig.from_json_file),
    "json": ("labels.json", fileio.read_json),
    "templates": ("templates.jsonl", lambda p: behaviour.read_template_file(p, ["neg", "pos"])),
    "gate": ("gate.json", lambda p: release_gate.read_gate(p, None)),
    "recorded predictions": ("batch.jsonl", _recorded),
    "batch csv": ("batch.csv", lambda p: list(rows.read_rows(0, p, BATCH_COLUMNS))),
    "batch tsv": ("batch.tsv", lambda p: list(rows.read_rows(0, p, BATCH_COLUMNS))),
    "batch jsonl": ("batch.jsonl", lambda p: list(rows.read_rows(0, p, BATCH_COLUMNS))),
    "batch csv header": ("batch.csv", rows.csv_header),
    "model server config": ("model.config", lambda p: server.model_configs(model_config_file=p)),
}
# Batch prediction refuses bytes that are not UTF-8 row by row (the row goes to errors-*.jsonl).
ROW_BY_ROW = ("batch csv", "batch tsv", "batch jsonl", "batch csv header")


def _read(name, tmp_path, data: bytes):
    seed, read = READERS[name]
    path = str(tmp_path / seed)  # the same path every time: results name it
    fileio.write_bytes(path, data)
    return read(path), path


@pytest.mark.parametrize("name", READERS)
def test_a_byte_order_mark_changes_nothing(name, tmp_path):
    data = (CORPUS / READERS[name][0]).read_bytes()
    plain, _ = _read(name, tmp_path, data)
    marked, _ = _read(name, tmp_path, fileio.BYTE_ORDER_MARK + data)
    assert marked == plain
    assert plain  # the seed gives something to compare


def test_the_readers_read_the_seeds_as_written(tmp_path):
    def read(name):
        return _read(
            name, tmp_path, fileio.BYTE_ORDER_MARK + (CORPUS / READERS[name][0]).read_bytes()
        )[0]

    assert [(s.words, s.document) for s in read("conll")] == [
        (("EU", "rejects", "German"), 0),
        (("Peter", "Blackburn"), 0),
    ]
    assert [e.endings[0] for e in read("swag")] == ['stands, then "waves".', "laughs."]
    assert [(e.text_a, e.label) for e in read("own jsonl")] == [
        ("good \u2028 film", "pos"),
        ("bad", "neg"),
    ]
    assert [(e.text_a, e.label) for e in read("own tsv")] == [
        ('not "quoted" ok', "pos"),
        ("bad", "neg"),
    ]
    assert list(read("vocab"))[:1] == ["[PAD]"] and read("keras-hub vocab")[-1] == "café"
    assert [(r.key, r.text) for r in read("batch jsonl")] == [
        ("r1", "good\u2028film"),
        ("r2", "bad"),
    ]
    assert read("batch csv header") == ["id", "text"]
    assert read("glue")[0].text_a == "it is a good film "
    assert read("templates")[0]["texts"] == ["a great film", "a good film"]


@pytest.mark.parametrize("name", [n for n in READERS if n not in ROW_BY_ROW])
def test_bytes_that_are_not_utf8_are_one_error_naming_the_file_and_offset(name, tmp_path):
    data = (CORPUS / READERS[name][0]).read_bytes()
    cut = data.index(b"\n") + 1  # the start of the second line
    with pytest.raises(ValueError) as e:
        _read(name, tmp_path, fileio.BYTE_ORDER_MARK + data[:cut] + b"\xff" + data[cut:])
    path = str(tmp_path / READERS[name][0])
    assert (
        f"{path}: not UTF-8 text: byte 0xff at byte offset {cut + 3} (line 2) (invalid start "
        "byte); save the file as UTF-8"
    ) in str(e.value)


@pytest.mark.parametrize("name", ["squad", "json", "bert config", "gate", "templates", "own jsonl"])
def test_json_nested_too_deep_is_one_error_naming_the_file(name, tmp_path):
    deep = b"[" * 5000 + b"]" * 5000
    with pytest.raises(ValueError) as e:
        _read(name, tmp_path, deep + (b"\n" if name in ("templates", "own jsonl") else b""))
    assert str(tmp_path / READERS[name][0]) in str(e.value)
    assert "not JSON: arrays or objects nested deeper than 100 levels" in str(e.value)


def test_a_deep_batch_prediction_line_is_a_row_error(tmp_path):
    deep = b'{"id": "r0", "text": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"
    got, path = _read("batch jsonl", tmp_path, deep + b'{"id": "r1", "text": "fine"}\n')
    assert got == [
        rows.RowError(
            0,
            path,
            0,
            None,
            deep.decode().strip(),
            "not JSON: arrays or objects nested deeper than 100 levels",
        ),
        rows.InputRow(0, path, 1, "r1", "fine", None, {"id": "r1", "text": "fine"}),
    ]


BIG = "x" * (200 * 1024)  # over the csv module's default field limit of 131,072 characters


@pytest.mark.parametrize(
    "name, text, field",
    [
        ("own csv", f'text,label\n"{BIG}",pos\nshort,neg\n', lambda r: r[0].text_a),
        ("own tsv", f"text\tlabel\n{BIG}\tpos\nshort\tneg\n", lambda r: r[0].text_a),
        (
            "swag",
            (CORPUS / "swag.csv").read_text().replace("sleeps.", BIG),
            lambda r: r[0].endings[2],
        ),
        ("batch csv", f"id,text\nr1,{BIG}\n", lambda r: r[0].text),
        ("batch tsv", f"id\ttext\nr1\t{BIG}\n", lambda r: r[0].text),
    ],
)
def test_a_csv_field_over_128_kib_is_read(name, text, field, tmp_path):
    got, _ = _read(name, tmp_path, text.encode())
    assert field(got) == BIG


def test_squad_json_without_its_fields_is_refused_by_name(tmp_path):
    cases = {
        '{"data": [{"title": "t"}]}': "a field 'paragraphs' is missing",
        '{"data": [["not an article"]]}': "list indices must be integers or slices, not str",
        '{"data": [{"paragraphs": [{"context": "c", "qas": [{"id": "q", "question": "?", '
        '"answers": [{"text": "c", "answer_start": "one"}]}]}]}]}': (
            "question q: answer_start 'one' is not an integer"
        ),
    }
    for text, problem in cases.items():
        with pytest.raises(ValueError) as e:
            _read("squad", tmp_path, text.encode())
        assert str(e.value) == f"{tmp_path / 'squad.json'} is not SQuAD JSON: {problem}"


# ------------------------------------------------------------------------------ fuzzing
# Byte strings a hostile or careless file holds; the fuzzer inserts them anywhere in a seed.
_INSERTS = [
    fileio.BYTE_ORDER_MARK,
    b"\xff",
    b"\xe9",
    b"\r",
    b"\n",
    b"\r\n",
    b"\x00",
    "\u2028".encode(),
    "\x85".encode(),
    b"\x0b\x0c\x1c",
    b'"',
    b",",
    b"\t",
    b"[" * 150,
    b"{",
    b"}",
    b"\\ud800",
    b"-DOCSTART- -X- -X- O\n",
    b" B-PER",
    b"null",
    b"1e999",
]
_EDITS = st.lists(
    st.tuples(
        st.floats(0, 1), st.sampled_from(_INSERTS) | st.binary(max_size=4), st.integers(0, 3)
    ),
    max_size=4,
)
FUZZED = [n for n in READERS if n != "model server config"]  # text_format's ParseError: its own


def _mutated(seed: bytes, edits) -> bytes:
    """`seed` with each (where, bytes, deleted) edit: `deleted` bytes at `where` replaced."""
    for where, insert, deleted in edits:
        at = int(where * len(seed))
        seed = seed[:at] + insert + seed[at + deleted :]
    return seed


@pytest.mark.parametrize("name", FUZZED)
def test_fuzzed_files_read_or_fail_with_one_line_naming_the_file(name, tmp_path_factory):
    seeds = [CORPUS / READERS[name][0]] + HOSTILE
    directory = tmp_path_factory.mktemp(name.replace(" ", "_"))

    @hypothesis.settings(max_examples=30, deadline=None, database=None)
    @hypothesis.given(st.sampled_from(seeds), _EDITS)
    def read_mutated(seed, edits):
        data = _mutated(seed.read_bytes(), edits)
        try:
            got, path = _read(name, directory, data)
        except ValueError as e:  # the documented error of every reader (UserFileError among them)
            message = str(e)
            assert str(directory / READERS[name][0]) in message, message
            assert "\n" not in message, message
            return
        if name in ROW_BY_ROW[:3]:  # batch rows: never an exception; every dead letter writable
            for item in got:
                records.error_json(item, getattr(item, "reason", "failed"), "id").encode("utf-8")

    read_mutated()


# ------------------------------------------------------------------------------ one rule, one place
ROOT = pathlib.Path(__file__).resolve().parents[1]
# Decoding or splitting a file's text outside keras_bert/fileio.py: `str.splitlines()` (which cuts
# at U+2028 and others), `fileio.read_text` (no byte-order-mark rule), "utf-8-sig" by hand.
OWN_RULE = ("splitlines(", "fileio.read_text(", "utf-8-sig")
# Lines that split text that is not a file's: the line -> why.
NOT_A_FILE = {
    "parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])": "a docstring",
    'lines = [line for line in str(e).splitlines() if "error:" in line] or str(e).splitlines()': (
        "a converter's error message"
    ),
    "first = text.strip().splitlines()[0] if text.strip() else type(error).__name__": (
        "an error message"
    ),
    "other breaks of `str.splitlines()`), CSV fields of any length; bytes that are not UTF-8 "
    "refuse": "a docstring",
}


def test_no_module_decodes_or_splits_a_users_file_by_its_own_rule():
    found = []
    for top in ("keras_bert", "recipes", "serving", "export"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == ROOT / "keras_bert" / "fileio.py":
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
                if any(s in line for s in OWN_RULE) and line.strip() not in NOT_A_FILE:
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
