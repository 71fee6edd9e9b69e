"""What the Apache Beam pipelines (pretraining data, batch prediction) share: their flags and how
they become Beam `PipelineOptions`.

Every pipeline runs on the runner given by `--runner` (`DirectRunner` by default: in process, or
`--num_workers` local processes) and takes any other Beam pipeline option as
`--beam_pipeline_options="key=value,key=value"`, the convention of tensorflow-datasets: for
example `project=my-project,region=us-central1,temp_location=gs://my-bucket/tmp` for Dataflow,
`flink_master=host:8081` for Flink. docs/beam.md has the commands per runner.

A value the user gave is never overridden: `--num_workers` maps to the DirectRunner's
`direct_num_workers` (and `direct_running_mode=multi_processing` when above 1), and
`--beam_log_level` to `default_sdk_harness_log_level`, only when `--beam_pipeline_options` does
not set those itself; both given and different is a usage error.

Beam's own logs stay at `--beam_log_level` (WARNING by default) in this process and in the
pipeline's workers, so that a run shows its own progress lines and errors, not Beam's start-up
and channel messages; `--beam_log_level=INFO` brings those back. keras_bert's loggers keep, in
the workers, the levels they have in this process (`sdk_harness_log_level_overrides`).

`create_pipeline` makes the `beam.Pipeline`; on the DirectRunner it runs on Beam's FnApiRunner.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
from typing import Iterable, Mapping

DEFAULT_RUNNER = "DirectRunner"
DEFAULT_LOG_LEVEL = "WARNING"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# The command of a DirectRunner worker process (direct_running_mode=multi_processing) in Beam
# 2.77; create_pipeline's runner starts `worker_command(options)` instead.
BEAM_WORKER_COMMAND = f"{sys.executable} -m apache_beam.runners.worker.sdk_worker_main"
# The pipeline options that set the log levels of Beam's SDK harness (the workers).
HARNESS_LOG_OPTIONS = ("default_sdk_harness_log_level", "sdk_harness_log_level_overrides")


def define_flags(default_num_workers: int = 1) -> None:
    """Defines --runner, --beam_pipeline_options, --num_workers and --beam_log_level on absl's
    FLAGS, listed by the calling recipe's `--help`, and sets Beam's loggers to DEFAULT_LOG_LEVEL
    until `create_pipeline` applies the flag (Beam logs at INFO on import, after absl's start)."""
    from absl import flags

    from keras_bert.cli import calling_module_name

    logging.getLogger("apache_beam").setLevel(DEFAULT_LOG_LEVEL)
    mine = {"module_name": calling_module_name()}  # listed by the calling recipe's --help

    flags.DEFINE_string(
        "runner",
        DEFAULT_RUNNER,
        "Apache Beam runner: DirectRunner (this machine), DataflowRunner, FlinkRunner, "
        "SparkRunner, PortableRunner (docs/beam.md).",
        **mine,
    )
    flags.DEFINE_string(
        "beam_pipeline_options",
        "",
        'Other Beam pipeline options as "key=value,key=value" (for example '
        '"project=p,region=r,temp_location=gs://b/tmp" for Dataflow).',
        **mine,
    )
    flags.DEFINE_integer(
        "num_workers",
        default_num_workers,
        "DirectRunner only: worker processes (direct_num_workers; 1 = in this process).",
        **mine,
    )
    flags.DEFINE_enum(
        "beam_log_level",
        DEFAULT_LOG_LEVEL,
        list(LOG_LEVELS),
        "Level of Apache Beam's own logs, in this process and in the pipeline's workers "
        "(default_sdk_harness_log_level): INFO shows Beam's start-up and worker messages.",
        **mine,
    )


def parse_option_pairs(text: str) -> dict[str, str]:
    """`"a=1,b=x"` -> {"a": "1", "b": "x"}; a leading `--` on a key is allowed.

    Raises:
        ValueError: an item without `=` or with an empty key, naming the item.
    """
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not sep or not key:
            raise ValueError(
                f"--beam_pipeline_options item {item!r} is not key=value "
                '(give "key=value,key=value")'
            )
        out[key] = value.strip()
    return out


def own_log_levels() -> dict[str, str]:
    """The levels of keras_bert's loggers in this process, for `sdk_harness_log_level_overrides`:
    the package's effective level and that of every logger under it given a level of its own."""
    levels = {
        "keras_bert": logging.getLevelName(logging.getLogger("keras_bert").getEffectiveLevel())
    }
    for name, logger in sorted(logging.root.manager.loggerDict.items()):
        if name.startswith("keras_bert.") and isinstance(logger, logging.Logger) and logger.level:
            levels[name] = logging.getLevelName(logger.level)
    return levels


def pipeline_args(
    runner: str,
    beam_pipeline_options: str,
    num_workers: int,
    num_workers_given: bool,
    log_level: str | None = None,
    worker_log_levels: Mapping[str, str] | None = None,
) -> list[str]:
    """The command-line arguments of Beam's PipelineOptions for these flags.

    Args:
        log_level: --beam_log_level when given (None: default_sdk_harness_log_level from
            `beam_pipeline_options`, else DEFAULT_LOG_LEVEL).
        worker_log_levels: logger name -> level in the workers (`own_log_levels()`), under any
            sdk_harness_log_level_overrides of `beam_pipeline_options` (those win).

    Raises:
        ValueError: a malformed --beam_pipeline_options or log level, num_workers < 1, or
            --num_workers or --beam_log_level given beside a different direct_num_workers or
            default_sdk_harness_log_level.
    """
    options = parse_option_pairs(beam_pipeline_options)
    if (
        log_level is not None
        and options.get("default_sdk_harness_log_level", log_level) != log_level
    ):
        raise ValueError(
            f"--beam_log_level={log_level} and default_sdk_harness_log_level="
            f"{options['default_sdk_harness_log_level']} in --beam_pipeline_options disagree"
        )
    level = options.setdefault("default_sdk_harness_log_level", log_level or DEFAULT_LOG_LEVEL)
    if not (level.isdecimal() or isinstance(logging.getLevelName(level), int)):
        raise ValueError(
            f"default_sdk_harness_log_level={level} in --beam_pipeline_options is not a log "
            "level (DEBUG, INFO, WARNING, ERROR, CRITICAL or a number)"
        )
    if num_workers < 1:
        raise ValueError(f"--num_workers={num_workers} must be >= 1")
    if "runner" in options and options["runner"] != runner:
        raise ValueError(
            f"--runner={runner} and runner={options['runner']} in --beam_pipeline_options "
            "disagree: give the runner once"
        )
    options.pop("runner", None)
    if runner == DEFAULT_RUNNER:
        if "direct_num_workers" in options:
            if num_workers_given and int(options["direct_num_workers"]) != num_workers:
                raise ValueError(
                    f"--num_workers={num_workers} and direct_num_workers="
                    f"{options['direct_num_workers']} in --beam_pipeline_options disagree"
                )
            num_workers = int(options["direct_num_workers"])
        options["direct_num_workers"] = str(num_workers)
        if num_workers > 1:
            options.setdefault("direct_running_mode", "multi_processing")
    ours = []  # before the user's own overrides, which Beam merges over them
    if worker_log_levels:
        ours = [f"--sdk_harness_log_level_overrides={json.dumps(dict(worker_log_levels))}"]
    return [f"--runner={runner}", *ours] + [f"--{k}={v}" for k, v in options.items()]


def pipeline_options_from_flags():
    """Beam `PipelineOptions` from the absl flags defined by `define_flags` (after parsing)."""
    from absl import flags
    from apache_beam.options.pipeline_options import PipelineOptions

    f = flags.FLAGS
    return PipelineOptions(
        pipeline_args(
            f.runner,
            f.beam_pipeline_options,
            f.num_workers,
            f["num_workers"].present > 0,
            f.beam_log_level if f["beam_log_level"].present else None,
            own_log_levels(),
        )
    )


def is_direct_runner(options) -> bool:
    """Whether `options` (Beam `PipelineOptions`, or None) name the DirectRunner (the default)."""
    from apache_beam.options.pipeline_options import StandardOptions

    runner = options.view_as(StandardOptions).runner if options is not None else None
    if runner is None:
        return True
    name = runner if isinstance(runner, str) else type(runner).__name__
    return name.lower().removesuffix("runner") == "direct"


def create_pipeline(options=None):
    """The `beam.Pipeline` of `options` (None: the DirectRunner in this process).

    On the DirectRunner the pipeline runs on Beam's FnApiRunner, in this process or in
    direct_num_workers worker processes (direct_running_mode). Beam's DirectRunner would choose
    by itself: first Prism, whose binary it downloads from GitHub at run time (offline it logs the
    failed download and falls back), then the FnApiRunner, and for a pipeline with a stateful
    DoFn holding a processing-time timer, as `BatchElements(max_batch_duration_secs=...)` (batch
    prediction's length-bucketed batching) does, its bundle-based runner. That one, in Beam 2.77,
    fails with a bare AssertionError when no batch of a bucket fills before the end of the input
    (the batches flushed at the window's end reach a GroupByKey that has already completed;
    apache/beam#28716) and runs in one process whatever direct_num_workers says. The FnApiRunner
    runs every pipeline here, the same on every machine. Other runners are Beam's.

    Sets Beam's loggers in this process to the options' default_sdk_harness_log_level, the level
    of Beam's logs in the workers, when the options give one.
    """
    import apache_beam as beam
    from apache_beam.options.pipeline_options import WorkerOptions

    if options is not None:
        level = options.view_as(WorkerOptions).default_sdk_harness_log_level
        if level is not None:  # a level name or number, as Beam's workers take it
            logging.getLogger("apache_beam").setLevel(int(level) if level.isdecimal() else level)
    if is_direct_runner(options):
        return beam.Pipeline(runner=_direct_runner(), options=options)
    return beam.Pipeline(options=options)


def worker_command(options) -> str:
    """The shell command of a DirectRunner worker process: `python -m keras_bert.beam_worker`
    with the HARNESS_LOG_OPTIONS that `options` (Beam `PipelineOptions`) set, as JSON.

    Beam's FnApiRunner hands its worker processes no pipeline options (their harness logs
    "Pipeline_options: {}" and stays at INFO), so the harness' log options travel in the command.
    """
    from apache_beam.options.pipeline_options import WorkerOptions

    worker = options.view_as(WorkerOptions)
    harness = {k: getattr(worker, k) for k in HARNESS_LOG_OPTIONS if getattr(worker, k) is not None}
    return f"{sys.executable} -m keras_bert.beam_worker {shlex.quote(json.dumps(harness))}"


def _direct_runner():
    """Beam's FnApiRunner, whose worker processes (multi_processing) run `worker_command`."""
    from apache_beam.portability import python_urns
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    class DirectRunner(FnApiRunner):
        def run_via_runner_api(self, pipeline_proto, options):
            for environment in pipeline_proto.components.environments.values():
                if (
                    environment.urn == python_urns.SUBPROCESS_SDK
                    and environment.payload == BEAM_WORKER_COMMAND.encode()
                ):
                    environment.payload = worker_command(options).encode()
            return super().run_via_runner_api(pipeline_proto, options)

    return DirectRunner()


def pipeline_options(args: Iterable[str] = ()):
    """Beam `PipelineOptions` from command-line style arguments (library callers and tests)."""
    from apache_beam.options.pipeline_options import PipelineOptions

    return PipelineOptions(list(args))
