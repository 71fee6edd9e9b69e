"""keras_bert.cli: how a command line ends when a file system has no room."""

import errno
import sys

import pytest
import tensorflow as tf

from keras_bert import cli


@pytest.mark.parametrize(
    "error, no_room",
    [
        (OSError(errno.ENOSPC, "No space left on device"), True),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), True),
        (OSError(errno.EFBIG, "File too large"), True),
        (
            tf.errors.ResourceExhaustedError(None, None, "/m/.1.tmp/x; No space left on device"),
            True,
        ),
        (tf.errors.OutOfRangeError(None, None, "/m/.1.tmp/x; File too large"), True),
        (OSError(errno.EACCES, "Permission denied"), False),
        (tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor"), False),
        (ValueError("No space left on device"), False),  # words alone, not a file error
    ],
)
def test_is_no_room(error, no_room):
    assert cli.is_no_room(error) is no_room


def test_no_room_ends_the_program_with_one_line_and_status_1(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["run_classifier.py"])
    with pytest.raises(SystemExit) as exit_info, cli.failing_without_room():
        raise OSError(errno.ENOSPC, "No space left on device: writing runs/ckpt-3.weights.h5")
    assert exit_info.value.code == 1
    assert capsys.readouterr().err == (
        "run_classifier.py: error: [Errno 28] No space left on device: writing "
        "runs/ckpt-3.weights.h5\n"
    )
    with pytest.raises(OSError, match="Permission denied"), cli.failing_without_room():
        raise OSError(errno.EACCES, "Permission denied")  # any other error goes on
