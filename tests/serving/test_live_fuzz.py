"""A live `python -m serving.server` (clf, reg, tft) against what docs/openapi.yaml documents and
against bounded fuzzing on both ports (tests/fuzz/live.py): every documented operation answers a
documented status with a body valid against its documented schema; about 200 schemathesis cases
and 500 mutated gRPC requests get no 5xx, no INTERNAL, and leave the server answering. The long
runs (>= 100,000 requests) are tools/fuzz_live_server.py."""

import json

import grpc
import jsonschema
import pytest
import yaml

from tests.fuzz import live
from tests.serving.conftest import ServerProcess
from tests.serving.test_rest_conformance import http
from tests.serving.test_grpc_api import predict_request, prediction_stub

SPEC = yaml.safe_load(live.OPENAPI.read_text())
SERVED = {"model_name": "clf", "version": "1", "label": "stable"}
CLASSIFY = {"signature_name": "classification", "examples": [{"text": "a fine film"}]}
REGRESS = {"signature_name": "regression", "examples": [{"text": "x"}], "context": {}}
PREDICT = {"instances": [{"text": "a fine film", "text_b": ""}]}


@pytest.fixture(scope="module")
def server(model_base, tmp_path_factory):
    process = ServerProcess(
        [
            f"--model_config_file={model_base / 'models.config'}",
            "--file_system_poll_wait_seconds=0",
        ],
        tmp_path_factory.mktemp("live_fuzz") / "server.log",
    )
    try:
        yield process.wait_serving()
    finally:
        process.stop()


def _call(server, method, path, body=None):
    """(status, content type, body text); `body` is sent as JSON."""
    return http(server, method, path, None if body is None else json.dumps(body))


def _documented_calls():
    """(method, template, concrete path, body) for every documented operation: once with what
    the server serves, once with a model it does not."""
    for template, operations in SPEC["paths"].items():
        for method in operations:
            model, body = "clf", None
            if template.endswith(":predict"):
                body = PREDICT
            elif template.endswith(":classify"):
                body = CLASSIFY
            elif template.endswith(":regress"):
                model, body = "reg", REGRESS
            for name in (model, "nope") if "{model_name}" in template else (None,):
                path = template.replace("{model_name}", str(name))
                path = path.replace("{version}", "1").replace("{label}", "stable")
                yield method.upper(), template, path, body


def _check_answer(template, method, status, content_type, text):
    responses = SPEC["paths"][template][method.lower()]["responses"]
    assert str(status) in responses, f"{method} {template}: undocumented status {status}: {text}"
    response = responses[str(status)]
    if "$ref" in response:  # "#/components/responses/<name>"
        response = SPEC["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    ((media, content),) = response["content"].items()
    assert content_type.split(";")[0] == media, (template, content_type)
    if media == "application/json":
        jsonschema.Draft202012Validator(
            {**content["schema"], "components": SPEC["components"]}
        ).validate(json.loads(text))


def test_every_documented_operation_answers_as_documented(server):
    answered = {}
    for method, template, path, body in _documented_calls():
        status, content_type, text = _call(server, method, path, body)
        _check_answer(template, method, status, content_type, text)
        answered[path] = status
    # The served models answer 200 on every operation (reg has no version label: 400, as TF
    # Serving), the unknown one 404.
    assert answered.pop("/v1/models/reg/labels/stable:regress") == 400
    assert {s for path, s in answered.items() if "/nope" not in path} == {200}
    assert {s for path, s in answered.items() if "/nope" in path} == {404}
    assert len(answered) == 2 * len(SPEC["paths"]) - 2  # the metrics path has no model


def test_documented_errors_are_error_objects(server):
    cases = [
        ("POST", "/v1/models/{model_name}:predict", "/v1/models/clf:predict", {"instances": []}),
        ("POST", "/v1/models/{model_name}:regress", "/v1/models/reg:regress", {"examples": 1}),
        ("GET", "/v1/models/{model_name}/labels/{label}", "/v1/models/clf/labels/canary", None),
        ("GET", "/v1/models/{model_name}/versions/{version}", "/v1/models/clf/versions/7", None),
    ]
    for method, template, path, body in cases:
        status, content_type, text = _call(server, method, path, body)
        assert status in (400, 404), text
        _check_answer(template, method, status, content_type, text)


def _still_answers(server):
    with prediction_stub(server.grpc_target) as stub:
        response = stub.Predict(predict_request(text=["still here"], text_b=[""]), timeout=30)
    assert list(response.outputs["probabilities"].tensor_shape.dim)[0].size == 1
    assert _call(server, "POST", "/v1/models/reg:predict", {"instances": ["ok"]})[0] == 200


@pytest.mark.slow
def test_schemathesis_finds_nothing(server, tmp_path):
    config = live.write_schemathesis_config(tmp_path / "schemathesis.toml", ["clf", "reg"])
    code, output = live.run_schemathesis(server.rest_url, config, max_examples=12, seed=1)
    assert code == 0, output[-4000:]
    generated = [line for line in output.splitlines() if " generated, " in line]
    assert generated and int(generated[0].split()[0]) >= 150, output[-2000:]
    _still_answers(server)


def test_mutated_grpc_requests_get_documented_statuses(server):
    run = live.mutate_grpc(server.grpc_target, 500, seed=0)
    assert run.findings == [], run.findings[:3]
    assert run.sent == 500
    # The mutations reach the models and their refusals, not only the parser.
    assert run.codes["OK"] >= 5 and run.codes["INVALID_ARGUMENT"] > 100, run.codes
    _still_answers(server)


@pytest.mark.parametrize("target", sorted(live.METHODS))
def test_undecodable_request_bytes_are_invalid_argument(server, target):
    """Finding (mutated gRPC requests): bytes that do not parse as the method's message were
    answered INTERNAL "Exception deserializing request!" (gRPC Python's own answer)."""
    method, request_class = live.METHODS[target]
    with grpc.insecure_channel(server.grpc_target) as channel:
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as info:
            call(b"\x12\x80", timeout=30)  # a length-delimited field cut short
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details().startswith(
        f"request is not a valid {request_class.DESCRIPTOR.full_name} (DecodeError: "
    )


def test_the_description_has_every_rest_path():
    """Every REST path of serving/protocol/rest.py's docstring is in docs/openapi.yaml
    (schemathesis, in test_schemathesis_finds_nothing, loads and validates the file)."""
    operations = {(m.upper(), p) for p, ops in SPEC["paths"].items() for m in ops}
    want = {("GET", "/monitoring/prometheus/metrics")}
    for where in ("", "/versions/{version}", "/labels/{label}"):
        want |= {("POST", f"/v1/models/{{model_name}}{where}:{v}") for v in ("predict", "classify")}
        want.add(("POST", f"/v1/models/{{model_name}}{where}:regress"))
        want.add(("GET", f"/v1/models/{{model_name}}{where}"))
        want.add(("GET", f"/v1/models/{{model_name}}{where}/metadata"))
    assert operations == want
