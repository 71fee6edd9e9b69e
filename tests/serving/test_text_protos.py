"""serving.text_protos: the server's one text-proto parser."""

import pytest
from google.protobuf import text_format
from tensorflow.core.protobuf import struct_pb2
from tensorflow_serving.config import model_server_config_pb2

from serving import text_protos
from serving.server import model_configs


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
    # Found by the model_config fuzz target: a RecursionError escaped the server's start-up
    # (a traceback) and ended the config file poller's thread.
    shallow = text_protos.parse(_nested_any(3), model_server_config_pb2.ModelServerConfig())
    assert shallow.custom_model_config.type_url.endswith("tensorflow.StructuredValue")
    with pytest.raises(text_format.ParseError) as raised:
        text_protos.parse(_nested_any(400), model_server_config_pb2.ModelServerConfig())
    assert str(raised.value) == (
        "messages nested too deeply for a text-format tensorflow.serving.ModelServerConfig"
    )
    path = tmp_path / "models.config"
    path.write_text(_nested_any(400))
    with pytest.raises(text_format.ParseError, match="^messages nested too deeply"):
        model_configs(model_config_file=str(path))
