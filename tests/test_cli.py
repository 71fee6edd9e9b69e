"""keras_bert.cli: how a command line ends when a file system has no room, and when absl refuses
its flags (a required flag missing, an unknown flag, a value of the wrong type) or its `main`
raises absl's UsageError: one line, exit status 2, in every program of ours."""

import errno
import functools
import pathlib
import re
import sys

import pytest
import tensorflow as tf
from absl import app, flags

from keras_bert import cli
from tests.recipes.recipe_process import run_recipe_main, usage_error


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


REPO = pathlib.Path(__file__).resolve().parents[1]


def _flag_values():
    fv = flags.FlagValues()
    flags.DEFINE_string("data", None, "Data.", flag_values=fv)
    flags.DEFINE_string("output_dir", None, "Output.", flag_values=fv)
    flags.DEFINE_integer("steps", 1, "Steps.", flag_values=fv)
    flags.mark_flags_as_required(["data", "output_dir"], flag_values=fv)
    flags.DEFINE_string("export_dir", None, "Export.", flag_values=fv)
    flags.DEFINE_string("export_base", None, "Its older spelling.", flag_values=fv)
    flags.register_multi_flags_validator(  # as a catalogue field with an older spelling has it
        ["export_dir", "export_base"],
        lambda d: d["export_dir"] != "" and d["export_base"] != "",
        message="--export_dir is empty",
        flag_values=fv,
    )
    return fv


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "--data is required; --output_dir is required"),
        (["--data=d"], "--output_dir is required"),
        (
            ["--data=d", "--output_dir=o", "--steps=abc"],
            "flag --steps=abc: invalid literal for int() with base 10: 'abc'",
        ),
        (["--data=d", "--output_dir=o", "--bogus=1"], "Unknown command line flag 'bogus'"),
        (
            ["--data=d", "--output_dir=o", "--export_dir=gs://b/x,y: z", "--export_base="],
            "--export_dir is empty",
        ),
    ],
)
def test_a_flag_absl_refuses_is_one_line_and_status_2(argv, message, monkeypatch, capsys):
    call = functools.partial(cli.parse_flags, ["evaluate.py", *argv], _flag_values())
    err = usage_error(capsys, monkeypatch, "evaluate.py", call)
    assert err == f"evaluate.py: error: {message}\n"


def test_parse_flags_hands_on_what_follows_the_flags():
    fv = _flag_values()
    assert cli.parse_flags(["p", "--data=d", "--output_dir=o", "TEXT"], fv) == ["p", "TEXT"]
    assert (fv.data, fv.output_dir, fv.steps) == ("d", "o", 1)


def test_a_usage_error_of_main_is_one_line_and_status_2(monkeypatch, capsys):
    def main(argv):
        raise app.UsageError("give one or more TEXT arguments")

    err = usage_error(capsys, monkeypatch, "client.py", lambda: cli.run(main))
    assert err == "client.py: error: give one or more TEXT arguments\n"


# The hand-written recipes, each run with no flag: the flags it requires.
REQUIRED = {
    "batch_predict": ("model", "input", "output_dir"),
    "convert_checkpoint": ("output_dir", "init_checkpoint"),
    "create_pretraining_data": ("input_file", "output_file", "vocab_file"),
    "create_vocab": ("input_file", "vocab_file"),
    "evaluate": ("data", "output_dir"),
    "extract_features": ("input_file", "output_file", "init_checkpoint"),
}


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_a_recipe_without_its_required_flags_names_each_in_one_line(name, monkeypatch, capsys):
    err = usage_error(capsys, monkeypatch, f"{name}.py", lambda: run_recipe_main(name))
    wanted = "; ".join(f"--{flag} is required" for flag in REQUIRED[name])
    assert err == f"{name}.py: error: {wanted}\n"


# Every program of ours runs its main through `cli.run` (none through `absl.app.run` itself).
PROGRAMS = [
    *sorted((REPO / "recipes").glob("*.py")),
    REPO / "export" / "__main__.py",
    *(
        REPO / "serving" / f"{name}.py"
        for name in ("server", "client", "request_log", "ssl_config")
    ),
    REPO / "keras_bert" / "training" / "recipe.py",
]


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_program_runs_its_main_through_cli_run(path):
    source = path.read_text()
    assert "app.run(" not in source
    # keras_bert.training.recipe's run_argument_set (run_recipe's too) calls cli.run.
    assert re.search(r"\b(run\(main|run_recipe\(|run_argument_set\()", source), path
