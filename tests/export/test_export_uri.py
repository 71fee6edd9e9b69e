"""`python -m export` to a URI: `ram://` (TensorFlow's in-memory file system, which is published
by copying, as `gs://` is) holds a complete version and nothing else.

`ram://` lives in one process, so the command runs in a child process that then reads the file
system it wrote: `runpy` runs the `export` module as `python -m export` does, with its flags.
"""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

_RUN_AND_LIST = """
import json, runpy, sys
sys.argv = ["export", *sys.argv[1:]]
try:
    runpy.run_module("export", run_name="__main__", alter_sys=True)
except SystemExit as e:
    if e.code:
        raise
from keras_bert import fileio
model_dir = "ram://exports/sst2"
version = fileio.join(model_dir, "1")
print(json.dumps({
    "model_dir": fileio.listdir(model_dir),
    "version": fileio.listdir(version),
    "assets": fileio.listdir(fileio.join(version, "assets")),
    "complete": fileio.is_complete(version),
    "config": fileio.read_json(fileio.join(version, "assets", "export_config.json")),
}))
"""


@pytest.mark.slow
def test_python_m_export_to_ram_publishes_a_complete_version(tmp_path, uncased_vocab):
    from tests.export.conftest import tiny_classifier

    model = tiny_classifier(2, ["no", "yes"], "sst2", seed=1, vocab_file=uncased_vocab)
    model.save(tmp_path / "task.keras")
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _RUN_AND_LIST,
            f"--model_dir={tmp_path / 'task.keras'}",
            "--export_base=ram://exports",
            "--model_name=sst2",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    printed_path, listing = out.stdout.strip().splitlines()[-2:]
    assert printed_path == "ram://exports/sst2/1"
    got = json.loads(listing)
    assert got["model_dir"] == ["1"]  # no staging directory left beside it
    assert got["version"] == [
        ".keras_bert_complete",
        "assets",
        "assets.extra",
        "fingerprint.pb",
        "saved_model.pb",
        "variables",
    ]
    assert got["assets"] == ["export_config.json", "labels.txt", "vocab.txt"]
    assert got["complete"] is True
    assert (got["config"]["model_name"], got["config"]["label_names"]) == ("sst2", ["no", "yes"])


@pytest.mark.slow
def test_staging_dir_of_a_killed_export_is_removed_by_the_next(tmp_path, uncased_vocab):
    """SIGKILL after the version is written, before it is published: a hidden staging directory
    is left; the next export from this host removes it (its writer is gone) and takes version 1."""
    import os
    import signal

    from tests.export.conftest import tiny_classifier

    tiny_classifier(2, ["no", "yes"], "sst2", seed=1, vocab_file=uncased_vocab).save(
        tmp_path / "task.keras"
    )
    command = [
        sys.executable,
        "-m",
        "export",
        f"--model_dir={tmp_path / 'task.keras'}",
        f"--export_base={tmp_path / 'models'}",
        "--model_name=sst2",
    ]
    killed = subprocess.run(
        command,
        cwd=REPO_ROOT,
        env=dict(os.environ, KERAS_BERT_CRASH_AT="export_publish"),
        capture_output=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL
    (staged,) = os.listdir(tmp_path / "models" / "sst2")
    assert staged.startswith(".1.tmp-")
    out = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == str(tmp_path / "models" / "sst2" / "1")
    assert os.listdir(tmp_path / "models" / "sst2") == ["1"]


@pytest.mark.slow
def test_a_full_disk_ends_the_export_with_one_line_and_publishes_nothing(tmp_path, uncased_vocab):
    """`python -m export` under RLIMIT_FSIZE (every file at most 64 KiB, as a full disk): exit
    status 1, one error line naming the disk's reason, no traceback, no version and no staging
    directory; with the room back the same command publishes version 1."""
    import os
    import resource

    from tests.export.conftest import run_export, tiny_classifier

    tiny_classifier(2, ["no", "yes"], "sst2", seed=1, vocab_file=uncased_vocab).save(
        tmp_path / "task.keras"
    )

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, resource.RLIM_INFINITY))

    args = (tmp_path / "task.keras", tmp_path / "models", "sst2")
    full = run_export(*args, timeout=300, preexec_fn=small_files)
    assert full.returncode == 1, full.stderr[-3000:]
    assert "Traceback" not in full.stderr
    last = full.stderr.strip().splitlines()[-1]
    assert last.startswith("export: error: ") and "File too large" in last
    assert str(tmp_path / "models" / "sst2") in last  # where
    assert os.listdir(tmp_path / "models" / "sst2") == []
    out = run_export(*args, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert os.listdir(tmp_path / "models" / "sst2") == ["1"]
