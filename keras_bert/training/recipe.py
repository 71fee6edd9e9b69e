"""The whole command line of a training recipe (`run_recipe`) and of any program whose flags are
the fields of an argument set (`argument_set_main`, `run_argument_set`: pretraining): one absl
flag per field, every URI among the values reachable (checked here, once per run), the settings
read back, then the one fine-tuning driver (`keras_bert.training.trainer`) and the one result line
(`keras_bert.cli.print_result`). Bad flags or data end the program as a usage error
(`keras_bert.cli.fail_usage`: one line, exit 2)."""

from __future__ import annotations

import dataclasses
import sys
from typing import Callable

from absl import flags

from keras_bert.cli import (
    check_paths_reachable,
    fail_usage,
    failing_without_room,
    print_result,
    run,
)
from keras_bert.training import arg_flags
from keras_bert.training import trainer


def argument_set_main(cls, prepare: Callable, finish: Callable, flag_values=None) -> Callable:
    """The `main(argv)` of a program whose flags are the fields of the argument set `cls`
    (`keras_bert.training.arg_flags.define_flags`): no positional argument; every URI among the
    values reachable; the settings read back (`arg_flags.from_flags`: each value's rule, the checks
    across fields and the flags that act only with another); every input file there
    (`arg_flags.check_input_files`); `prepared = prepare(args)`; then `finish(args, prepared)`.

    A ValueError or FileNotFoundError before `finish` (bad flags or data) ends the program as a
    usage error (`fail_usage`, exit 2), before anything is trained or written; a file system
    without room, anywhere, with one line and exit 1 (`failing_without_room`).

    Args:
        flag_values: the parsed absl FlagValues (default: absl's global FLAGS).
    """

    def main(argv):
        fv = flags.FLAGS if flag_values is None else flag_values  # an empty FlagValues is falsy
        if len(argv) > 1:
            fail_usage(f"unexpected arguments: {' '.join(argv[1:])}")
        with failing_without_room():
            try:
                # Before the flags are checked: a check may already read a file (SQuAD's files).
                check_paths_reachable({f.name: fv[f.name].value for f in dataclasses.fields(cls)})
                args = arg_flags.from_flags(cls, fv)
                arg_flags.check_input_files(args)  # before anything is read or loaded
                prepared = prepare(args)
            except (ValueError, FileNotFoundError) as e:  # bad flags or data: one line, exit 2
                fail_usage(str(e))
            finish(args, prepared)

    return main


def run_argument_set(cls, main: Callable) -> None:
    """Defines one absl flag per field of the argument set `cls` (listed by the running
    program's `--help`) and runs `main` (`argument_set_main`, `recipe_main`) on them."""
    arg_flags.define_flags(cls, module_name=sys.argv[0])
    run(main)


def recipe_main(family, flag_values=None) -> Callable:
    """The `main(argv)` of a training recipe (`argument_set_main` of `family.Args`): the one
    driver's `trainer.prepare` (bad flags or data: a usage error), `trainer.run`, the one result
    line."""

    def finish(args, prepared):
        summary = trainer.run(family, args, prepared)
        print_result(family.headline(summary), args.output_dir)

    return argument_set_main(
        family.Args, lambda args: trainer.prepare(family, args), finish, flag_values
    )


def run_recipe(family) -> None:
    """The whole command line of a training recipe: one absl flag per field of `family.Args`,
    then `recipe_main(family)`: the one driver (`keras_bert.training.trainer.run`) and the one
    result line."""
    run_argument_set(family.Args, recipe_main(family))
