"""REST round trips (JSON, b64) against the shared server; outputs equal the in-process call."""

import base64
import json
import re
import urllib.error
import urllib.request

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

from tests.serving.conftest import MAX_REQUEST_BYTES
from tests.serving.saved_models import LABELS
from tests.serving.test_grpc_api import TEXTS, TEXTS_B, _serialized, example


def call(server, path, body=None, raw=None):
    """(http status, parsed JSON body)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(
        server.rest_url + path, data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def server(shared_server):
    return shared_server


def test_model_status(server):
    want = {
        "model_version_status": [
            {
                "version": "1",
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
        ]
    }
    for path in ("/v1/models/clf", "/v1/models/clf/versions/1", "/v1/models/clf/labels/stable"):
        assert call(server, path) == (200, want)


def test_metadata_lists_signatures(server):
    status, body = call(server, "/v1/models/clf/versions/1/metadata")
    assert status == 200
    assert body["model_spec"] == {"name": "clf", "version": "1", "signature_name": ""}
    sigs = body["metadata"]["signature_def"]["signature_def"]
    assert set(sigs) == {"serving_default", "encoded", "classification"}
    assert sigs["serving_default"]["inputs"]["text"]["dtype"] == "DT_STRING"
    assert sigs["classification"]["method_name"] == "tensorflow/serving/classify"


def test_predict_row_format_equals_in_process(server, reference):
    instances = [{"text": t, "text_b": b} for t, b in zip(TEXTS, TEXTS_B)]
    status, body = call(server, "/v1/models/clf:predict", {"instances": instances})
    assert status == 200
    want = reference("clf", text=TEXTS, text_b=TEXTS_B)
    preds = body["predictions"]
    assert len(preds) == 3
    np.testing.assert_allclose(
        np.array([p["probabilities"] for p in preds], np.float32),
        want["probabilities"],
        rtol=0,
        atol=0,
    )
    assert [p["label_ids"] for p in preds] == want["label_ids"].tolist()
    assert [p["labels"] for p in preds] == [s.decode() for s in want["labels"]]


def test_predict_columnar_and_b64_agree(server, reference):
    want = reference("clf", text=TEXTS, text_b=TEXTS_B)
    b64 = lambda s: {"b64": base64.b64encode(s.encode()).decode()}  # noqa: E731
    for inputs in (
        {"text": TEXTS, "text_b": TEXTS_B},
        {"text": [b64(t) for t in TEXTS], "text_b": [b64(t) for t in TEXTS_B]},
    ):
        status, body = call(
            server,
            "/v1/models/clf/labels/stable:predict",
            {"signature_name": "serving_default", "inputs": inputs},
        )
        assert status == 200, body
        out = body["outputs"]
        np.testing.assert_array_equal(
            np.array(out["probabilities"], np.float32), want["probabilities"]
        )
        assert out["labels"] == [s.decode() for s in want["labels"]]


def test_predict_single_input_and_output_drops_names(server, reference):
    status, body = call(server, "/v1/models/reg:predict", {"instances": TEXTS})
    assert status == 200
    np.testing.assert_array_equal(
        np.array(body["predictions"], np.float32), reference("reg", text=TEXTS)["scores"]
    )


def test_predict_encoded_signature_with_json_ints(server, reference):
    ids = [[101, 7592, 102], [101, 2088, 102]]
    mask, types = [[1, 1, 1], [1, 1, 0]], [[0, 0, 0], [0, 1, 1]]
    status, body = call(
        server,
        "/v1/models/clf:predict",
        {
            "signature_name": "encoded",
            "inputs": {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types},
        },
    )
    assert status == 200, body
    want = reference(
        "clf",
        "encoded",
        input_word_ids=np.int32(ids),
        input_mask=np.int32(mask),
        input_type_ids=np.int32(types),
    )
    np.testing.assert_array_equal(
        np.array(body["outputs"]["probabilities"], np.float32), want["probabilities"]
    )


def test_classify_and_regress(server, reference):
    examples = [{"text": t, "text_b": b} for t, b in zip(TEXTS, TEXTS_B)]
    status, body = call(
        server,
        "/v1/models/clf:classify",
        {"signature_name": "classification", "examples": examples},
    )
    assert status == 200, body
    want = reference(
        "clf",
        "classification",
        inputs=_serialized([example(text=t, text_b=b) for t, b in zip(TEXTS, TEXTS_B)]),
    )
    assert [[c[0] for c in row] for row in body["results"]] == [list(LABELS)] * 3
    np.testing.assert_allclose(
        [[c[1] for c in row] for row in body["results"]], want["scores"], atol=1e-7
    )
    status, body = call(
        server,
        "/v1/models/reg:regress",
        {"signature_name": "regression", "examples": [{"text": t} for t in TEXTS]},
    )
    assert status == 200, body
    want = reference("reg", "regression", inputs=_serialized([example(text=t) for t in TEXTS]))[
        "outputs"
    ]
    np.testing.assert_allclose(body["results"], want, atol=1e-6)


BAD = [
    ("/v1/models/nope:predict", {"instances": ["a"]}, 404, "nope"),
    ("/v1/models/clf/versions/9:predict", {"instances": [{"text": "a", "text_b": ""}]}, 404, "9"),
    (
        "/v1/models/clf/labels/canary:predict",
        {"instances": [{"text": "a", "text_b": ""}]},
        400,
        "canary",
    ),
    (
        "/v1/models/clf:predict",
        {"signature_name": "nope", "instances": [{"text": "a", "text_b": ""}]},
        400,
        "not found",
    ),
    ("/v1/models/clf:predict", {"instances": []}, 400, "No values in 'instances' array"),
    ("/v1/models/clf:predict", {"inputs": {"text": [], "text_b": []}}, 400, "empty batch"),
    (
        "/v1/models/clf:predict",
        {"instances": [{"text": 3, "text_b": ""}]},
        400,
        "not of expected type: string",
    ),
    (
        "/v1/models/clf:predict",
        {"instances": [{"text": {"b64": "//4="}, "text_b": ""}]},
        400,
        "not valid UTF-8",
    ),
    (
        "/v1/models/clf:predict",
        {"instances": [{"text": {"b64": "!!"}, "text_b": ""}]},
        400,
        "Unable to base64 decode",
    ),
    (
        "/v1/models/clf:predict",
        {"inputs": {"text": ["a", "b"], "text_b": ["c"]}},
        400,
        "different batch sizes",
    ),
    ("/v1/models/clf:predict", {"inputs": {"text": ["a"]}}, 400, "Missing named input: text_b"),
    (
        "/v1/models/clf:predict",
        {"instances": [{"text": "a", "text_b": "", "x": 1}]},
        400,
        "does not have named input: x",
    ),
    (
        "/v1/models/clf:predict",
        {
            "signature_name": "encoded",
            "inputs": {
                "input_word_ids": [[1, 2], [3]],
                "input_mask": [[1, 1], [1]],
                "input_type_ids": [[0, 0], [0]],
            },
        },
        400,
        "Encountered list at unexpected size",
    ),
    (
        "/v1/models/clf:predict",
        {
            "signature_name": "encoded",
            "inputs": {"input_word_ids": [[1.5]], "input_mask": [[1]], "input_type_ids": [[0]]},
        },
        400,
        "not of expected type: int32",
    ),
    ("/v1/models/clf:predict", {"text": ["a"]}, 400, "Missing 'inputs' or 'instances' key"),
    ("/v1/models/clf:classify", {"examples": [{"text": "a"}]}, 400, "tensorflow/serving/classify"),
    (
        "/v1/models/reg:classify",
        {"signature_name": "regression", "examples": [{"text": "a"}]},
        400,
        "regress",
    ),
]


@pytest.mark.parametrize("path,body,status,fragment", BAD)
def test_bad_requests_get_json_errors(server, path, body, status, fragment):
    got_status, got = call(server, path, body)
    assert (got_status, set(got)) == (status, {"error"}), got
    assert fragment in got["error"]
    assert call(server, "/v1/models/reg:predict", {"instances": ["still serving"]})[0] == 200


def test_malformed_json_and_oversized_body(server):
    status, body = call(server, "/v1/models/clf:predict", raw=b"{not json")
    assert status == 400 and "JSON" in body["error"]
    status, body = call(server, "/v1/models/clf:predict", raw=b" " * (MAX_REQUEST_BYTES + 1))
    assert status == 413 and "max_request_bytes" in body["error"]
    assert (
        call(server, "/v1/models/nothing/here/at/all")[0] == 400
    )  # a /v1/ path: Malformed request
    assert call(server, "/v2/models/clf")[0] == 404
    assert call(server, "/v1/models/reg:predict", {"instances": ["ok"]})[0] == 200


def test_prometheus_metrics(server):
    call(server, "/v1/models/reg:predict", {"instances": ["count me"]})
    call(server, "/v1/models/nope:predict", {"instances": ["a"]})
    with urllib.request.urlopen(
        server.rest_url + "/monitoring/prometheus/metrics", timeout=30
    ) as response:
        text = response.read().decode()

    def value(pattern):
        match = re.search(pattern + r" (\S+)", text)
        assert match, pattern
        return float(match.group(1))

    assert (
        value(r'serving_requests_total\{api="predict",model="reg",status="OK",version="1"\}') >= 1
    )
    assert (
        value(r'serving_requests_total\{api="predict",model="",status="NOT_FOUND",version=""\}')
        >= 1
    )
    assert value(r'serving_request_latency_seconds_count\{api="predict",model="reg"\}') >= 1
    # the two warmup records of clf/1 (assets.extra/tf_serving_warmup_requests) were replayed at load
    assert value(r'serving_warmup_requests_total\{model="clf",version="1"\}') == 2


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["text", "text_b", "b64", "input_word_ids", "x"]), children, max_size=3
        )
    ),
    max_leaves=12,
)


@hypothesis.settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture],
)
@hypothesis.given(
    body=st.dictionaries(
        st.sampled_from(["instances", "inputs", "signature_name", "examples"]), _json, max_size=3
    ),
    verb=st.sampled_from(["predict", "classify", "regress"]),
    signature=st.sampled_from([None, "serving_default", "encoded", "classification"]),
)
def test_arbitrary_json_never_gets_internal_error(server, body, verb, signature):
    if signature is not None:
        body = dict(body, signature_name=signature)
    status, got = call(server, f"/v1/models/clf:{verb}", body)
    assert status in (200, 400, 404), got
    assert status == 200 or set(got) == {"error"}
