"""Writes the seed corpus of each serving fuzz target (tests/fuzz/corpus/<target>/seed-*) from the
serving tests' own inputs: the REST bodies and paths of TF Serving's json_tensor_test.cc and
http_rest_api_handler_test.cc cases (tests/serving/test_rest_conformance.py), our REST and gRPC
error cases (test_rest_api.py, test_errors.py, test_declared_sizes.py) and good requests to
every model of `tests.fuzz.servables`.

    python -m tests.fuzz.seeds     # rewrites every seed-* file; found entries are left alone

A seed over MAX_SEED_BYTES is left out (the corpus stays small; the fuzzer grows sizes itself).
"""

import hashlib
import json
import pathlib
import random

import numpy as np
from tensorflow.core.example import example_pb2
from serving.wire import tensors
from tests.fuzz import serving_targets
from tests.serving import (
    test_declared_sizes,
    test_errors,
    test_rest_api,
    test_rest_conformance,
    test_rest_framing,
)
from tests.serving.test_rest_conformance import CALL_CASES, DECODE_CASES, ENCODE_CASES

CORPUS = pathlib.Path(__file__).parent / "corpus"
MAX_SEED_BYTES = 16 << 10
_REQUESTS = serving_targets.GRPC_REQUESTS  # target -> its request message class
ECHO = test_rest_conformance.ECHO


def _body(body):
    if isinstance(body, (bytes, str)):
        return body.encode() if isinstance(body, str) else body
    return json.dumps(body).encode()


def rest_bodies():
    """(path, body bytes) of every REST request our tests send."""
    for _, signature, body, _ in DECODE_CASES:
        if '"signature_name"' not in body:
            body = f'{{"signature_name": "{signature}", ' + body.lstrip()[1:]
        yield ECHO, body.encode()
    for _, path, body, _, _ in test_rest_conformance.ERROR_CASES:
        yield path, body.encode()
    for case, body, _ in ENCODE_CASES:
        if body is None:  # a classify / regress result, from half_plus_two's echo signatures
            verb, body = test_rest_conformance._RESULT_REQUESTS[case]
            yield test_rest_conformance.HP2 + verb, body.encode()
        else:
            yield ECHO, body.encode()
    for _, path, body, _ in CALL_CASES:
        if body is not None:  # None: a GET (`rest_requests`)
            yield path, body.encode()
    for path, body, _, _ in test_rest_api.BAD:
        yield path, _body(body)
    for body, _ in test_declared_sizes.REST_CASES.values():
        yield "/v1/models/clf:predict", _body(body)
    yield "/v1/models/clf:predict", b'{"instances": [{"text": "a film", "text_b": ""}]}'
    yield (
        "/v1/models/clf:predict",
        (
            b'{"signature_name": "encoded", "inputs": {"input_word_ids": [[101, 7, 102]], '
            b'"input_mask": [[1, 1, 1]], "input_type_ids": [[0, 0, 0]]}}'
        ),
    )
    yield (
        "/v1/models/swag:predict",
        (
            b'{"instances": [{"text": "She opens the door", "choices": ["and walks in", "a", "b", '
            b'"c"]}]}'
        ),
    )
    yield (
        "/v1/models/clf/labels/stable:classify",
        (b'{"signature_name": "classification", "examples": [{"text": "good", "text_b": ""}]}'),
    )
    yield (
        "/v1/models/reg:regress",
        (b'{"signature_name": "regression", "context": {"text": "x"}, "examples": [{}]}'),
    )


def rest_requests():
    """The raw HTTP/1.1 requests (`serving_targets.raw_request`) of every REST call our tests
    make, the GET paths, HEAD, and the framing cases of tests/serving/test_rest_framing.py."""
    raw = serving_targets.raw_request
    for path, body in rest_bodies():
        yield raw("POST", path, body)
    for method, path, _, _ in test_rest_conformance.PATH_CASES:
        yield raw(method, path)
    for _, path, body, _ in CALL_CASES:
        if body is None:
            yield raw("GET", path)
    for path in ("/v1/models/clf", "/v1/models/hp2/labels/stable", "/v1/models/clf/metadata"):
        yield raw("GET", path)
        yield raw("HEAD", path)
    yield raw("GET", "/v1/models/echo/versions/1/metadata")
    yield raw("GET", "/monitoring/prometheus/metrics")
    yield from test_rest_framing.FRAMING_CASES


def _example(**features):
    ex = example_pb2.Example()
    for name, value in features.items():
        ex.features.feature[name].bytes_list.value.append(value.encode())
    return ex


def grpc_requests():
    """target name -> the request protos our tests send, good and bad."""
    requests = {name: [] for name in serving_targets.TARGETS if name.startswith("grpc_")}
    del requests["grpc_tensor_protos"]  # structure-aware: its seeds are bytes (`seeds`)
    kinds = {
        "Predict": "grpc_predict",
        "Classify": "grpc_classify",
        "Regress": "grpc_regress",
        "MultiInference": "grpc_multi_inference",
        "GetModelMetadata": "grpc_model_metadata",
    }
    for method, request, _, _ in test_errors.CASES.values():
        requests[kinds[method]].append(request)
    for request, _ in test_declared_sizes.CASES.values():
        requests["grpc_predict"].append(request)
    for model, key, aliases in serving_targets.PROTO_SIGNATURES:
        request = _REQUESTS["grpc_predict"]()
        request.model_spec.name, request.model_spec.signature_name = model, key
        with serving_targets.servables.server().manager.acquire(model) as servable:
            signature = servable.signature(key)
            for alias in aliases:
                array = serving_targets.servables._one_row(signature.inputs[alias])
                request.inputs[alias].CopyFrom(tensors.to_proto(np.concatenate([array, array])))
        requests["grpc_predict"].append(request)
    for method, model, key, feature in (
        ("grpc_classify", "clf", "classification", "text"),
        ("grpc_classify", "hp2", "classify_x_to_y", "x"),
        ("grpc_regress", "reg", "regression", "text"),
        ("grpc_regress", "hp2", "regress_x_to_y", "x"),
    ):
        request = _REQUESTS[method]()
        request.model_spec.name, request.model_spec.signature_name = model, key
        if feature == "x":
            for x in (1.0, 2.5):
                request.input.example_list.examples.add().features.feature[
                    "x"
                ].float_list.value.append(x)
        else:
            request.input.example_list_with_context.context.CopyFrom(_example(text_b="b"))
            request.input.example_list_with_context.examples.append(_example(text="a"))
        requests[method].append(request)
    multi = _REQUESTS["grpc_multi_inference"]()
    for key, method in (
        ("classify_x_to_y", "tensorflow/serving/classify"),
        ("regress_x_to_y", "tensorflow/serving/regress"),
    ):
        task = multi.tasks.add(method_name=method)
        task.model_spec.name, task.model_spec.signature_name = "hp2", key
    multi.input.example_list.examples.add().features.feature["x"].float_list.value.append(3.0)
    requests["grpc_multi_inference"].append(multi)
    for name, version, label in (("clf", None, ""), ("hp2", 123, ""), ("hp2", None, "stable")):
        for request in (
            _REQUESTS["grpc_model_metadata"](metadata_field=["signature_def"]),
            _REQUESTS["grpc_model_status"](),
        ):
            request.model_spec.name = name
            if version is not None:
                request.model_spec.version.value = version
            if label:
                request.model_spec.version_label = label
            target = (
                "grpc_model_status"
                if isinstance(request, _REQUESTS["grpc_model_status"])
                else "grpc_model_metadata"
            )
            requests[target].append(request)
    return requests


def seeds():
    """target name -> list of seed bytes."""
    out = {
        "rest_json": [body for _, body in rest_bodies()],
        "rest_http": list(rest_requests()),
        **{
            name: [r.SerializeToString(deterministic=True) for r in requests]
            for name, requests in grpc_requests().items()
        },
    }
    rng = random.Random(0)  # the structure-aware target reads choices from any bytes
    out["grpc_tensor_protos"] = [
        bytes(rng.randrange(256) for _ in range(n)) for n in range(4, 260, 8)
    ]
    return out


def digest(data: bytes) -> str:
    """A seed's file name after `seed-`: the start of its SHA-1."""
    return hashlib.sha1(data).hexdigest()[:16]


def write(corpus=CORPUS, made=None):
    """Rewrites the seed-* files of every target of `made` (target -> seed bytes; default the
    serving targets' `seeds()`); returns {target: count}."""
    counts = {}
    for name, items in (seeds() if made is None else made).items():
        folder = corpus / name
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("seed-*"):
            old.unlink()
        kept = {digest(b): b for b in items if len(b) <= MAX_SEED_BYTES}
        for name_digest, data in sorted(kept.items()):
            (folder / f"seed-{name_digest}").write_bytes(data)
        counts[name] = len(kept)
    return counts


if __name__ == "__main__":
    for target, count in write().items():
        print(f"{target}: {count} seeds")
