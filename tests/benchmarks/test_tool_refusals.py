"""The tools' refusals of bad input: one line `<program>.py: error: <what is wrong>` on stderr,
exit status 2, nothing else (no traceback), before anything is measured or written. The cases
whose refusal comes after TensorFlow is imported (about 5 s each) are marked slow."""

import pytest

from tests.recipes.recipe_process import refusal_lines

SLOW = pytest.mark.slow


def _refusal(program: str, args: list[str], data_dir=None) -> str:
    """The last stderr line of `tools.<program>` refusing `args` (TensorFlow's start-up lines may
    come first), with KERAS_BERT_DATA_DIR=`data_dir` where given."""
    env = {"KERAS_BERT_DATA_DIR": str(data_dir)} if data_dir is not None else {}
    return refusal_lines(f"tools.{program}", *args, **env)[-1]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "regular").write_text("x\n")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "no_unk.txt").write_text("[CLS]\n[SEP]\nthe\n")
    (tmp_path / "peer.log").write_text("step 1/2 loss 1.5\n")
    (tmp_path / "no_squad" / "vocab").mkdir(parents=True)
    (tmp_path / "no_squad" / "vocab" / "bert-base-uncased-vocab.txt").write_text("[UNK]\nthe\n")
    return tmp_path


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["--run=p={t}/missing"],
            "--run='p={t}/missing': no such file or directory: {t}/missing",
        ),
        (
            ["--run=p={t}/binary"],
            "--run='p={t}/binary': not UTF-8 text: byte 0xff at byte offset 0 (line 1) "
            "(invalid start byte); save the file as UTF-8",
        ),
        (
            ["--run=p=/proc/self/mem"],
            "--run='p=/proc/self/mem': cannot read /proc/self/mem: [Errno 5] Input/output error",
        ),
        (
            ["--run=p={t}/peer.log", "--run=p={t}/peer.log"],
            "--run='p={t}/peer.log': the label 'p' is given twice",
        ),
        pytest.param(
            ["--run=p=s3://bucket/x.log"],
            "--run='p=s3://bucket/x.log': cannot reach it: s3://bucket/x.log: File system "
            "scheme 's3' not implemented (file: 's3://bucket/x.log')",
            marks=SLOW,
        ),
    ],
)
def test_learning_curves_refuses_a_run_it_cannot_read(files, args, line):
    args = [a.format(t=files) for a in args]
    got = _refusal("learning_curves", args)
    assert got == "learning_curves.py: error: " + line.format(t=files)


@pytest.mark.parametrize(
    "args, line",
    [
        (["--output="], "--output is empty"),
        (["--output={t}"], "--output={t}: a directory, not a file"),
        (
            ["--dry_run", "--steps=5", "--batch_size=2"],
            "--batch_size, --steps: not used by --dry_run, which runs its own tiny sizes "
            "(batch_size=4, seq_length=16, latency_seq_length=8, warmup_steps=1, steps=2, "
            "encoder_calls=2, latency_calls=3)",
        ),
        pytest.param(
            ["--output={t}/regular/table.md"],
            "--output={t}/regular/table.md: cannot write it: {t}/regular is not a directory",
            marks=SLOW,
        ),
        pytest.param(
            ["--output=/proc/device_check.md"],
            "--output=/proc/device_check.md: cannot write it: No such file or directory",
            marks=SLOW,
        ),
    ],
)
def test_device_check_refuses_an_output_it_cannot_write_and_sizes_a_dry_run_ignores(
    files, args, line
):
    got = _refusal("device_check", [a.format(t=files) for a in args])
    assert got == "device_check.py: error: " + line.format(t=files)


@pytest.mark.parametrize(
    "args, line",
    [
        ([""], "the export base directory is empty"),
        pytest.param(
            ["{t}/out", "--model_name="],
            "--model_name: model_name must be a plain directory name, got ''",
            marks=SLOW,
        ),
        pytest.param(
            ["{t}/out", "--model_name=../escape"],
            "--model_name: model_name must be a plain directory name, got '../escape'",
            marks=SLOW,
        ),
        pytest.param(
            ["{t}/regular"],
            "cannot export into {t}/regular: {t}/regular is not a directory",
            marks=SLOW,
        ),
    ],
)
def test_make_tiny_squad_export_refuses_a_base_or_name_it_cannot_export_into(files, args, line):
    got = _refusal("make_tiny_squad_export", [a.format(t=files) for a in args])
    assert got == "make_tiny_squad_export.py: error: " + line.format(t=files)
    assert not (files / "out").exists()


@pytest.mark.parametrize(
    "args, data_dir, line",
    [
        (["--vocab_file="], None, "--vocab_file is empty"),
        pytest.param(
            ["--vocab_file={t}/no_unk.txt"],
            None,
            "{t}/no_unk.txt: the vocabulary lacks the [UNK] token",
            marks=SLOW,
        ),
        pytest.param(
            ["--vocab_file={t}/binary"],
            None,
            "{t}/binary: not UTF-8 text: byte 0xff at byte offset 0 (line 1) "
            "(invalid start byte); save the file as UTF-8",
            marks=SLOW,
        ),
        pytest.param(
            ["--vocab_file={t}/empty.txt"],
            None,
            "vocab_file {t}/empty.txt holds no tokens",
            marks=SLOW,
        ),
        pytest.param(
            [],
            "{t}/no_squad",
            "the data under KERAS_BERT_DATA_DIR={t}/no_squad: [Errno 2] No such file: "
            "'{t}/no_squad/squad/dev-v1.1.json'",
            marks=SLOW,
        ),
    ],
)
def test_fast_tokenizer_parity_refuses_a_vocabulary_or_data_it_cannot_use(
    files, args, data_dir, line
):
    data_dir = data_dir and data_dir.format(t=files)
    got = _refusal("fast_tokenizer_parity", [a.format(t=files) for a in args], data_dir)
    assert got == "fast_tokenizer_parity.py: error: " + line.format(t=files)
