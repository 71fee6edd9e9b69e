"""What the Apache Beam pipelines (pretraining data, batch prediction) share: their flags and how
they become Beam `PipelineOptions`.

Every pipeline runs on the runner given by `--runner` (`DirectRunner` by default: in process, or
`--num_workers` local processes) and takes any other Beam pipeline option as
`--beam_pipeline_options="key=value,key=value"`, the convention of tensorflow-datasets: for
example `project=my-project,region=us-central1,temp_location=gs://my-bucket/tmp` for Dataflow,
`flink_master=host:8081` for Flink. docs/beam.md has the commands per runner.

A value the user gave is never overridden: `--num_workers` maps to the DirectRunner's
`direct_num_workers` (and `direct_running_mode=multi_processing` when above 1) only when
`--beam_pipeline_options` does not set those itself; both given and different is a usage error.

`create_pipeline` makes the `beam.Pipeline`; on the DirectRunner it runs on Beam's FnApiRunner.
"""

from __future__ import annotations

from typing import Iterable

DEFAULT_RUNNER = "DirectRunner"


def define_flags(default_num_workers: int = 1) -> None:
    """Defines --runner, --beam_pipeline_options and --num_workers on absl's FLAGS, listed by the
    calling recipe's `--help`."""
    from absl import flags

    from keras_bert.cli import calling_module_name

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


def pipeline_args(
    runner: str, beam_pipeline_options: str, num_workers: int, num_workers_given: bool
) -> list[str]:
    """The command-line arguments of Beam's PipelineOptions for these flags.

    Raises:
        ValueError: a malformed --beam_pipeline_options, num_workers < 1, or --num_workers given
            beside a different direct_num_workers.
    """
    options = parse_option_pairs(beam_pipeline_options)
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
    return [f"--runner={runner}"] + [f"--{k}={v}" for k, v in options.items()]


def pipeline_options_from_flags():
    """Beam `PipelineOptions` from the absl flags defined by `define_flags` (after parsing)."""
    from absl import flags
    from apache_beam.options.pipeline_options import PipelineOptions

    f = flags.FLAGS
    return PipelineOptions(
        pipeline_args(
            f.runner, f.beam_pipeline_options, f.num_workers, f["num_workers"].present > 0
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
    """
    import apache_beam as beam

    if is_direct_runner(options):
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        return beam.Pipeline(runner=FnApiRunner(), options=options)
    return beam.Pipeline(options=options)


def pipeline_options(args: Iterable[str] = ()):
    """Beam `PipelineOptions` from command-line style arguments (library callers and tests)."""
    from apache_beam.options.pipeline_options import PipelineOptions

    return PipelineOptions(list(args))
