"""keras_bert.beam: the shared Beam flags' options, the runner a pipeline gets, and the level of
Beam's logs here and in the DirectRunner's worker processes (keras_bert.beam_worker)."""

import json
import logging
import sys

import pytest
from apache_beam.options.pipeline_options import WorkerOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from keras_bert import beam as beam_pipelines
from keras_bert import beam_worker
from tests.recipes.beam_logs import beam_info_lines


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
        "--default_sdk_harness_log_level=WARNING",
        "--direct_num_workers=2",
        "--direct_running_mode=multi_processing",
    ]
    assert isinstance(beam_pipelines.create_pipeline(options(*args)).runner, FnApiRunner)
    assert isinstance(beam_pipelines.create_pipeline(None).runner, FnApiRunner)
    made = beam_pipelines.create_pipeline(options("--runner=PortableRunner"))
    assert type(made.runner).__name__ == "PortableRunner"


def test_beams_logs_default_to_warning_and_a_given_level_is_kept():
    def args(options="", log_level=None, levels=None):
        return beam_pipelines.pipeline_args("DirectRunner", options, 1, False, log_level, levels)

    assert args() == [
        "--runner=DirectRunner",
        "--default_sdk_harness_log_level=WARNING",
        "--direct_num_workers=1",
    ]
    assert args(log_level="INFO")[1] == "--default_sdk_harness_log_level=INFO"
    assert args("default_sdk_harness_log_level=ERROR")[1] == "--default_sdk_harness_log_level=ERROR"
    assert args("default_sdk_harness_log_level=INFO", "INFO")[1] == (
        "--default_sdk_harness_log_level=INFO"
    )
    with pytest.raises(ValueError) as e:
        args("default_sdk_harness_log_level=ERROR", "INFO")
    assert str(e.value) == (
        "--beam_log_level=INFO and default_sdk_harness_log_level=ERROR in "
        "--beam_pipeline_options disagree"
    )
    with pytest.raises(ValueError) as e:
        args("default_sdk_harness_log_level=info")
    assert str(e.value) == (
        "default_sdk_harness_log_level=info in --beam_pipeline_options is not a log level "
        "(DEBUG, INFO, WARNING, ERROR, CRITICAL or a number)"
    )
    assert args("default_sdk_harness_log_level=20")[1] == "--default_sdk_harness_log_level=20"
    # keras_bert's levels go first; the user's own overrides are merged over them by Beam
    made = args(
        'sdk_harness_log_level_overrides={"keras_bert.x": "DEBUG"}',
        levels={"keras_bert": "INFO", "keras_bert.x": "WARNING"},
    )
    assert made[1] == (
        '--sdk_harness_log_level_overrides={"keras_bert": "INFO", "keras_bert.x": "WARNING"}'
    )
    worker = options(*made).view_as(WorkerOptions)
    assert worker.sdk_harness_log_level_overrides == {"keras_bert": "INFO", "keras_bert.x": "DEBUG"}
    assert worker.default_sdk_harness_log_level == "WARNING"


def test_own_log_levels_are_keras_berts_effective_and_explicit_levels():
    named = logging.getLogger("keras_bert.test_beam_probe")
    package = logging.getLogger("keras_bert")
    try:
        package.setLevel(logging.INFO)
        named.setLevel(logging.ERROR)
        levels = beam_pipelines.own_log_levels()
        assert levels["keras_bert"] == "INFO"
        assert levels["keras_bert.test_beam_probe"] == "ERROR"
        assert "keras_bert.test_beam_probe_unset" not in levels
        logging.getLogger("keras_bert.test_beam_probe_unset")  # no level of its own: not listed
        assert "keras_bert.test_beam_probe_unset" not in beam_pipelines.own_log_levels()
    finally:
        package.setLevel(logging.NOTSET)
        named.setLevel(logging.NOTSET)


def test_create_pipeline_sets_beams_loggers_here_to_the_harness_level():
    beam_logger = logging.getLogger("apache_beam")
    before = beam_logger.level
    try:
        for given, level in (("INFO", logging.INFO), ("ERROR", logging.ERROR), ("10", 10)):
            beam_pipelines.create_pipeline(options(f"--default_sdk_harness_log_level={given}"))
            assert beam_logger.level == level, given
        beam_pipelines.create_pipeline(options())  # no level given: left as it is
        assert beam_logger.level == 10
    finally:
        beam_logger.setLevel(before)


def test_worker_processes_get_the_harness_log_options_in_their_command():
    made = options(
        "--default_sdk_harness_log_level=WARNING",
        '--sdk_harness_log_level_overrides={"keras_bert": "INFO"}',
    )
    assert beam_pipelines.worker_command(made) == (
        f"{sys.executable} -m keras_bert.beam_worker "
        """'{"default_sdk_harness_log_level": "WARNING", """
        """"sdk_harness_log_level_overrides": {"keras_bert": "INFO"}}'"""
    )
    assert beam_pipelines.worker_command(options()) == (
        f"{sys.executable} -m keras_bert.beam_worker '{{}}'"
    )
    # The worker: the command's options under those the runner sent (FnApiRunner sends none)
    argv = ["beam_worker", json.dumps({"default_sdk_harness_log_level": "WARNING", "x": 1})]
    assert beam_worker.harness_options(argv, {"PIPELINE_OPTIONS": "{}"}) == {
        "default_sdk_harness_log_level": "WARNING",
        "x": 1,
    }
    sent = json.dumps({"beam:option:default_sdk_harness_log_level:v1": "ERROR"})
    assert beam_worker.harness_options(argv, {"PIPELINE_OPTIONS": sent}) == {
        "default_sdk_harness_log_level": "ERROR",
        "x": 1,
    }
    assert beam_worker.harness_options(["beam_worker"], {}) == {}


def test_beam_info_lines_counts_every_form_beams_records_take():
    output = "\n".join(
        [
            "I1205 01:51:44.474897 140246865656704 worker_handlers.py:525] starting control server",
            "I1205 01:51:51.006203 140243541935808 local_job_service.py:367] Worker: severity: "
            'INFO message: "Logging handler created."',
            "INFO:__main__:Logging handler created.",
            "INFO:apache_beam.runners.worker.sdk_worker:Control channel established.",
            "DEBUG:apache_beam:a debug record",
            # not Beam's INFO: a warning, our own records, our printed summary
            "W1205 01:51:43.399779 140246865656704 core.py:1790] Key coder ...",
            "WARNING:apache_beam.runners.worker.sdk_worker_main:No semi_persistent_directory",
            "I1205 02:03:31.719154 139726400846720 pretraining_beam.py:110] pretraining data: ...",
            "INFO:keras_bert.data.pretraining_beam:pretraining data: group 0 made 335 instances",
            "rows read 24, predicted 24, errors 0",
        ]
    )
    assert beam_info_lines(output) == output.splitlines()[:5]
