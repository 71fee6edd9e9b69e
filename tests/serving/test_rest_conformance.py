"""REST conformance with TensorFlow Serving's own test cases, against a real server subprocess.

Every case below carries the name of the TF Serving test it comes from
(tensorflow_serving/util/json_tensor_test.cc "JT", model_servers/http_rest_api_handler_test.cc "H")
and uses that test's input and expected output. The tensor maps of json_tensor_test.cc are
signatures of the echo model (tests/serving/saved_models.py ECHO_SIGNATURES: every input comes back
unchanged as the output of the same name), so a response shows the tensor the server decoded; the
handler tests use half_plus_two (y = 0.5 x + 2) at version 123, as TF Serving's do.
docs/deployment.md lists the counts and the deliberate differences.
"""

import base64
import json
import math
import sys
import urllib.error
import urllib.request

import pytest
from google.protobuf import json_format
from tensorflow_serving.apis import classification_pb2, regression_pb2

from serving.wire import json_tensor
from tests.serving import saved_models
from tests.serving.conftest import ServerProcess

HP2 = "/v1/models/hp2"
ECHO = "/v1/models/echo:predict"
DBL_MAX = (
    "%g" % sys.float_info.max
)  # absl::Substitute prints a double with six digits: 1.79769e+308


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("conformance")
    saved_models.build_echo(str(base / "echo" / "1"))
    saved_models.build_half_plus_two(str(base / "hp2" / "123"))
    (base / "models.config").write_text("""
model_config_list {
  config { name: "echo" base_path: "echo" model_platform: "tensorflow" }
  config { name: "hp2" base_path: "hp2" model_platform: "tensorflow"
           model_version_policy { specific { versions: 123 } }
           version_labels { key: "stable" value: 123 } }
}
""")
    process = ServerProcess(
        [f"--model_config_file={base / 'models.config'}", "--file_system_poll_wait_seconds=0"],
        base / "server.log",
    )
    try:
        yield process.wait_serving()
    finally:
        process.stop()


def http(server, method, path, body=None):
    """(status, content type, body text) of one REST call; body is sent as given (str)."""
    data = None if body is None else body.encode()
    request = urllib.request.Request(server.rest_url + path, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def as_strings(text):
    """JSON with every number kept as its text (json_tensor_test.cc CompareJsonAllValuesAsStrings)."""
    return json.loads(text, parse_float=str, parse_int=str, parse_constant=str)


def same_json(got, want):
    """CompareJson: numbers compared as numbers (NaN equal to NaN), objects regardless of key order."""
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and set(got) == set(want)
            and all(same_json(got[k], want[k]) for k in want)
        )
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(same_json, got, want))
    return got == want and type(got) is not bool or got is want


# ---------------------------------------------------------------- requests decoded as TF Serving does
# (TF test, signature, request body, expected predictions/outputs: the decoded tensor echoed back)
DECODE_CASES = [
    (
        "JT SingleUnnamedTensor",
        "int32",
        '{"instances": [[1,2],[3,4],[5,6]]}',
        {"predictions": [[1, 2], [3, 4], [5, 6]]},
    ),
    (
        "JT MixedInputForFloatTensor",
        "float",
        '{"instances": [1, 2.0, 3, 4, 5.003, 0.007, 0.0]}',
        '{"predictions": [1.0, 2.0, 3.0, 4.0, 5.003, 0.007, 0.0]}',
    ),
    (
        "JT MixedInputForDoubleTensor",
        "double",
        '{"instances": [1.0, 2, 3, 4, 0.662, 0, 0.0]}',
        '{"predictions": [1.0, 2.0, 3.0, 4.0, 0.662, 0.0, 0.0]}',
    ),
    (
        "JT SingleUnnamedTensorWithSignature",
        "predict_images",
        '{"signature_name": "predict_images", "instances": [[1,2]]}',
        {"predictions": [[1, 2]]},
    ),
    (
        "JT SingleUnnamedTensorBase64Scalars",
        "string",
        '{"instances": [ { "b64" : "aGVsbG8=" }, { "b64": "d29ybGQ=" } ]}',
        {"predictions": ["hello", "world"]},
    ),
    (
        "JT SingleUnnamedTensorBase64Lists",
        "string",
        '{"instances": [ [{ "b64" : "aGVsbG8=" }], [{ "b64": "d29ybGQ=" }] ]}',
        {"predictions": [["hello"], ["world"]]},
    ),
    (
        "JT SingleNamedTensorBase64",
        "string",
        '{"instances": [{"default": [ [{ "b64" : "aGVsbG8=" }], [{ "b64": "d29ybGQ=" }] ]}]}',
        {"predictions": [[["hello"], ["world"]]]},
    ),
    (
        "JT MultipleNamedTensor",
        "multi",
        """{"instances": [
        {"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"], "float_tensor": [1.0, NaN],
         "dbl_tensor": [NaN]},
        {"int_tensor": [[7,8],[9,0],[1,2]], "str_tensor": ["baz", "bat"], "float_tensor": [2.0, Infinity],
         "dbl_tensor": [2.0]}]}""",
        '{"predictions": [{"dbl_tensor": [NaN], "float_tensor": [1.0, NaN], "int_tensor": [[1,2],[3,4],[5,6]],'
        ' "str_tensor": ["foo", "bar"]}, {"dbl_tensor": [2.0], "float_tensor": [2.0, Infinity],'
        ' "int_tensor": [[7,8],[9,0],[1,2]], "str_tensor": ["baz", "bat"]}]}',
    ),
    (
        "JT SingleUnnamedTensorColumnarFormat (named)",
        "int_tensor",
        '{"inputs": {"int_tensor": [[[1,2],[3,4],[5,6]]]}}',
        {"outputs": [[[1, 2], [3, 4], [5, 6]]]},
    ),
    (
        "JT SingleUnnamedTensorColumnarFormat (unnamed)",
        "int_tensor",
        '{"inputs": [[[1,2],[3,4],[5,6]]]}',
        {"outputs": [[[1, 2], [3, 4], [5, 6]]]},
    ),
    (
        "JT MultipleNamedTensorColumnarFormat",
        "int_str_bin",
        """{"inputs": {
        "int_tensor": [[[1,2],[3,4],[5,6]]], "str_tensor": ["foo", "bar"], "bin_tensor": { "b64" : "aGVsbG8=" }}}""",
        {
            "outputs": {
                "int_tensor": [[[1, 2], [3, 4], [5, 6]]],
                "str_tensor": ["foo", "bar"],
                "bin_tensor": "hello",
            }
        },
    ),
]


@pytest.mark.parametrize("case,signature,body,want", DECODE_CASES, ids=[c[0] for c in DECODE_CASES])
def test_request_decoding(server, case, signature, body, want):
    if '"signature_name"' not in body:
        body = f'{{"signature_name": "{signature}", ' + body.lstrip()[1:]
    status, content_type, text = http(server, "POST", ECHO, body)
    assert (status, content_type) == (200, "application/json"), text
    if isinstance(want, str):  # numbers compared as written (TF's float formatting)
        assert as_strings(text) == as_strings(want)
    else:
        assert same_json(json.loads(text), want), text


# ---------------------------------------------------------------- request errors: status and meaning
# (TF test, path, body, HTTP status, fragment of TF Serving's error message)
ERROR_CASES = [
    (
        "JT SingleUnnamedTensorErrors: empty document",
        ECHO,
        "",
        400,
        "JSON Parse error: The document is empty",
    ),
    (
        "JT SingleUnnamedTensorErrors: signature_name 5",
        ECHO,
        '{"signature_name": 5, "instances": [[1,2],[3,4],[5,6,7]]}',
        400,
        "must be a string value",
    ),
    (
        "JT SingleUnnamedTensorErrors: both keys",
        ECHO,
        '{"signature_name": "int32", "instances": [[1,2],[3,4],[5,6,7]], "inputs": [[1,2],[3,4],[5,6,7]]}',
        400,
        "Not formatted correctly",
    ),
    (
        "JT SingleUnnamedTensorErrors: tensor size",
        ECHO,
        '{"signature_name": "int32", "instances": [[1,2],[3,4],[5,6,7]]}',
        400,
        "Expecting tensor size",
    ),
    (
        "JT SingleUnnamedTensorErrors: nested shape",
        ECHO,
        '{"signature_name": "int32", "instances": [[1,2],[3,4],[[5,6]]]}',
        400,
        "Expecting shape",
    ),
    (
        "JT SingleUnnamedTensorErrors: scalar then list",
        ECHO,
        '{"signature_name": "int32", "instances": [1, [1]]}',
        400,
        "Expecting shape",
    ),
    (
        "JT SingleUnnamedTensorErrors: string for int32",
        ECHO,
        '{"signature_name": "int32", "instances": [[1,2],["a", "b"]]}',
        400,
        "not of expected type",
    ),
    (
        "JT SingleUnnamedTensorErrors: DBL_MAX for float",
        ECHO,
        f'{{"signature_name": "float", "instances": [{DBL_MAX}]}}',
        400,
        "loss of precision",
    ),
    (
        "JT SingleUnnamedTensorErrors: 16777217 for float",
        ECHO,
        '{"signature_name": "float", "instances": [16777217]}',
        400,
        "loss of precision",
    ),
    (
        "JT SingleUnnamedTensorErrors: 9007199254740993 for double",
        ECHO,
        '{"signature_name": "double", "instances": [9007199254740993]}',
        400,
        "loss of precision",
    ),
    (
        "JT MultipleNamedTensorErrors: shapes differ",
        ECHO,
        """{"signature_name": "int_and_str", "instances": [
        {"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"]},
        {"int_tensor": [[[7,8],[9,0],[1,2]]], "str_tensor": ["baz", "bat"]}]}""",
        400,
        "Expecting shape",
    ),
    (
        "JT MultipleNamedTensorErrors: sizes differ",
        ECHO,
        """{"signature_name": "int_and_str", "instances": [
        {"int_tensor": [[1,2],[3,4],[5,6],[7,8]], "str_tensor": ["foo", "bar"]},
        {"int_tensor": [[7,8],[9,0],[1,2]], "str_tensor": ["baz", "bat"]}]}""",
        400,
        "Expecting tensor size",
    ),
    (
        "JT MultipleNamedTensorErrors: object then list",
        ECHO,
        """{"signature_name": "int_and_str", "instances": [
        {"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"]}, [1, 20, 30],
        {"int_tensor": [[[7,8],[9,0],[1,2]]], "str_tensor": ["baz", "bat"]}]}""",
        400,
        "Expecting object but got list",
    ),
    (
        "JT MultipleNamedTensorErrors: list then object",
        ECHO,
        """{"signature_name": "str_tensor", "instances": [
        ["baz", "bar"], {"str_tensor": ["baz", "bat"]}]}""",
        400,
        "Expecting value/list but got object",
    ),
    (
        "H PredictRequestErrors: empty document",
        f"{HP2}:predict",
        "",
        400,
        "JSON Parse error: The document is empty",
    ),
    (
        "H PredictRequestErrors: bad JSON",
        f"{HP2}:predict",
        "instances = [1, 2]",
        400,
        "JSON Parse error: Invalid value",
    ),
    (
        "H PredictRequestErrors: incorrect type",
        f"{HP2}:predict",
        '{ "instances": ["x", "y"] }',
        400,
        "not of expected type: float$",
    ),
    (
        "H PredictRequestErrors: nonexistent label",
        f"{HP2}/labels/nonexistent:predict",
        '{ "instances": ["x", "y"] }',
        400,
        "Unrecognized servable version label",
    ),
    (
        "H PredictRequestErrors: signature_name 100",
        f"{HP2}:predict",
        '{ "signature_name": 100 }',
        400,
        "'signature_name' key must be a string value.",
    ),
    (
        "H PredictModelNameVersionErrors: unknown model",
        "/v1/models/foo:predict",
        '{ "instances": [1] }',
        404,
        "foo",
    ),
    (
        "H PredictModelNameVersionErrors: unknown model and version",
        "/v1/models/foo/versions/50:predict",
        '{ "instances": [1] }',
        404,
        "foo",
    ),
    (
        "H PredictModelNameVersionErrors: unknown version",
        "/v1/models/hp299:predict",
        '{ "instances": [1] }',
        404,
        "hp299",
    ),
    (
        "JT FromJsonSingleTensorErrors: complex64 output",
        ECHO,
        '{"signature_name": "complex", "instances": [1.0, 2.0]}',
        400,
        "tensor type: complex64",
    ),
    (
        "JT FromJsonSingleTensorErrors: no shape information",
        ECHO,
        '{"signature_name": "scalar_output", "instances": [1.0, 2.0]}',
        400,
        "has no shape information",
    ),
    (
        "JT FromJsonMultipleNamedTensorsErrors: inconsistent batch size",
        ECHO,
        '{"signature_name": "uneven_outputs", "instances": [1.0, 2.0]}',
        400,
        "inconsistent batch size",
    ),
]
for _verb in (
    "classify",
    "regress",
):  # JT ClassifyRegressRequestTest.JsonErrors, a typed test run for both
    ERROR_CASES += [
        (f"JT JsonErrors ({_verb}): {what}", f"{HP2}:{_verb}", body, 400, fragment)
        for what, body, fragment in [
            (
                "signature_name list",
                '{"signature_name": [ "hello" ], "examples": [ { "names": [ "foo", "bar" ] } ]}',
                "'signature_name' key must be a string",
            ),
            (
                "context list",
                '{"context": [ { "names": [ "foo", "bar" ] } ]}',
                "Example must be JSON object",
            ),
            ("examples object", '{"examples": { "names": [ "foo", "bar" ] }}', "list/array"),
            (
                "example list",
                '{"examples": [ [ { "names": [ "foo", "bar" ] } ] ]}',
                "Example must be JSON object",
            ),
            (
                "null element",
                '{"examples": [ { "names": [ 10, null ] } ]}',
                "names has element with unexpected JSON type: Null",
            ),
            (
                "int then float",
                '{"examples": [ { "names": [ 10, 10.0 ] } ]}',
                "feature: names expecting type: int64",
            ),
            (
                "object element",
                '{"examples": [ { "names": [ 10, { "test": 10 } ] } ]}',
                "names has element with unexpected JSON type: Object",
            ),
            (
                "nested list",
                '{"examples": [ { "names": [ [10], 20 ] } ]}',
                "names has element with unexpected JSON type: Array",
            ),
            (
                "uint64",
                '{"examples": [ { "names": [ 20, 18446744073709551603 ] } ]}',
                "Only int64 is supported",
            ),
            ("DBL_MAX", f'{{"examples": [ {{ "names": {DBL_MAX} }} ] }}', "loss of precision"),
        ]
    ]


@pytest.mark.parametrize(
    "case,path,body,status,fragment", ERROR_CASES, ids=[c[0] for c in ERROR_CASES]
)
def test_request_errors(server, case, path, body, status, fragment):
    got_status, content_type, text = http(server, "POST", path, body)
    assert (got_status, content_type) == (status, "application/json"), text
    error = json.loads(text)
    assert set(error) == {"error"}, error
    if fragment.endswith("$"):  # the message ends there ("float", TF's name, not "float32")
        assert error["error"].endswith(fragment[:-1]), error
    else:
        assert fragment in error["error"], error


# ---------------------------------------------------------------- response layouts and number formatting
_INT_2x3x2 = "[[[1,2],[3,4],[5,6]],[[7,8],[9,0],[1,2]]]"
ENCODE_CASES = [
    (
        "JT FromJsonSingleTensor (row)",
        f'{{"signature_name": "int32", "instances": {_INT_2x3x2}}}',
        f'{{"predictions": {_INT_2x3x2}}}',
    ),
    (
        "JT FromJsonSingleTensor (columnar)",
        f'{{"signature_name": "int32", "inputs": {_INT_2x3x2}}}',
        f'{{"outputs": {_INT_2x3x2}}}',
    ),
    (
        "JT FromJsonSingleScalarTensor (row)",
        '{"signature_name": "int32", "instances": [1, 2, 3, 4, 5]}',
        '{"predictions": [1, 2, 3, 4, 5]}',
    ),
    (
        "JT FromJsonSingleScalarTensor (columnar)",
        '{"signature_name": "int32", "inputs": [1, 2, 3, 4, 5]}',
        '{"outputs": [1, 2, 3, 4, 5]}',
    ),
    (
        "JT FromJsonSingleBytesTensor",
        '{"signature_name": "str_tensor_bytes", "instances": '
        '[["hello", "world"], ["tf", "serving"]]}',
        '{"predictions": [[{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}], [{"b64": "dGY="}, {"b64": "c2VydmluZw=="}]]}',
    ),
    (
        "JT FromJsonSingleFloatTensorSixDigitPrecision",
        '{"signature_name": "float", "instances": '
        "[[9000000, 999999, 0.50000], [0.0003, 0.00003, 555557.5]]}",
        '{"predictions": [[9e+06, 999999.0, 0.5], [0.0003, 3e-05, 555557.5]]}',
    ),
    (
        "JT FromJsonSingleFloatTensorNonFinite",
        '{"signature_name": "float", "instances": [[NaN, Infinity], [3, -Infinity]]}',
        '{"predictions": [[NaN, Infinity], [3.0, -Infinity]]}',
    ),
    (
        "JT FromJsonMultipleNamedTensors (row)",
        """{"signature_name": "five", "instances": [
        {"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"], "float_tensor": [1.0],
         "double_scalar_tensor": 8.0, "str_tensor_bytes": ["hello", "world"]},
        {"int_tensor": [[7,8],[9,0],[1,2]], "str_tensor": ["baz", "bat"], "float_tensor": [2.0],
         "double_scalar_tensor": 9.0, "str_tensor_bytes": ["tf", "serving"]}]}""",
        """{"predictions": [
      {"double_scalar_tensor": 8.0, "float_tensor": [1.0], "int_tensor": [[1, 2], [3, 4], [5, 6]],
       "str_tensor": ["foo", "bar"], "str_tensor_bytes": [ {"b64": "aGVsbG8="}, {"b64": "d29ybGQ="} ]},
      {"double_scalar_tensor": 9.0, "float_tensor": [2.0], "int_tensor": [[7, 8], [9, 0], [1, 2]],
       "str_tensor": ["baz", "bat"], "str_tensor_bytes": [ {"b64": "dGY="}, {"b64": "c2VydmluZw=="} ]}]}""",
    ),
    (
        "JT FromJsonMultipleNamedTensors (columnar)",
        """{"signature_name": "five", "inputs": {
        "int_tensor": [[[1,2],[3,4],[5,6]],[[7,8],[9,0],[1,2]]], "str_tensor": [["foo", "bar"], ["baz", "bat"]],
        "float_tensor": [[1.0], [2.0]], "double_scalar_tensor": [8.0, 9.0],
        "str_tensor_bytes": [["hello", "world"], ["tf", "serving"]]}}""",
        """{"outputs": {"double_scalar_tensor": [8.0, 9.0], "float_tensor": [[1.0], [2.0]],
      "int_tensor": [[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]],
      "str_tensor": [["foo", "bar"], ["baz", "bat"]],
      "str_tensor_bytes": [[{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}], [{"b64": "dGY="}, {"b64": "c2VydmluZw=="}]]}}""",
    ),
    (
        "JT JsonFromClassificationResult",
        None,
        '{"results": [[["car", 0.2], ["bike", 0.7], ["bus", 0.1]], [["car", 0.7], ["bike", 0.1], ["bus", 0.2]]]}',
    ),
    ("JT JsonFromRegressionResult", None, '{"results": [0.2, 0.9, 1.0]}'),
    (
        "JT JsonFromRegressionResultWithNonFinite",
        None,
        '{"results": [0.2, Infinity, 1.0, -Infinity, NaN]}',
    ),
]
_RESULT_REQUESTS = {  # the results above, produced by the echo signatures of half_plus_two
    "JT JsonFromClassificationResult": (
        ":classify",
        '{"signature_name": "classify_echo", "examples": '
        '[{"scores": [0.2, 0.7, 0.1]}, {"scores": [0.7, 0.1, 0.2]}]}',
    ),
    "JT JsonFromRegressionResult": (
        ":regress",
        '{"signature_name": "regress_echo", "examples": '
        '[{"value": 0.2}, {"value": 0.9}, {"value": 1.0}]}',
    ),
    "JT JsonFromRegressionResultWithNonFinite": (
        ":regress",
        '{"signature_name": "regress_echo", "examples": '
        '[{"value": 0.2}, {"value": Infinity}, {"value": 1.0}, '
        '{"value": -Infinity}, {"value": NaN}]}',
    ),
}


@pytest.mark.parametrize("case,body,want", ENCODE_CASES, ids=[c[0] for c in ENCODE_CASES])
def test_response_layout_and_numbers(server, case, body, want):
    path = ECHO
    if body is None:
        verb, body = _RESULT_REQUESTS[case]
        path = HP2 + verb
    status, content_type, text = http(server, "POST", path, body)
    assert (status, content_type) == (200, "application/json"), text
    assert as_strings(text) == as_strings(want)  # every number exactly as TF Serving prints it


# ---------------------------------------------------------------- paths, predict / classify / regress, status
# http_rest_api_handler_test.cc UnsupportedApiCalls and kPathRegex: (method, path, status, fragment)
PATH_CASES = [
    ("GET", "/v1/foo", 400, "Malformed request"),
    ("POST", "/v1/foo", 400, "Malformed request"),
    ("GET", "/v1/models", 400, "Missing model name"),
    ("GET", "/v1/models/debug/model_name", 400, "Malformed request"),
    ("POST", "/v1/models", 400, "Malformed request"),
    ("GET", "/v1/models/foo:predict", 400, "Malformed request"),
    ("GET", "/v1/models/foo/version/50:predict", 400, "Malformed request"),
    ("POST", "/v1/models/foo/version/50:regress", 400, "Malformed request"),
    ("POST", "/v1/models/foo/versions/HELLO:regress", 400, "Malformed request"),
    ("POST", f"/v1/models/foo/versions/{2**64 - 1}:regress", 400, "Failed to convert version"),
    ("POST", "/v1/models/foo/metadata", 400, "Malformed request"),
    ("POST", "/v1/models/foo/label/some_label:regress", 400, "Malformed request"),
    ("POST", "/v1/models/foo/versions/50/labels/some_label:regress", 400, "Malformed request"),
    ("POST", "/v1/models/foo/versions/some_label:regress", 400, "Malformed request"),
    ("GET", "/statuspage", 404, "Not Found"),  # kPathRegex: only /v1/... reaches the REST handler
    ("GET", "/index", 404, "Not Found"),
]


@pytest.mark.parametrize(
    "method,path,status,fragment", PATH_CASES, ids=[f"{m} {p}" for m, p, _, _ in PATH_CASES]
)
def test_paths(server, method, path, status, fragment):
    got_status, content_type, text = http(server, method, path, "" if method == "POST" else None)
    assert (got_status, content_type) == (status, "application/json"), text
    assert fragment in json.loads(text)["error"]


# (TF test, path, body, expected JSON): half_plus_two at version 123, label "stable" -> 123
CALL_CASES = [
    (
        "H Predict: latest",
        f"{HP2}:predict",
        '{"instances": [[1.0, 2.0], [3.0, 4.0]]}',
        {"predictions": [[2.5, 3.0], [3.5, 4.0]]},
    ),
    (
        "H Predict: version",
        f"{HP2}/versions/123:predict",
        '{"instances": [1.0, 2.0]}',
        {"predictions": [2.5, 3.0]},
    ),
    (
        "H Predict: label",
        f"{HP2}/labels/stable:predict",
        '{"instances": [1.0, 2.0]}',
        {"predictions": [2.5, 3.0]},
    ),
    (
        "H Predict: signature_name",
        f"{HP2}/versions/123:predict",
        '{"signature_name": "serving_default", "instances": [3.0, 4.0]}',
        {"predictions": [3.5, 4.0]},
    ),
    (
        "H Predict: columnar",
        f"{HP2}/versions/123:predict",
        '{"signature_name": "serving_default", "inputs": [3.0, 4.0]}',
        {"outputs": [3.5, 4.0]},
    ),
    (
        "H Regress: latest",
        f"{HP2}:regress",
        '{"signature_name": "regress_x_to_y", "examples": [ { "x": 80.0 } ] }',
        {"results": [42]},
    ),
    (
        "H Regress: version",
        f"{HP2}/versions/123:regress",
        '{"signature_name": "regress_x_to_y", "examples": [ { "x": 80.0 } ] }',
        {"results": [42]},
    ),
    (
        "H Regress: label",
        f"{HP2}/labels/stable:regress",
        '{"signature_name": "regress_x_to_y", "examples": [ { "x": 80.0 } ] }',
        {"results": [42]},
    ),
    (
        "H Classify: latest",
        f"{HP2}:classify",
        '{"signature_name": "classify_x_to_y", "examples": [ { "x": 20.0 } ] }',
        {"results": [[["", 12]]]},
    ),
    (
        "H Classify: label",
        f"{HP2}/labels/stable:classify",
        '{"signature_name": "classify_x_to_y", "examples": [ { "x": 10.0 } ] }',
        {"results": [[["", 7]]]},
    ),
]
_STATUS = {
    "model_version_status": [
        {
            "version": "123",
            "state": "AVAILABLE",
            "status": {"error_code": "OK", "error_message": ""},
        }
    ]
}
CALL_CASES += [
    (f"H GetStatus: {what}", path, None, _STATUS)
    for what, path in [
        ("all versions", HP2),
        ("version", f"{HP2}/versions/123"),
        ("label", f"{HP2}/labels/stable"),
    ]
]


@pytest.mark.parametrize("case,path,body,want", CALL_CASES, ids=[c[0] for c in CALL_CASES])
def test_calls(server, case, path, body, want):
    status, content_type, text = http(server, "GET" if body is None else "POST", path, body)
    assert (status, content_type) == (200, "application/json"), text
    assert same_json(json.loads(text), want), text


def test_metadata_prints_every_field(server):
    """H GetModelMetadata: the layout of saved_model_half_plus_two_2_versions_metadata.json, every
    field printed, default-valued ones included (dimension names, unknown_rank, defaults)."""
    status, _, text = http(server, "GET", f"{HP2}/metadata")
    assert status == 200, text
    got = json.loads(text)
    assert got["model_spec"] == {"name": "hp2", "signature_name": "", "version": "123"}
    signatures = got["metadata"]["signature_def"]["signature_def"]
    assert set(signatures) == {
        "serving_default",
        "classify_x_to_y",
        "regress_x_to_y",
        "classify_echo",
        "regress_echo",
    }
    assert signatures["serving_default"] == {
        "inputs": {
            "x": {
                "dtype": "DT_FLOAT",
                "tensor_shape": {"dim": [], "unknown_rank": True},
                "name": "serving_default_x:0",
            }
        },
        "outputs": {
            "y": {
                "dtype": "DT_FLOAT",
                "tensor_shape": {"dim": [], "unknown_rank": True},
                "name": signatures["serving_default"]["outputs"]["y"]["name"],
            }
        },
        "method_name": "tensorflow/serving/predict",
        "defaults": {},
    }
    regress = signatures["regress_x_to_y"]
    assert regress["method_name"] == "tensorflow/serving/regress" and regress["defaults"] == {}
    assert regress["inputs"]["inputs"]["tensor_shape"] == {
        "dim": [{"size": "-1", "name": ""}],
        "unknown_rank": False,
    }
    assert regress["outputs"]["outputs"]["tensor_shape"] == {
        "dim": [{"size": "-1", "name": ""}, {"size": "1", "name": ""}],
        "unknown_rank": False,
    }


# ---------------------------------------------------------------- classify / regress request protos
# JT ClassifyRegressRequestTest (RequestNoContext, RequestWithContextAndSignature): a model cannot
# echo a tf.Example back, so the Input proto the server builds
# (serving.wire.json_tensor.fill_examples, the code behind :classify and :regress) is compared
# with TF Serving's expected proto.
def _feature(**kinds):
    ((kind, values),) = kinds.items()
    return {kind: {"value": values}}


_NO_CONTEXT = {
    "examples": [
        {
            "features": {
                "feature": {
                    "names": _feature(bytes_list=["Zm9v", "YmFy"]),
                    "ratings": _feature(float_list=[8.0, 9.0]),
                    "age": _feature(int64_list=["20"]),
                }
            }
        },
        {
            "features": {
                "feature": {
                    "names": _feature(bytes_list=["YmF6"]),
                    "ratings": _feature(float_list=[6.0]),
                }
            }
        },
    ]
}
_WITH_CONTEXT = {
    "context": {
        "features": {
            "feature": {
                "query": _feature(bytes_list=["cGl6emE="]),
                "location": _feature(bytes_list=["c2Zv"]),
            }
        }
    },
    "examples": [
        {
            "features": {
                "feature": {
                    "names": _feature(bytes_list=["Zm9v", "YmFy"]),
                    "ratings": _feature(float_list=[8.0, 9.0, "NaN", "Infinity"]),
                    "age": _feature(int64_list=["20"]),
                }
            }
        },
        {
            "features": {
                "feature": {
                    "names": _feature(bytes_list=["YmF6", "aGVsbG8="]),
                    "ratings": _feature(float_list=[6.0]),
                    "intboolmix": _feature(int64_list=["1", "1", "0"]),
                }
            }
        },
        {
            "features": {
                "feature": {
                    "names": _feature(bytes_list=["YmFy"]),
                    "ratings": _feature(float_list=["-Infinity"]),
                }
            }
        },
    ],
}


@pytest.mark.parametrize(
    "request_class", [classification_pb2.ClassificationRequest, regression_pb2.RegressionRequest]
)
def test_classify_regress_request_protos(request_class):
    request = request_class()
    json_tensor.fill_examples(
        json_tensor.parse_json(b"""{"examples": [
        {"names": [ "foo", "bar" ], "ratings": [ 8.0, 9.0 ], "age": 20},
        {"names": [ "baz" ], "ratings": 6.0}]}"""),
        request.input,
    )
    assert json_format.MessageToDict(request.input, preserving_proto_field_name=True) == {
        "example_list": _NO_CONTEXT
    }
    request = request_class()
    doc = json_tensor.parse_json(b"""{"signature_name": "custom_signture",
        "context": {"query": "pizza", "location": [ "sfo" ]},
        "examples": [
          {"names": [ "foo", "bar" ], "ratings": [ 8.0, 9.0, NaN, Infinity ], "age": 20},
          {"names": [ "baz", { "b64": "aGVsbG8=" } ], "ratings": 6.0, "intboolmix": [ 1, true, false ]},
          {"names": "bar", "ratings": -Infinity}]}""")
    assert json_tensor.signature_name(doc) == "custom_signture"
    json_tensor.fill_examples(doc, request.input)
    assert json_format.MessageToDict(request.input, preserving_proto_field_name=True) == {
        "example_list_with_context": _WITH_CONTEXT
    }


# ---------------------------------------------------------------- b64 and key rules
_LONG = bytes(range(256)) * 2  # base64.encodebytes writes it in 76-character lines


@pytest.mark.parametrize(
    "text,want",
    [
        ("aGVsbG8=", b"hello"),
        ("aGVsbG8", b"hello"),
        ("aGVsbA==", b"hell"),
        ("aGVsbA", b"hell"),
        (" aG\tVs\nbG8= ", b"hello"),
        ("aGVsbG8=\n", b"hello"),
        ("", b""),
        ("aGVsbG8.", b"hello"),
        (base64.encodebytes(_LONG).decode(), _LONG),
        ("aGVsbG8==", None),
        ("aGVsbA=", None),
        ("aGVsb", None),
        ("aGVs=bG8=", None),
        ("-_-_", None),
        ("aGVsbG8!", None),
        ("aGVsbG8h=", None),
    ],
)
def test_b64_unescape_as_absl(text, want):
    assert json_tensor.b64_unescape(text) == want


def test_encodebytes_output_has_line_breaks():
    assert (
        base64.encodebytes(_LONG).decode().count("\n") == 9
    )  # 684 characters in 76-character lines


def test_b64_through_the_server(server):
    body = json.dumps(
        {
            "signature_name": "str_tensor_bytes",
            "inputs": [{"b64": "aGVsbG8"}, {"b64": base64.encodebytes(_LONG).decode()}],
        }
    )
    status, _, text = http(server, "POST", ECHO, body)
    assert status == 200, text
    assert [base64.b64decode(v["b64"]) for v in json.loads(text)["outputs"]] == [b"hello", _LONG]
    status, _, text = http(
        server, "POST", ECHO, '{"signature_name": "string", "inputs": [{"b64": "a-_b"}]}'
    )
    assert status == 400 and "Unable to base64 decode" in json.loads(text)["error"]


def test_columnar_ignores_unknown_keys_row_refuses_them(server):
    status, _, text = http(
        server,
        "POST",
        ECHO,
        '{"signature_name": "int_and_str", "inputs": '
        '{"int_tensor": [1], "str_tensor": ["a"], "extra": 5}}',
    )
    assert (status, json.loads(text)) == (
        200,
        {"outputs": {"int_tensor": [1], "str_tensor": ["a"]}},
    )
    status, _, text = http(
        server,
        "POST",
        ECHO,
        '{"signature_name": "int_and_str", "instances": '
        '[{"int_tensor": 1, "str_tensor": "a", "extra": 5}]}',
    )
    assert status == 400 and "does not have named input: extra" in json.loads(text)["error"]
    status, _, text = http(
        server, "POST", ECHO, '{"signature_name": "int_and_str", "instances": [{"int_tensor": 1}]}'
    )
    assert (
        status == 400
        and "keys must be equal to: int_tensor,str_tensor" in json.loads(text)["error"]
    )
    status, _, text = http(
        server, "POST", ECHO, '{"signature_name": "int_and_str", "inputs": {"int_tensor": [1]}}'
    )
    assert (
        status == 400
        and "Missing named input: str_tensor in 'inputs' object." in json.loads(text)["error"]
    )


@pytest.mark.parametrize(
    "signature,good,want,bad",
    [
        ("int8", [-5, 300], [-5, 44], [2**31]),
        ("uint8", [7, 256], [7, 0], [1.5]),
        ("int16", [-2], [-2], [True]),
        ("int64", [2**63 - 1, -(2**63)], [2**63 - 1, -(2**63)], [2**63]),
        ("uint32", [2**32 - 1], [2**32 - 1], [-1]),
        ("uint64", [2**64 - 1], [2**64 - 1], [-1]),
        ("bool", [True, False], [True, False], [1]),
    ],
)
def test_integer_and_bool_limits(server, signature, good, want, bad):
    """dtype limits as AddValueToTensor: int8/int16/uint8 take any int32 (stored as TensorProto int_val,
    which wraps to the type), int64/uint32/uint64 their own range, bool only true/false."""
    status, _, text = http(
        server, "POST", ECHO, json.dumps({"signature_name": signature, "instances": good})
    )
    assert (status, json.loads(text)) == (200, {"predictions": want})
    status, _, text = http(
        server, "POST", ECHO, json.dumps({"signature_name": signature, "instances": bad})
    )
    assert status == 400 and "is not of expected type" in json.loads(text)["error"], text


def test_float16_is_unimplemented(server):
    """AddValueToTensor has no JSON conversion for half: UNIMPLEMENTED (501) in the columnar format; the
    row format wraps every element error in INVALID_ARGUMENT "Failed to process element" (400)."""
    status, _, text = http(server, "POST", ECHO, '{"signature_name": "float16", "inputs": [1.0]}')
    assert (status, json.loads(text)) == (
        501,
        {"error": "Conversion of JSON Value: 1.0 to type: half"},
    )
    status, _, text = http(
        server, "POST", ECHO, '{"signature_name": "float16", "instances": [1.0]}'
    )
    assert status == 400 and json.loads(text)["error"] == (
        "Failed to process element: 0 of 'instances' list. Error: UNIMPLEMENTED: Conversion of JSON "
        "Value: 1.0 to type: half"
    )
