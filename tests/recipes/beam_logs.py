"""Which lines of a recipe's output are Apache Beam's own log records at INFO or below.

Beam's records reach a recipe's output in three forms: absl's format in the recipe's process
(`I1205 01:51:44.474897 1402 worker_handlers.py:525] ...`: a file's basename, no logger name),
that same format for the records the DirectRunner's worker processes forward to it
(`local_job_service.py:367] Worker: severity: INFO ...`), and Python's default format on the
worker processes' own stderr (`INFO:apache_beam.runners.worker.sdk_worker:...`, and `__main__`
for Beam's harness run as a script). An absl line counts as Beam's when its file's basename is
that of a module of apache_beam (a basename keras_bert shares, such as pipeline.py, counts too:
the count errs high, never low).
"""

import pathlib
import re

import apache_beam

BEAM_FILES = frozenset(p.name for p in pathlib.Path(apache_beam.__file__).parent.rglob("*.py"))
ABSL_LINE = re.compile(r"^([DI])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ([^ :\]]+\.py):\d+\] ")
STD_LINE = re.compile(r"^(DEBUG|INFO):(apache_beam(\.[^:]*)?|__main__):")


def beam_info_lines(output: str) -> list[str]:
    """The lines of `output` that are Beam's log records at INFO or DEBUG."""
    found = []
    for line in output.splitlines():
        absl = ABSL_LINE.match(line)
        if (absl and absl.group(2) in BEAM_FILES) or STD_LINE.match(line):
            found.append(line)
    return found
