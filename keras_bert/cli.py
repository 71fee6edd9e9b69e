"""What the command lines (recipes/, `python -m export`) share: how a usage error ends a run.

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
