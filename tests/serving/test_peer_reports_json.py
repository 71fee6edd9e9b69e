"""REST JSON: reports filed against the peers that own this surface (tensorflow/serving's REST API
above all; Triton, KServe, OpenVINO Model Server, SageMaker where they report the same behaviour),
each replayed against our REST answer path with the value the peer's report (or the upstream fix it
led to) expects. The in-process server (tests/fuzz/servables.py) answers: `echo` returns every
input unchanged (one signature per dtype), `hp2` is half_plus_two (y = 0.5 x + 2).

A test marked xfail(strict=True) is a report our code does not meet yet; its reason says how.
"""

import base64
import json
import math
import sys

import numpy as np
import pytest

from serving.wire import errors, json_writer
from tests.fuzz import servables

ECHO = "/v1/models/echo:predict"
HP2 = "/v1/models/hp2:predict"
DBL_MAX = repr(sys.float_info.max)  # 1.7976931348623157e+308


@pytest.fixture(scope="module")
def server():
    return servables.server()


def post(server, path, body):
    """(HTTP status, parsed JSON body, raw body text) of one REST POST through our answer path."""
    status, data, content_type = server.answer("POST", path, body.encode("utf-8"))
    assert content_type == "application/json"
    text = data.decode("utf-8")
    return status, json.loads(text), text


def error_of(server, path, body, status=400):
    got, doc, _ = post(server, path, body)
    assert got == status, doc
    return doc["error"]


# ------------------------------------------------------------------ numbers in responses
def test_tfs_1332_outputs_keep_more_than_six_digits(server):
    """tensorflow/serving#1332: half_plus_two of 1111111.0 came back as 555558.0 (six significant
    digits); the expected value is 555557.5 (the fix prints full precision when %g does not
    round-trip)."""
    status, _, text = post(server, HP2, '{"instances": [1111111.0]}')
    assert (status, text) == (200, '{"predictions": [555557.5]}')


def test_tfs_989_1014_scientific_notation_has_no_trailing_point_zero(server):
    """tensorflow/serving#989 and #1014: whole numbers printed in scientific notation got a '.0'
    appended ("9e-07.0"), which no JSON parser reads. Expected: 6e-07, 9e-07, 3e-05 and 9e+06
    unchanged, '.0' only on whole numbers without an exponent (1.0), and a parseable body."""
    body = '{"signature_name": "float", "instances": [6e-07, 9e-07, 3e-05, 9000000, 1.0]}'
    status, doc, text = post(server, ECHO, body)
    assert (status, text) == (200, '{"predictions": [6e-07, 9e-07, 3e-05, 9e+06, 1.0]}')
    assert doc == {"predictions": [6e-07, 9e-07, 3e-05, 9e06, 1.0]}


def test_triton_1664_int64_outputs_are_exact_json_numbers(server):
    """triton-inference-server/server#1664: 64-bit integers must be JSON numbers (not strings) and
    exact. Expected: int64 extremes and 2**53 + 1, uint64 max, printed digit for digit."""
    body = (
        '{"signature_name": "int64", "instances": '
        "[9007199254740993, -9223372036854775808, 9223372036854775807]}"
    )
    status, _, text = post(server, ECHO, body)
    assert (status, text) == (
        200,
        '{"predictions": [9007199254740993, -9223372036854775808, 9223372036854775807]}',
    )
    status, _, text = post(
        server, ECHO, '{"signature_name": "uint64", "instances": [18446744073709551615]}'
    )
    assert (status, text) == (200, '{"predictions": [18446744073709551615]}')


def test_ovms_4337_non_finite_outputs_are_not_dropped(server):
    """openvinotoolkit/model_server#4337: NaN/Inf outputs were silently dropped from the array,
    corrupting the response. TF Serving's convention (which we follow) writes the tokens NaN,
    Infinity, -Infinity. Expected: all elements present, in order, readable by Python's json."""
    body = '{"signature_name": "float", "instances": [NaN, Infinity, -Infinity, 1.5]}'
    status, doc, text = post(server, ECHO, body)
    assert (status, text) == (200, '{"predictions": [NaN, Infinity, -Infinity, 1.5]}')
    values = doc["predictions"]
    assert math.isnan(values[0]) and values[1:] == [math.inf, -math.inf, 1.5]


def test_tfs_4071_nan_spelling(server):
    """tensorflow/serving#4071 (and #1218, the 'Inifinity' doc typo): the tokens are NaN and
    Infinity; 'Nan' is not one. Expected: NaN accepted (and echoed), 'Nan' a 400 JSON parse error.
    Our wording of that error is documented deliberate difference 3 (TF Serving's rapidjson would
    say 'Invalid value. at offset: 45', after the 'Na' it consumed)."""
    status, _, text = post(server, ECHO, '{"signature_name": "double", "instances": [NaN]}')
    assert (status, text) == (200, '{"predictions": [NaN]}')
    message = error_of(server, ECHO, '{"signature_name": "double", "instances": [Nan]}')
    assert message == "JSON Parse error: Invalid value at offset: 43"


# ------------------------------------------------------------------ numbers in requests
def test_tfs_1136_decimals_convert_to_float(server):
    """tensorflow/serving#1136: 0.96 and 1.24 for a float input were refused 'without loss of
    precision'. Expected (after the fix): accepted; half_plus_two gives 2.48, 2.62, 4.5."""
    status, _, text = post(server, HP2, '{"instances": [0.96, 1.24, 5.0]}')
    assert (status, text) == (200, '{"predictions": [2.48, 2.62, 4.5]}')


@pytest.mark.xfail(
    strict=True,
    reason="integers above 2**24-1 (float) / 2**53-1 (double) are refused 'without loss of "
    "precision'; TF Serving accepts them since 2.5 (57dac6cd, json_tensor_test "
    "FloatTensorWithPrecisionLoss)",
)
def test_tfs_1136_followup_integers_round_like_decimals(server):
    """tensorflow/serving#1136, follow-up fix 57dac6cd (json_tensor_test.cc
    FloatTensorWithPrecisionLoss): 1435774380 and 1435774380.0 behave the same for a float input.
    Expected: both accepted as float32 1435774336, echoed as 1.43577434e+09; 9007199254740993 for a
    double is accepted as 9007199254740992."""
    status, _, text = post(server, ECHO, '{"signature_name": "float", "instances": [1435774380.0]}')
    assert (status, text) == (200, '{"predictions": [1.43577434e+09]}')
    status, _, text = post(server, ECHO, '{"signature_name": "float", "instances": [1435774380]}')
    assert (status, text) == (200, '{"predictions": [1.43577434e+09]}')
    status, _, text = post(
        server, ECHO, '{"signature_name": "double", "instances": [9007199254740993]}'
    )
    assert (status, text) == (200, '{"predictions": [9007199254740992.0]}')


@pytest.mark.xfail(
    strict=True,
    reason="a number past FLT_MAX for a float input (or tf.Example float feature) is refused "
    "'without loss of precision'; TF Serving >= 2.5 converts it to +/-inf "
    "(json_tensor_test FloatTensorThatExceedsMaxReturnsInf)",
)
def test_tfs_1136_followup_float_past_max_is_infinity(server):
    """tensorflow/serving#1136, follow-up fix 57dac6cd (json_tensor_test.cc
    FloatTensorThatExceedsMaxReturnsInf): DBL_MAX for a float input becomes float_val inf and
    -DBL_MAX -inf; the float feature of a tf.Example likewise (the check left AddValueToFeature
    too). Expected: predictions [Infinity, -Infinity]; regress_x_to_y of x = DBL_MAX: [Infinity]."""
    body = f'{{"signature_name": "float", "instances": [{DBL_MAX}, -{DBL_MAX}]}}'
    status, _, text = post(server, ECHO, body)
    assert (status, text) == (200, '{"predictions": [Infinity, -Infinity]}')
    body = f'{{"signature_name": "regress_x_to_y", "examples": [{{"x": {DBL_MAX}}}]}}'
    status, _, text = post(server, "/v1/models/hp2:regress", body)
    assert (status, text) == (200, '{"results": [Infinity]}')


def test_tfs_1639_half_is_unimplemented_over_rest(server):
    """tensorflow/serving#1639 (PR #1753 still open): the REST API has no DT_HALF. The report's
    value: {'error': 'Conversion of JSON Value: 0 to type: half'}, UNIMPLEMENTED (HTTP 501)."""
    status, doc, _ = post(server, ECHO, '{"signature_name": "float16", "inputs": [0]}')
    assert (status, doc) == (501, {"error": "Conversion of JSON Value: 0 to type: half"})


def test_tfs_1199_1780_bool_inputs(server):
    """tensorflow/serving#1199 and #1780: a bool given per instance becomes a [batch] tensor, not a
    scalar; the maintainers' answer: DT_BOOL takes JSON true/false, and a scalar goes in the
    columnar "inputs". Expected: inputs false -> {"outputs": false}; instances [true, false] ->
    predictions [true, false]; the number 1 -> 'JSON Value: 1 Type: Number is not of expected
    type: bool'."""
    status, _, text = post(server, ECHO, '{"signature_name": "bool", "inputs": false}')
    assert (status, text) == (200, '{"outputs": false}')
    status, _, text = post(server, ECHO, '{"signature_name": "bool", "instances": [true, false]}')
    assert (status, text) == (200, '{"predictions": [true, false]}')
    message = error_of(server, ECHO, '{"signature_name": "bool", "instances": [1]}')
    assert message == (
        "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
        "JSON Value: 1 Type: Number is not of expected type: bool"
    )


def test_sagemaker_examples_444_number_for_a_string_input(server):
    """aws/amazon-sagemaker-examples#444: {"inputs": [1,2,3,4]} to a string input (a tf.Example
    parsing signature). The report's value: { "error": "JSON Value: 1 Type: Number is not of
    expected type: string" } (HTTP 400)."""
    message = error_of(server, ECHO, '{"signature_name": "string", "inputs": [1, 2, 3, 4]}')
    assert message == "JSON Value: 1 Type: Number is not of expected type: string"


# ------------------------------------------------------------------ b64 and string outputs
def test_tfs_1141_1169_web_safe_base64_is_refused(server):
    """tensorflow/serving#1141 (and #1169): a {"b64": ...} made with base64.urlsafe_b64encode fails
    with 'Unable to base64 decode'; the standard alphabet works. Expected: '----' (web-safe for
    b'\\xfb\\xef\\xbe') refused with that text; '++++' decoded (and, not being UTF-8, echoed as
    {"b64": "++++"})."""
    raw = b"\xfb\xef\xbe"
    assert base64.urlsafe_b64encode(raw) == b"----" and base64.b64encode(raw) == b"++++"
    message = error_of(server, ECHO, '{"signature_name": "string", "instances": [{"b64": "----"}]}')
    assert message == (
        "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
        "Unable to base64 decode"
    )
    body = '{"signature_name": "string", "instances": [{"b64": "++++"}]}'
    status, _, text = post(server, ECHO, body)
    assert (status, text) == (200, '{"predictions": [{"b64": "++++"}]}')


def test_kserve_3731_bytes_output_is_valid_json(server):
    """kserve/kserve#3731: a bytes tensor that is not UTF-8 raised UnicodeDecodeError instead of
    coming back. TF Serving writes such bytes raw (invalid JSON); ours is documented deliberate
    difference 1. Expected: HTTP 200, the bytes back intact as {"b64": ...}; UTF-8 text as text."""
    body = '{"signature_name": "string", "instances": [{"b64": "/w=="}, {"b64": "w6k="}]}'
    status, doc, text = post(server, ECHO, body)
    assert (status, text) == (200, '{"predictions": [{"b64": "/w=="}, "\u00e9"]}')
    assert base64.b64decode(doc["predictions"][0]["b64"]) == b"\xff"


@pytest.mark.xfail(
    strict=True,
    reason="JSON values inside error messages are printed compact by Python's encoder "
    '(\'{"b64": "AAAA"}\'); TF Serving prints them with rapidjson\'s PrettyWriter '
    "(newline and 4-space indent per object member)",
)
def test_tfs_994_object_for_a_float_input_prints_the_object_as_tf_serving(server):
    """tensorflow/serving#994 (kspook's comment): a {"b64": ...} object sent to a float input is
    'JSON Value: <value> Type: Object is not of expected type: float', the value printed by
    rapidjson's PrettyWriter (single-line arrays; each object member on its own line, indented 4
    spaces), as the report's message shows. Expected: that exact text."""
    message = error_of(server, HP2, '{"instances": [{"b64": "AAAA"}]}')
    assert message == (
        "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
        'JSON Value: {\n    "b64": "AAAA"\n} Type: Object is not of expected type: float'
    )


# ------------------------------------------------------------------ request layout
def test_tfs_1292_rows_of_different_sizes(server):
    """tensorflow/serving#1292: two instances whose seq_input lengths differ (34, then 20). The
    report's value: 'Failed to process element: 1 key: seq_input of 'instances' list. Error:
    Invalid argument: Expecting tensor size: 34 but got: 20' (the nested status now prints as
    INVALID_ARGUMENT:, documented deliberate difference 2)."""
    first, second = list(range(1, 35)), list(range(1, 21))
    body = json.dumps(
        {
            "signature_name": "int_tensor",
            "instances": [{"int_tensor": first}, {"int_tensor": second}],
        }
    )
    assert error_of(server, ECHO, body) == (
        "Failed to process element: 1 key: int_tensor of 'instances' list. Error: "
        "INVALID_ARGUMENT: Expecting tensor size: 34 but got: 20"
    )


def test_tfs_1047_outputs_without_a_batch_dimension(server):
    """tensorflow/serving#1047: the row format requires every output to share dimension 0, which
    breaks models whose outputs have none or another; the columnar format ("inputs" -> "outputs")
    is the way. Expected: a scalar output over "instances" is 'Tensor name: total has no shape
    information ', over "inputs" {"outputs": 3.0}; outputs of 2 and 3 rows over "instances" are
    'Tensor name: y has inconsistent batch size: 2 expecting: 3', over "inputs" both returned."""
    body = '{"signature_name": "scalar_output", "instances": [1.0, 2.0]}'
    assert error_of(server, ECHO, body) == "Tensor name: total has no shape information "
    status, _, text = post(server, ECHO, body.replace("instances", "inputs"))
    assert (status, text) == (200, '{"outputs": 3.0}')
    body = '{"signature_name": "uneven_outputs", "instances": [1.0, 2.0]}'
    assert error_of(server, ECHO, body) == (
        "Tensor name: y has inconsistent batch size: 2 expecting: 3"
    )
    status, doc, _ = post(server, ECHO, body.replace("instances", "inputs"))
    assert (status, doc) == (200, {"outputs": {"extra": [0.0, 0.0, 0.0], "y": [1.0, 2.0]}})


def test_tfs_pr_1140_descriptive_format_errors(server):
    """tensorflow/serving PR #1140: distinct errors for 'inputs' and 'instances' both present, an
    empty 'instances', neither key, and classify without 'examples'. Expected: those texts after
    the printed request ('JSON Value: <doc> ...'; the printing of <doc> is the subject of the
    tensorflow/serving#994 test)."""
    body = '{"signature_name": "int32", "instances": [1], "inputs": [1]}'
    message = error_of(server, ECHO, body)
    assert message.startswith("JSON Value: {") and message.endswith(
        "} Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist "
    )
    message = error_of(server, ECHO, '{"signature_name": "int32", "instances": []}')
    assert message.startswith("JSON Value: {") and message.endswith(
        "} No values in 'instances' array"
    )
    assert error_of(server, ECHO, '{"signature_name": "int32"}') == (
        "Missing 'inputs' or 'instances' key"
    )
    message = error_of(server, "/v1/models/hp2:classify", '{"signature_name": "classify_x_to_y"}')
    assert message.startswith("JSON Value: {") and message.endswith(
        "} When method is classify, key 'examples' is expected and was not found"
    )


def test_tfs_pr_1762_instances_not_a_list(server):
    """tensorflow/serving PR #1762 ('Changed "Excepting" to "Expecting"' in json_tensor.cc):
    "instances" that is not a list. Expected: 'JSON Value: <doc> Expecting 'instances' to be an
    list/array'."""
    message = error_of(server, ECHO, '{"signature_name": "int32", "instances": 1}')
    assert message.endswith("} Expecting 'instances' to be an list/array")


def test_tfs_83863b8f_row_missing_an_input(server):
    """tensorflow/serving 83863b8f ('adjust error message for incorrect keys of instances object':
    'must only have keys' confused users whose object lacked a key). Expected: 'Failed to process
    element: 0 of 'instances' list. JSON object: <row> keys must be equal to:
    int_tensor,str_tensor'."""
    body = '{"signature_name": "int_and_str", "instances": [{"int_tensor": 1}]}'
    message = error_of(server, ECHO, body)
    assert message.startswith("Failed to process element: 0 of 'instances' list. JSON object: ")
    assert message.endswith(" keys must be equal to: int_tensor,str_tensor")


def test_tfs_1484_json_syntax_error(server):
    """tensorflow/serving#1484: '1.' (no fraction digits) in a body that gRPC took. The report's
    value: 400 'JSON Parse error: Miss fraction part in number. at offset: N'. Ours keeps the
    'JSON Parse error: ... at offset: N' form with Python's parser's wording (documented deliberate
    difference 3). Expected here: 400 'JSON Parse error: Expecting ',' delimiter at offset: 16'."""
    message = error_of(server, HP2, '{"instances": [1.]}')
    assert message == "JSON Parse error: Expecting ',' delimiter at offset: 16"


def test_training_data_analyst_380_unknown_signature(server):
    """GoogleCloudPlatform/training-data-analyst#380 (TF Serving's REST answer to a signature the
    model lacks): 400 'Serving signature name: "predict" not found in signature def'. Ours is the
    gRPC wording, FAILED_PRECONDITION, also HTTP 400 (documented deliberate difference 4).
    Expected here: 400 naming the key and the signatures the model has."""
    message = error_of(server, HP2, '{"signature_name": "predict", "instances": [1.0]}')
    assert message.startswith('Serving signature key "predict" not found. Model "hp2" version 123')
    assert "'serving_default'" in message and "'regress_x_to_y'" in message


# ------------------------------------------------------------------ zero-batch outputs
def test_tfs_1610_pr_1635_zero_batch_outputs(server):
    """tensorflow/serving#1610, fixed by PR #1635 ('Allow batch size of zero in row format JSON';
    json_tensor_test.cc FromJsonSingleZeroBatchTensor / FromJsonMultipleZeroBatchTensors): an
    output whose dimension 0 is 0 (e.g. no detections). The report's expected value:
    { "predictions": [] }, for one such output and for several."""
    one = json_writer.predict_json({"my_layer_1": np.zeros([0, 2], np.int32)}, row=True)
    assert json.loads(one) == {"predictions": []}
    several = {
        "str_tensor": np.empty([0, 1, 2], object),
        "float_tensor": np.zeros([0, 3, 4], np.float32),
    }
    assert json.loads(json_writer.predict_json(several, row=True)) == {"predictions": []}


def test_tfs_1610_pr_1635_zero_and_one_batch_outputs_disagree(server):
    """tensorflow/serving PR #1635 (json_tensor_test.cc FromJsonMultipleZeroBatchTensorsErrors):
    outputs of batch 0 and batch 1 together. Expected: INVALID_ARGUMENT 'Tensor name: str_tensor
    has inconsistent batch size: 1 expecting: 0'."""
    outputs = {
        "int_tensor": np.zeros([0, 2], np.int32),
        "str_tensor": np.array([[b"foo", b"bar"]], object),
    }
    with pytest.raises(errors.ServingError) as caught:
        json_writer.predict_json(outputs, row=True)
    assert caught.value.message == (
        "Tensor name: str_tensor has inconsistent batch size: 1 expecting: 0"
    )
