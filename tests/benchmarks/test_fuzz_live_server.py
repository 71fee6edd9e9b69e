"""tools/fuzz_live_server.py's flags: what cannot run is refused before anything is built or
started (exit 2, argparse's usage line then one error line), and nothing is written."""

import pytest

from tools import fuzz_live_server


@pytest.mark.parametrize(
    "args, error",
    [
        (["--requests=0"], "--requests must be >= 1, got 0"),
        (["--grpc_per_round=-5"], "--grpc_per_round must be >= 1, got -5"),
        (
            ["--out=gs://bucket/fuzz"],
            "--out=gs://bucket/fuzz: a local directory (the server reads its models there)",
        ),
        (["--out="], "--out is required"),
        (["--vocab_file="], "--vocab_file is empty"),
        (
            ["--out={file}/fuzz", "--vocab_file={vocab}"],
            "[Errno 20] Not a directory: '{file}/fuzz/findings'",
        ),
    ],
)
def test_flags_that_cannot_run_are_refused_before_anything_starts(
    args, error, tmp_path, monkeypatch, capsys
):
    file, vocab = tmp_path / "a_file", fuzz_live_server.common.data_dir() / fuzz_live_server.VOCAB
    file.write_text("")
    monkeypatch.setattr("sys.argv", ["fuzz_live_server.py"])
    monkeypatch.chdir(tmp_path)  # a default --out would land here
    with pytest.raises(SystemExit) as exit_:
        fuzz_live_server.main([a.format(file=file, vocab=vocab) for a in args])
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == f"fuzz_live_server.py: error: {error.format(file=file)}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]
