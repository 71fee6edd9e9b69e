"""serving.wire.text_protos: the server's one text-proto parser, and what the server says about a
config file it cannot use."""

import subprocess
import sys

import pytest
from google.protobuf import text_format
from tensorflow.core.protobuf import struct_pb2
from tensorflow_serving.config import model_server_config_pb2

from serving.wire import text_protos
from serving.server import model_configs
from tests.conftest import REPO_ROOT
from tests.serving.conftest import START_TIMEOUT_S


def _nested_any(depth: int) -> str:
    """A ModelServerConfig whose custom_model_config nests `depth` tensorflow.StructuredValue
    lists (a recursive message TensorFlow registers in the process)."""
    assert struct_pb2.StructuredValue  # registered, as in a server that loaded TensorFlow
    inner = "list_value { values { " * depth + "} } " * depth
    return (
        f"custom_model_config {{ [type.googleapis.com/tensorflow.StructuredValue] {{ {inner}}} }}"
    )


def test_parse_fills_the_message():
    config = text_protos.parse(
        'model_config_list { config { name: "a" base_path: "/m" } }',
        model_server_config_pb2.ModelServerConfig(),
    )
    assert [(c.name, c.base_path) for c in config.model_config_list.config] == [("a", "/m")]


def test_nesting_past_the_recursion_limit_is_a_parse_error(tmp_path):
    # Found with the model_config fuzz target: a RecursionError escaped the server's start-up
    # (a traceback) and ended the config file poller's thread.
    shallow = text_protos.parse(_nested_any(3), model_server_config_pb2.ModelServerConfig())
    assert shallow.custom_model_config.type_url.endswith("tensorflow.StructuredValue")
    with pytest.raises(text_format.ParseError) as raised:
        text_protos.parse(_nested_any(400), model_server_config_pb2.ModelServerConfig())
    assert str(raised.value) == (
        "not a text-format tensorflow.serving.ModelServerConfig: messages nested too deeply"
    )
    path = tmp_path / "models.config"
    path.write_text(_nested_any(400))
    with pytest.raises(text_format.ParseError) as raised:
        model_configs(model_config_file=str(path))
    assert str(raised.value) == (
        f"{path}: not a text-format tensorflow.serving.ModelServerConfig: messages nested too "
        "deeply"
    )


@pytest.mark.slow
def test_a_bad_config_file_ends_the_server_with_one_line(tmp_path):
    # Found while fuzzing the config files: the server's documented config errors reached
    # absl's UsageError, which printed the whole module docstring and the flags (157 lines) and
    # exited 1; now one line and exit status 2, as for --ssl_config_file.
    model_config = tmp_path / "models.config"
    model_config.write_text('model_config_list { config { name: "a" ')
    batching = tmp_path / "batching.config"
    batching.write_text("max_batch_size { value: 0 }")
    good = tmp_path / "good.config"
    good.write_text(f'model_config_list {{ config {{ name: "a" base_path: "{tmp_path}" }} }}')
    runs = {
        f"{model_config}: not a text-format tensorflow.serving.ModelServerConfig: 1:36 : "
        'Expected "}".': [f"--model_config_file={model_config}"],
        f"--batching_parameters_file {batching}: batching parameters must be positive": [
            f"--model_config_file={good}",
            "--enable_batching",
            f"--batching_parameters_file={batching}",
        ],
    }
    procs = {
        want: subprocess.Popen(
            [sys.executable, "-m", "serving.server", "--port=0", "--rest_api_port=0", *args],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for want, args in runs.items()
    }
    for want, proc in procs.items():
        try:
            _, err = proc.communicate(timeout=START_TIMEOUT_S)
        finally:
            proc.kill()
        assert proc.returncode == 2, err[-2000:]
        last = err.strip().splitlines()[-1]
        assert last.startswith("serving.server: error: ") and want in last, err[-2000:]
        assert "Traceback" not in err and "python -m serving.server`" not in err
