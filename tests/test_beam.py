"""keras_bert.beam: the shared Beam flags' options and the runner a pipeline gets."""

import apache_beam as beam
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from keras_bert import beam as beam_pipelines


def options(*args):
    return beam_pipelines.pipeline_options(args)


def test_the_direct_runner_is_recognised_by_every_spelling_and_by_default():
    assert beam_pipelines.is_direct_runner(None)
    assert beam_pipelines.is_direct_runner(options())
    for name in ("DirectRunner", "direct"):
        assert beam_pipelines.is_direct_runner(options(f"--runner={name}")), name
    for name in ("DataflowRunner", "FlinkRunner", "PortableRunner", "PrismRunner"):
        assert not beam_pipelines.is_direct_runner(options(f"--runner={name}")), name


def test_stateful_batching_on_the_direct_runner_runs_on_the_fn_api_runner():
    args = beam_pipelines.pipeline_args("DirectRunner", "", 2, True)
    assert args == [
        "--runner=DirectRunner",
        "--direct_num_workers=2",
        "--direct_running_mode=multi_processing",
    ]
    made = beam_pipelines.create_pipeline(options(*args), stateful_batching=True)
    assert isinstance(made.runner, FnApiRunner)
    # Without stateful batching the DirectRunner chooses (Prism or the FnApiRunner).
    plain = beam_pipelines.create_pipeline(options(*args))
    assert type(plain.runner).__name__ == "SwitchingDirectRunner"
    assert isinstance(beam_pipelines.create_pipeline(None, stateful_batching=True), beam.Pipeline)
