"""What the command lines (recipes/, `python -m export`) share: how a usage error ends a run, the
one line a finished run prints, the recipes' LiteRT export flags and their `--group_by_length`
flag.

Bad flags or bad input files are the user's to fix, not a crash: one line on stderr naming the
problem, in the `prog: error: message` form argparse and most Unix tools use, and exit status 2,
without a traceback or the flag help (absl's `UsageError` prints the whole module docstring first).
"""
from __future__ import annotations

import os
import sys
from typing import NoReturn

USAGE_EXIT_CODE = 2


def fail_usage(message: str) -> NoReturn:
    """Writes `<program>: error: <message>` to stderr and exits with status 2."""
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "keras_bert"
    if program == "__main__.py":
        program = os.path.basename(os.path.dirname(os.path.abspath(sys.argv[0])))
    sys.stderr.write(f"{program}: error: {' '.join(str(message).split())}\n")
    sys.stderr.flush()
    sys.exit(USAGE_EXIT_CODE)


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


def define_export_litert_flags() -> None:
    """Defines `--export_tflite` and `--export_quantize` (the recipes' forms of `python -m export
    --tflite` / `--quantize`) on absl's global flags."""
    from absl import flags

    flags.DEFINE_boolean("export_tflite", False, "With --export_dir: also write model.tflite, the "
                         "`encoded` signature for LiteRT (serving.server --prefer_tflite_model); "
                         "docs/export.md.")
    flags.DEFINE_enum("export_quantize", None, ["int8"], "With --export_dir: quantize model.tflite "
                      "(implies --export_tflite); int8 = dynamic-range int8 weights.")


def define_group_by_length_flag(default: bool = True) -> None:
    """Defines `--group_by_length` (the fine-tuning recipes' length-grouped batches,
    `keras_bert.data.dynamic_padding.length_grouped_order`) on absl's global flags."""
    from absl import flags

    flags.DEFINE_boolean("group_by_length", default, "Order each shuffled training epoch so a "
                         "batch holds examples of similar length (groups of 50 batches, as Hugging "
                         "Face's group_by_length); with dynamic padding an epoch of SST-2 carries "
                         "2.5x fewer tokens. --nogroup_by_length: batches of random lengths.")


def export_litert_option(flag_values) -> str | None:
    """`Task.export`'s `litert` argument from the flags `define_export_litert_flags` defines."""
    from keras_bert.saved_model.litert import litert_option

    return litert_option(flag_values.export_tflite, flag_values.export_quantize)
