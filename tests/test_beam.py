"""keras_bert.beam: the shared Beam flags' options and the runner a pipeline gets."""

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


def test_the_direct_runner_runs_on_the_fn_api_runner_other_runners_are_beams():
    args = beam_pipelines.pipeline_args("DirectRunner", "", 2, True)
    assert args == [
        "--runner=DirectRunner",
        "--direct_num_workers=2",
        "--direct_running_mode=multi_processing",
    ]
    assert isinstance(beam_pipelines.create_pipeline(options(*args)).runner, FnApiRunner)
    assert isinstance(beam_pipelines.create_pipeline(None).runner, FnApiRunner)
    made = beam_pipelines.create_pipeline(options("--runner=PortableRunner"))
    assert type(made.runner).__name__ == "PortableRunner"
