"""keras_bert.fileio: URIs kept as typed, whole-or-nothing writes, directories published whole,
one-line errors for file systems that cannot be reached."""

import pytest

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
        "from serving.storage import fileio\n"
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
