"""What the command lines (recipes/, `python -m export`, `serving.server`) share: how a usage error
ends a run, how an unreachable URI is caught before anything runs, and the one line a finished run
prints. A leaf: it imports nothing of keras_bert but `fileio` (a training recipe's whole command
line is `keras_bert.training.recipe.run_recipe`).

Bad flags or bad input files are the user's to fix, not a crash: one line on stderr naming the
problem, in the `prog: error: message` form argparse and most Unix tools use, and exit status 2,
without a traceback or the flag help (absl's `UsageError` prints the whole module docstring first).
Every program runs its `main` through `run`, so absl's own refusals (a required flag missing, an
unknown flag, a value of the wrong type: `parse_flags`) end that way too.
A file system without room (full, a quota, a file-size limit) ends a run the same way, with exit
status 1 (`failing_without_room`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
import sys
from typing import Iterator, NoReturn

USAGE_EXIT_CODE = 2
NO_ROOM_EXIT_CODE = 1
# How a file system says it has no room: the disk is full, a quota is reached, a file would pass
# RLIMIT_FSIZE. TensorFlow's file errors carry only the words.
_NO_ROOM_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_NO_ROOM_WORDS = ("No space left on device", "Disk quota exceeded", "File too large")
# How absl's validator of a required flag (`flags.mark_flag_as_required`) says it is missing, and
# how it prefixes the message of a validator over several flags (ours name the flag: "--...").
_ABSL_MISSING = re.compile(r"Flag --(\w+) must have a value other than None")
_ABSL_MULTI_FLAG = re.compile(r"flags \w+=.*?: (--.*)")


def fail_usage(message: str, status: int = USAGE_EXIT_CODE, program: str = "") -> NoReturn:
    """Writes `<program>: error: <message>` on one line of stderr and exits with `status`
    (default 2). `program`: the name to print (default: the running file's name, or its package's
    for a `__main__.py`)."""
    # The program's own file name (not a user path).
    if not program:
        program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "keras_bert"
    if program == "__main__.py":
        program = os.path.basename(os.path.dirname(os.path.abspath(sys.argv[0])))
    sys.stderr.write(f"{program}: error: {' '.join(str(message).split())}\n")
    sys.stderr.flush()
    sys.exit(status)


def parse_flags(argv: list[str], flag_values=None) -> list[str]:
    """absl's flag parsing (`flag_values`, default the global FLAGS), with a refusal ending as
    every usage error of ours does (`fail_usage`: one line, exit 2), where absl's own parser
    writes "FATAL Flags parsing error" over several lines and exits 1. A required flag that is
    missing reads as one given empty does: "--<name> is required" (`check_not_empty`), each one
    missing named; a check over several flags in its own words (absl's "flags a=.., b=..:"
    prefix dropped); an unknown flag or a value of the wrong type, in absl's words.

    Returns:
        The arguments left after the flags, the program's name first (as `app.run` hands on).
    """
    from absl import flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    try:
        return flag_values(argv)
    except flags.Error as e:
        fail_usage("; ".join(_absl_refusal(line) for line in str(e).split("\n") if line.strip()))
    except ValueError as e:  # absl's own for "--no<boolean>=<value>"
        fail_usage(" ".join(str(e).split()))


def _absl_refusal(line: str) -> str:
    """One refusal of absl's in our words (`parse_flags`)."""
    if missing := _ABSL_MISSING.search(line):
        return f"--{missing.group(1)} is required"
    if ours := _ABSL_MULTI_FLAG.match(line.strip()):
        return ours.group(1)
    return line.strip()


def run(main) -> None:
    """`absl.app.run(main)` with our flag parsing (`parse_flags`), and an `absl.app.UsageError`
    that `main` raises ending as a usage error of ours (absl's prints the module docstring and
    the flags first): what every program of ours (recipes/, `python -m export`, `serving.*`)
    runs as its `__main__`."""
    from absl import app

    def main_of_ours(argv):
        try:
            return main(argv)
        except app.UsageError as e:
            fail_usage(str(e))

    app.run(main_of_ours, flags_parser=parse_flags)


def is_no_room(error: BaseException) -> bool:
    """Whether `error` (an OSError, or TensorFlow's `OpError` for a file) says a file system has
    no room for a write."""
    if isinstance(error, OSError) and error.errno in _NO_ROOM_ERRNOS:
        return True
    return type(error).__module__.startswith("tensorflow") and any(
        words in str(error) for words in _NO_ROOM_WORDS
    )


@contextlib.contextmanager
def failing_without_room() -> Iterator[None]:
    """Within the block, an error saying a file system has no room (`is_no_room`) ends the
    program with `<program>: error: <message>` on stderr and exit status 1, no traceback: the
    machine's to fix, not the command's. What the writers leave is whole or absent (exports are
    published by a rename, checkpoints and files replaced whole), so the same command, run again
    once there is room, resumes or writes anew."""
    try:
        yield
    except Exception as e:
        if not is_no_room(e):
            raise
        fail_usage(str(e), NO_ROOM_EXIT_CODE)


def calling_module_name(depth: int = 2) -> str:
    """The name absl gives the module `depth` frames up (the caller of the function that calls
    this): its `__name__`, or `sys.argv[0]` for `__main__`. Flags a shared function defines under
    that name belong to the calling recipe: its `--help` lists them, as if it had defined them."""
    name = sys._getframe(depth).f_globals.get("__name__", "")
    return sys.argv[0] if name == "__main__" else name


def define_corpus_flags() -> None:
    """`--input_file` and `--input_format`: the text corpus of the recipes that read one
    (create_vocab, create_pretraining_data), read by `pretraining_data.read_raw_documents`."""
    from absl import flags

    mine = {"module_name": calling_module_name()}  # listed by the calling recipe's --help
    flags.DEFINE_string(
        "input_file", None, "Input text file(s): comma-separated paths or globs.", **mine
    )
    flags.DEFINE_enum(
        "input_format",
        "text",
        ["text", "wikitext"],
        "text: one sentence per line, blank line between documents. wikitext: ' = Title = ' "
        "lines start documents, ' = = Section = = ' lines are dropped, paragraphs are split "
        "into sentences and their @-@ escapes undone.",
        **mine,
    )


def check_paths_reachable(values) -> None:
    """Fails fast on a URI whose file system cannot be reached, before anything reads or writes.

    Args:
        values: flag name -> value (or a dataclass of settings, e.g. a recipe's Args). Every str
            value holding `://` (each item of a comma-separated one, such as --input_file
            patterns) is probed with `keras_bert.fileio.check_reachable`; local paths are not.

    Raises:
        keras_bert.fileio.UnreachablePathError (a FileNotFoundError): "cannot reach --<flag>
            <URI as typed>: <cause>", one line; a recipe's main ends the program with it (exit 2).
    """
    from keras_bert import fileio

    if dataclasses.is_dataclass(values):
        values = {f.name: getattr(values, f.name) for f in dataclasses.fields(values)}
    for name, value in values.items():
        if not isinstance(value, str):
            continue
        for item in value.split(","):
            if "://" in item:
                fileio.check_reachable(item.strip(), f"--{name}")


def check_not_empty(name: str, value, required: bool) -> None:
    """The one rule for a flag given as an empty (or blank) string, such as `--output_dir=` from
    an unset shell variable: refused, never read as "not given" or as the working directory.
    The catalogue's required fields (`keras_bert.training.args`) and every program's path flags
    (`require_reachable_flags`) keep it.

    Raises:
        ValueError: "--<name> is required" (a required flag empty, or None), "--<name> is empty"
            (an optional one given empty).
    """
    if value is None and required:
        raise ValueError(f"--{name} is required")
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"--{name} is required" if required else f"--{name} is empty")


def check_given_paths(flag_values, names, required=()) -> None:
    """`check_not_empty` of each of the absl flags `names` (path flags) that the command line
    gives, or that is `required`.

    Args:
        flag_values: the parsed absl FlagValues.

    Raises:
        ValueError: "--<name> is required" / "--<name> is empty", for the first one refused.
    """
    for name in names:
        if flag_values[name].present or name in required:
            check_not_empty(name, flag_values[name].value, name in required)


def require_reachable_flags(*names: str, required=()) -> None:
    """The path flags `names` of a program's absl flags, before anything is read or loaded: each
    one given (or `required`) not empty (`check_given_paths`), every URI among them reachable
    (`check_paths_reachable`). A refusal ends the program as a usage error (`fail_usage`: one
    line naming the flag, exit 2)."""
    from absl import flags

    try:
        check_given_paths(flags.FLAGS, names, required)
        check_paths_reachable({name: flags.FLAGS[name].value for name in names})
    except (ValueError, FileNotFoundError) as e:
        fail_usage(str(e))


def print_result(headline: dict, output_dir) -> None:
    """Prints one line for the person who ran the recipe: the headline numbers and where the
    whole record is (`<output_dir>/metrics.json`), instead of the whole record.

    Args:
        headline: label -> value, in the order to print (floats with 4 decimals; None as "n/a").
        output_dir: the run's output dir as the user gave it (a local path or a URI).
    """

    def shown(value):
        if value is None:
            return "n/a"
        return f"{value:.4f}" if isinstance(value, float) else str(value)

    parts = ", ".join(f"{label} {shown(value)}" for label, value in headline.items())
    print(f"{parts} (all metrics: {str(output_dir).rstrip('/')}/metrics.json)", flush=True)
