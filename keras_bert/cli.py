"""What the command lines (recipes/, `python -m export`) share: how a usage error ends a run, the
one line a finished run prints, and the whole command line of a training recipe (`run_recipe`).

Bad flags or bad input files are the user's to fix, not a crash: one line on stderr naming the
problem, in the `prog: error: message` form argparse and most Unix tools use, and exit status 2,
without a traceback or the flag help (absl's `UsageError` prints the whole module docstring first).
A file system without room (full, a quota, a file-size limit) ends a run the same way, with exit
status 1 (`failing_without_room`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import sys
from typing import Callable, Iterator, NoReturn

from keras_bert.training import flag_dependencies

USAGE_EXIT_CODE = 2
NO_ROOM_EXIT_CODE = 1
# How a file system says it has no room: the disk is full, a quota is reached, a file would pass
# RLIMIT_FSIZE. TensorFlow's file errors carry only the words.
_NO_ROOM_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_NO_ROOM_WORDS = ("No space left on device", "Disk quota exceeded", "File too large")


def fail_usage(message: str, status: int = USAGE_EXIT_CODE) -> NoReturn:
    """Writes `<program>: error: <message>` to stderr and exits with `status` (default 2)."""
    # The program's own file name (not a user path).
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "keras_bert"
    if program == "__main__.py":
        program = os.path.basename(os.path.dirname(os.path.abspath(sys.argv[0])))
    sys.stderr.write(f"{program}: error: {' '.join(str(message).split())}\n")
    sys.stderr.flush()
    sys.exit(status)


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
            <URI as typed>: <cause>", one line; `run_recipe` ends the program with it (exit 2).
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


def require_reachable_flags(*names: str) -> None:
    """`check_paths_reachable` of the named absl flags' values; an unreachable URI ends the
    program as a usage error (`fail_usage`: one line naming the flag and the URI, exit 2)."""
    from absl import flags

    try:
        check_paths_reachable({name: flags.FLAGS[name].value for name in names})
    except FileNotFoundError as e:
        fail_usage(str(e))


def check_flag_partners(table: str, flag_values=None) -> None:
    """Ends the program as a usage error (`fail_usage`: one line naming both flags, exit 2) when
    a flag on its command line acts only with (or without) another that is not there:
    `flag_dependencies.TABLE[table]`. Every program that defines its flags by hand calls it first
    thing in its `main` (the argument sets check the table on construction)."""
    from absl import flags

    try:
        flag_dependencies.check_flags(table, flags.FLAGS if flag_values is None else flag_values)
    except flag_dependencies.MissingPartnerError as e:
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


def argument_set_main(cls, prepare: Callable, finish: Callable, flag_values=None) -> Callable:
    """The `main(argv)` of a program whose flags are the fields of the argument set `cls`
    (`keras_bert.training.args.define_flags`): no positional argument; every URI among the
    values reachable; the settings read back (`args.from_flags`: each value's rule, the checks
    across fields and the flags that act only with another); `prepared = prepare(args)`; then
    `finish(args, prepared)`.

    A ValueError or FileNotFoundError before `finish` (bad flags or data) ends the program as a
    usage error (`fail_usage`, exit 2), before anything is trained or written; a file system
    without room, anywhere, with one line and exit 1 (`failing_without_room`).

    Args:
        flag_values: the parsed absl FlagValues (default: absl's global FLAGS).
    """
    from absl import flags

    from keras_bert.training import args as args_lib

    def main(argv):
        fv = flags.FLAGS if flag_values is None else flag_values  # an empty FlagValues is falsy
        if len(argv) > 1:
            fail_usage(f"unexpected arguments: {' '.join(argv[1:])}")
        with failing_without_room():
            try:
                # Before the flags are checked: a check may already read a file (SQuAD's files).
                check_paths_reachable({f.name: fv[f.name].value for f in dataclasses.fields(cls)})
                args = args_lib.from_flags(cls, fv)
                prepared = prepare(args)
            except (ValueError, FileNotFoundError) as e:  # bad flags or data: one line, exit 2
                fail_usage(str(e))
            finish(args, prepared)

    return main


def run_argument_set(cls, main: Callable) -> None:
    """Defines one absl flag per field of the argument set `cls` (listed by the running
    program's `--help`) and runs `main` (`argument_set_main`, `recipe_main`) on them."""
    from absl import app

    from keras_bert.training import args as args_lib

    args_lib.define_flags(cls, module_name=sys.argv[0])
    app.run(main)


def recipe_main(family, flag_values=None) -> Callable:
    """The `main(argv)` of a training recipe (`argument_set_main` of `family.Args`): the one
    driver's `prepare` (bad flags or data: a usage error), its `run`, the one result line."""
    from keras_bert.training import driver

    def finish(args, prepared):
        summary = driver.run(family, args, prepared)
        print_result(family.headline(summary), args.output_dir)

    return argument_set_main(
        family.Args, lambda args: driver.prepare(family, args), finish, flag_values
    )


def run_recipe(family) -> None:
    """The whole command line of a training recipe: one absl flag per field of `family.Args`,
    then `recipe_main(family)`: the one driver (`keras_bert.training.driver.run`) and the one
    result line."""
    run_argument_set(family.Args, recipe_main(family))
