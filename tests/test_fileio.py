"""keras_bert.fileio: URIs kept as typed, whole-or-nothing writes, directories published whole,
one-line errors for file systems that cannot be reached."""

import hypothesis
import pytest
from hypothesis import strategies as st

from keras_bert import fileio


def test_join_and_parent_keep_a_uri_intact():
    assert (
        fileio.join("gs://bucket/run", "best", "config.json") == "gs://bucket/run/best/config.json"
    )
    assert fileio.parent("gs://bucket/run/config.json") == "gs://bucket/run"
    assert fileio.basename("gs://bucket/run/") == "run"
    assert fileio.join("runs/a", "b") == "runs/a/b"
    assert (fileio.scheme("GS://b/x"), fileio.scheme("runs/x"), fileio.scheme("ram://x")) == (
        "gs",
        "",
        "ram",
    )
    assert (
        fileio.is_local("file:///x"),
        fileio.is_object_store("s3://b"),
        fileio.is_local("ram://x"),
    ) == (True, True, False)


@pytest.mark.parametrize("base", ["ram://fileio_test", None])
def test_write_read_and_publish_a_directory(base, tmp_path):
    base = base or str(tmp_path)
    fileio.makedirs(fileio.join(base, "a"))
    fileio.write_json(fileio.join(base, "a", "config.json"), {"b": 2, "a": 1})
    assert fileio.read_text(fileio.join(base, "a", "config.json")) == '{\n  "a": 1,\n  "b": 2\n}\n'
    assert fileio.listdir(fileio.join(base, "a")) == ["config.json"]  # no temporary file left
    final = fileio.join(base, "export", "1")
    staged = fileio.staging_dir(final)
    fileio.write_text(fileio.join(staged, "saved_model.pb"), "pb")
    fileio.makedirs(fileio.join(staged, "variables"))
    fileio.write_bytes(fileio.join(staged, "variables", "v.index"), b"\x00\x01")
    assert not fileio.is_complete(staged)
    fileio.publish_dir(staged, final)
    assert fileio.listdir(fileio.join(base, "export")) == ["1"]  # the staging dir is gone
    assert fileio.listdir(final) == [fileio.COMPLETE_MARKER, "saved_model.pb", "variables"]
    assert fileio.read_bytes(fileio.join(final, "variables", "v.index")) == b"\x00\x01"
    assert fileio.is_complete(final)
    with pytest.raises(FileExistsError):
        fileio.publish_dir(fileio.staging_dir(final), final)


@pytest.mark.parametrize("base", ["ram://fileio_local_writer", None])
def test_a_local_only_writer_publishes_whole_or_nothing(base, tmp_path):
    base = base or str(tmp_path)
    fileio.makedirs(base)
    target = fileio.join(base, "best.weights.h5")
    with fileio.writing_local_file(target, ".weights.h5") as local:
        assert local.endswith("/file.weights.h5") and not fileio.exists(target)
        with open(local, "wb") as f:  # the writer: a local file only
            f.write(b"new weights")
    assert fileio.read_bytes(target) == b"new weights"
    with pytest.raises(RuntimeError, match="writer failed"):
        with fileio.writing_local_file(target, ".weights.h5") as local:
            with open(local, "wb") as f:
                f.write(b"half")
            raise RuntimeError("writer failed")
    assert fileio.read_bytes(target) == b"new weights"  # the old content, whole
    assert fileio.listdir(base) == ["best.weights.h5"]  # no temporary file or directory left


def test_an_unregistered_scheme_fails_in_one_line_naming_the_uri():
    with pytest.raises(fileio.UnreachablePathError) as e:
        fileio.check_reachable("s3://bucket/glue/sst2", "data dir")
    assert str(e.value) == (
        "cannot reach data dir s3://bucket/glue/sst2: File system scheme 's3' not implemented "
        "(file: 's3://bucket/glue/sst2')"
    )


def test_a_file_system_that_does_not_answer_fails_after_the_timeout(monkeypatch):
    import threading

    never = threading.Event()
    import tensorflow as tf

    monkeypatch.setattr(tf.io.gfile, "exists", lambda path: never.wait(5))
    with pytest.raises(fileio.UnreachablePathError) as e:
        fileio.check_reachable("gs://bucket/run", "output dir", timeout=0.2)
    assert (
        str(e.value)
        == "cannot reach output dir gs://bucket/run: no answer from its file system in 0.2 s"
    )
    never.set()


def test_local_files_without_tensorflow_give_what_tf_io_gfile_gives(tmp_path):
    """A process that has not imported TensorFlow (a LiteRT-only server) reads and writes local
    paths through `os`; every operation gives what it gives through tf.io.gfile, and TensorFlow
    stays unloaded."""
    import json
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT
    from tests.fileio_scenario import scenario

    script = (
        "import json, sys\n"
        "from keras_bert import fileio\n"
        "from tests.fileio_scenario import scenario\n"
        "out = scenario(fileio, sys.argv[1])\n"
        "print(json.dumps({'out': out, 'tensorflow': 'tensorflow' in sys.modules}))\n"
    )
    (tmp_path / "posix").mkdir()
    (tmp_path / "gfile").mkdir()
    run = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "posix")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    posix = json.loads(run.stdout.strip().splitlines()[-1])
    assert posix["tensorflow"] is False
    assert fileio._files(str(tmp_path)) is not fileio._PosixFiles  # this process has TensorFlow
    gfile = json.loads(json.dumps(scenario(fileio, str(tmp_path / "gfile"))))
    assert posix["out"] == gfile
    assert gfile["text"] == "x\r\ny\n" and gfile["listdir"] == [".hidden", "b", "config.json"]
    assert gfile["read_missing"] == "FileNotFoundError" and gfile["copy_again"] is not None


# Files a user gives: one decoding rule, one line rule, one JSON Lines form.

# Characters `str.splitlines()` splits at besides "\n" and "\r". JSON allows the first three raw
# inside a string (our writer writes them raw); the control characters it escapes ("\u000b").
RAW_IN_JSON = ["\u2028", "\u2029", "\x85"]
LINE_BREAKS_OF_SPLITLINES = RAW_IN_JSON + ["\v", "\f", "\x1c", "\x1d", "\x1e"]


@pytest.mark.parametrize("char", LINE_BREAKS_OF_SPLITLINES)
def test_a_json_line_is_cut_at_newline_only(char, tmp_path):
    assert len(("a" + char + "b").splitlines()) == 2  # what the rule guards against
    records = [{"id": 1, "text": f"before{char}after"}, {"id": 2, "text": char}]
    path = str(tmp_path / "x.jsonl")
    fileio.write_jsonl(path, records)
    written = fileio.read_text(path)
    assert written.count("\n") == 2 and (char in written) == (char in RAW_IN_JSON)
    assert fileio.read_jsonl(path) == records
    # The character raw in a hand-written file, with Windows line ends and a blank line.
    fileio.write_text(path, f'{{"id": 1, "text": "before{char}after"}}\r\n\r\n{{"id": 2}}\r\n')
    if char in RAW_IN_JSON:
        assert fileio.read_jsonl(path) == [{"id": 1, "text": f"before{char}after"}, {"id": 2}]
    else:  # not JSON (a raw control character), but one line: not "Unterminated string"
        with pytest.raises(fileio.UserFileError) as e:
            fileio.read_jsonl(path)
        assert str(e.value) == (
            f"{path}:1: not JSON: Invalid control character at: line 1 column 26 (char 25)"
        )
    assert list(fileio.jsonl_lines(f'{{"a": "{char}"}}\r\n\n{{"b": 1}}')) == [
        (1, f'{{"a": "{char}"}}'),
        (3, '{"b": 1}'),
    ]
    assert fileio.text_lines(f"one{char}line\r\ntwo") == [f"one{char}line", "two"]


def test_text_lines_split_at_newline_and_drop_one_carriage_return():
    assert fileio.text_lines("a\r\nb\u2028c\n\nd") == ["a", "b\u2028c", "", "d"]
    assert fileio.text_lines("a\n") == ["a"]
    assert fileio.text_lines("") == []
    assert fileio.text_lines("a\r\r\n") == ["a\r"]


def test_a_line_that_utf8_cannot_encode_is_written_escaped():
    record = {"text": "lone \ud800 surrogate \u2028 é"}
    line = fileio.jsonl_line(record)
    assert line == '{"text": "lone \\ud800 surrogate \\u2028 \\u00e9"}'
    assert fileio.jsonl_line({"text": "é\u2028"}) == '{"text": "é\u2028"}'


def test_a_bad_json_line_names_the_file_and_line(tmp_path):
    path = str(tmp_path / "x.jsonl")
    fileio.write_text(path, '{"a": 1}\n\n{"a": \n')
    with pytest.raises(fileio.UserFileError) as e:
        fileio.read_jsonl(path)
    assert str(e.value) == f"{path}:3: not JSON: Expecting value: line 1 column 7 (char 6)"
    assert e.value.where == f"{path}:3"
    assert e.value.problem == "not JSON: Expecting value: line 1 column 7 (char 6)"


@pytest.mark.parametrize("bom", [b"", fileio.BYTE_ORDER_MARK])
def test_user_text_drops_a_byte_order_mark(bom, tmp_path):
    path = str(tmp_path / "t.txt")
    fileio.write_bytes(path, bom + "naïve\r\n\ufeffkept\n".encode())
    assert fileio.read_user_text(path) == "naïve\r\n\ufeffkept\n"  # only a leading one goes
    fileio.write_bytes(path, bom + b'{"a": 1}')
    assert fileio.read_json(path) == {"a": 1}


@pytest.mark.parametrize("bom", [b"", fileio.BYTE_ORDER_MARK])
def test_bytes_that_are_not_utf8_name_the_file_byte_offset_and_line(bom, tmp_path):
    path = str(tmp_path / "t.txt")
    fileio.write_bytes(path, bom + b"ok\ncaf\xe9\n")
    offset = len(bom) + 6
    with pytest.raises(fileio.UserFileError) as e:
        fileio.read_user_text(path)
    assert str(e.value) == (
        f"{path}: not UTF-8 text: byte 0xe9 at byte offset {offset} (line 2) "
        "(invalid continuation byte); save the file as UTF-8"
    )
    # A reader that refuses row by row keeps each bad byte as a lone surrogate.
    assert fileio.decode_user_text(bom + b"caf\xe9", path, "surrogateescape") == "caf\udce9"


@pytest.mark.parametrize("depth", [fileio.MAX_JSON_DEPTH + 1, 5000])
def test_json_nested_too_deep_is_refused_naming_the_file(depth):
    with pytest.raises(fileio.UserFileError) as e:
        fileio.parse_json("[" * depth + "]" * depth, "deep.json")
    assert str(e.value) == "deep.json: not JSON: arrays or objects nested deeper than 100 levels"
    nested = fileio.parse_json('{"a": ' * 50 + "[" * 50 + "]" * 50 + "}" * 50, "ok.json")
    assert fileio.json_depth(nested) == 100 and fileio.json_depth(3) == 0


def test_a_csv_field_over_the_csv_modules_limit_is_read():
    big = "x" * (200 * 1024)
    header, records = fileio.csv_records(f'text,label\n"{big}",1\nsmall,0\n', "big.csv")
    assert header == ["text", "label"]
    assert [(n, r["text"][:3], len(r["text"]), r["label"]) for n, r in records] == [
        (2, "xxx", len(big), "1"),
        (3, "sma", 5, "0"),
    ]
    header, records = fileio.csv_records("", "empty.csv")
    assert header == [] and list(records) == []


# Arbitrary text, lone surrogates included (which UTF-8 cannot encode).
_TEXT = st.text(st.characters(exclude_categories=()), max_size=20)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_TEXT, children, max_size=3),
    max_leaves=6,
)


@hypothesis.settings(max_examples=100, deadline=None)
@hypothesis.given(st.lists(st.dictionaries(_TEXT, _JSON, max_size=4), max_size=4))
def test_any_records_round_trip_through_json_lines(records):
    """Any list of JSON objects (any text: U+2028, control characters, lone surrogates) written
    by the writer is read back equal by the reader, one line each."""
    text = fileio.jsonl_text(records)
    assert text.count("\n") == len(records)
    assert fileio.parse_jsonl(text, "x") == records
    text.encode("utf-8")  # every line is UTF-8 (`write_text` encodes it so)


def test_written_records_round_trip_through_a_file(tmp_path):
    records = [{"t": "a\u2028b\x85c\u2029", "n": [1, {"x": "\ud800\v\f\x1c"}]}, {}, {"k": None}]
    for path in (str(tmp_path / "x.jsonl"), "ram://fileio_jsonl/x.jsonl"):
        fileio.write_jsonl(path, records)
        assert fileio.read_jsonl(path) == records


@pytest.mark.parametrize("base", ["ram://fileio_failed_write", None])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(base, tmp_path, monkeypatch):
    base = base or str(tmp_path)
    fileio.makedirs(base)
    path = fileio.join(base, "checkpoint.json")
    fileio.write_json(path, {"step": 1})

    def full_disk(*args, **kwargs):  # where a full disk fails a local write, or a rename
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fileio.os, "fsync", full_disk)
    monkeypatch.setattr(fileio, "rename", full_disk)
    with pytest.raises(OSError) as info:
        fileio.write_json(path, {"step": 2})
    assert str(info.value) == f"[Errno 28] No space left on device: writing {path}"
    assert fileio.listdir(base) == ["checkpoint.json"]
    assert fileio.read_json(path) == {"step": 1}
