"""expand_file_patterns: order, duplicates, sidecars skipped by globs, clear errors."""

import re

import pytest

from keras_bert.data.file_patterns import expand_file_patterns


def test_globs_skip_the_files_we_write_beside_the_data(tmp_path):
    for name in (
        "data.tfrecord",
        "data.tfrecord-00001-of-00002",
        "data.tfrecord-00000-of-00002",
        "data.tfrecord.summary.json",
        "data.tfrecord-00002.tmp",
        "b.txt",
        "a.txt",
    ):
        (tmp_path / name).write_text("x")
    (tmp_path / "data.tfrecord-dir").mkdir()
    got = expand_file_patterns(f"{tmp_path}/data.tfrecord*")
    assert got == [
        str(tmp_path / n)
        for n in ("data.tfrecord", "data.tfrecord-00000-of-00002", "data.tfrecord-00001-of-00002")
    ]
    # Order as given, each glob sorted, duplicates dropped, a literal sidecar path kept.
    got = expand_file_patterns(
        [f"{tmp_path}/b.txt", f" {tmp_path}/*.txt ", f"{tmp_path}/data.tfrecord.summary.json"]
    )
    assert got == [str(tmp_path / n) for n in ("b.txt", "a.txt", "data.tfrecord.summary.json")]


def test_patterns_that_match_nothing_are_named(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    missing = [f"{tmp_path}/none*", f"{tmp_path}/nope.txt"]
    with pytest.raises(
        FileNotFoundError, match=re.escape(f"no pretraining shard matches {missing!r}")
    ):
        expand_file_patterns(
            f"{tmp_path}/a.txt,{missing[0]},{missing[1]}", what="pretraining shard"
        )
    with pytest.raises(FileNotFoundError, match=re.escape("no input file matches []")):
        expand_file_patterns(" , ")
