"""`python -m keras_bert.beam_worker '<json>'`: a DirectRunner worker process (`--num_workers`
above 1), Beam's SDK harness with its log levels from the pipeline's options.

Beam's FnApiRunner starts `python -m apache_beam.runners.worker.sdk_worker_main` and hands it no
pipeline options, so its `default_sdk_harness_log_level` and `sdk_harness_log_level_overrides`
never reach the worker; and that entry point sets the root logger to INFO and logs its start
("Logging handler created.") before it reads any option. `keras_bert.beam.create_pipeline`
starts this instead (`keras_bert.beam.worker_command`), with those two options as a JSON object
argument: they join the worker's pipeline options (an option the runner did send wins), Beam's
loggers are set to the default level first, then Beam's `main` runs and applies both as usual.
Importing keras_bert first also applies its warning filters in the worker.
"""

import json
import logging
import os
import sys

from apache_beam.runners.worker import sdk_worker_main


def harness_options(argv, environ) -> dict:
    """The worker's pipeline options (PIPELINE_OPTIONS of `environ`, as Beam's harness reads
    them) over the JSON object in argv[1], if any."""
    given = json.loads(argv[1]) if len(argv) > 1 else {}
    # Beam's own reader of PIPELINE_OPTIONS (2.77; private): the same keys the harness will see.
    return {**given, **sdk_worker_main._load_pipeline_options(environ.get("PIPELINE_OPTIONS"))}


def main(argv) -> None:
    options = harness_options(argv, os.environ)
    os.environ["PIPELINE_OPTIONS"] = json.dumps(options)
    # Beam's harness reads the level the same way a moment later; its start-up lines come before.
    level = sdk_worker_main._get_log_level_from_options_dict(options)
    logging.getLogger("apache_beam").setLevel(level)
    sdk_worker_main.main(argv)


if __name__ == "__main__":
    main(sys.argv)
