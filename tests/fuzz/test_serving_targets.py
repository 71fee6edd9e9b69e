"""The serving fuzz targets over their saved corpus (tests/fuzz/corpus/<target>/: the seeds from our
tests and TF Serving's, plus what coverage-guided runs kept), over hypothesis-generated inputs, and
each past finding as a regression test. A target raises on a finding (tests.fuzz.serving_targets
says what one is), so each case here fails with the finding's own message."""

import gc
import json
import pathlib
import time
import tracemalloc

import grpc
import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2

from serving.wire import errors
from tests.fuzz import seeds, serving_targets, servables
from tests.fuzz.byte_source import ByteSource

CORPUS = pathlib.Path(__file__).parent / "corpus"


@pytest.fixture(scope="module")
def server():
    return servables.server()


@pytest.mark.parametrize("target", sorted(serving_targets.TARGETS))
def test_the_saved_corpus_replays_without_a_finding(server, target):
    files = sorted((CORPUS / target).iterdir())
    assert len(files) >= 3, f"no seed corpus for {target}: run python -m tests.fuzz.seeds"
    for path in files:
        try:
            serving_targets.TARGETS[target](path.read_bytes())
        except Exception as e:
            raise AssertionError(f"{target}: {path.name}: {e}") from e


def test_an_input_over_the_cpu_limit_is_a_finding():
    def spin(data):
        start = time.process_time()
        while time.process_time() - start <= serving_targets.CPU_LIMIT_S:
            pass

    with pytest.raises(
        serving_targets.Finding, match=r"^1\.\d\d s of CPU on one input of 3 bytes$"
    ):
        serving_targets.timed(spin)(b"abc")


def test_no_garbage_collection_is_charged_to_an_input():
    """A CI worker once charged 1.17 s of CPU to a 2 KB REST body that costs 0.2 ms: the body's
    lists set off a full collection of every object earlier tests had left in the process (a
    worker holds about 2.3 million after tests/tasks; a full pass over them costs 1.2 to 1.8 s of
    CPU here). The collector is paused while an input runs, and on again after it."""
    collections = []

    def note(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    def allocate(data):
        # Containers enough to set off about 140 young-generation collections with the collector on.
        return [[] for _ in range(100_000)]

    gc.callbacks.append(note)
    try:
        serving_targets.timed(allocate)(b"")
        during = list(collections)
        assert gc.isenabled()
        allocate(b"")
        after = list(collections)
    finally:
        gc.callbacks.remove(note)
    assert during == []
    assert len(after) > 100


def test_the_seed_corpus_is_what_the_seed_writer_writes(server):
    """tests/fuzz/corpus holds every seed `python -m tests.fuzz.seeds` makes from the tests."""
    for target, items in seeds.seeds().items():
        names = {p.name for p in (CORPUS / target).glob("seed-*")}
        want = {f"seed-{seeds.digest(b)}" for b in items if len(b) <= seeds.MAX_SEED_BYTES}
        assert names == want, f"{target}: rerun python -m tests.fuzz.seeds"


# ------------------------------------------------------------------ hypothesis-driven
_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats()
    | st.text(max_size=5)
    | st.just({"b64": "YWJj"})
)
_json = st.recursive(
    _json_leaf,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=3)
    ),
    max_leaves=20,
)
_names = st.sampled_from(
    ["text", "text_b", "choices", "input_word_ids", "input_mask", "input_type_ids", "x"]
    + ["default", "a", "b", "c", "b64"]
)
_body = st.fixed_dictionaries(
    {},
    optional={
        "instances": st.lists(_json | st.dictionaries(_names, _json, max_size=4), max_size=4),
        "inputs": _json | st.dictionaries(_names, _json, max_size=4),
        "examples": st.lists(st.dictionaries(_names, _json, max_size=3), max_size=3),
        "context": st.dictionaries(_names, _json, max_size=3),
        "signature_name": st.sampled_from(["", "encoded", "classification", "x"]) | _json,
    },
)


@hypothesis.settings(max_examples=80, deadline=None)
@hypothesis.given(body=_body)
def test_generated_rest_bodies_convert_alike_on_both_paths(body):
    serving_targets.rest_json(json.dumps(body).encode())


_PATHS = [
    "/v1/models/clf:predict",
    "/v1/models/clf/labels/stable:classify",
    "/v1/models/reg:regress",
    "/v1/models/swag:predict",
    "/v1/models/echo/versions/1:predict",
    "/v1/models/hp2:classify",
    "/v1/models/hp2/versions/123:regress",
]


@hypothesis.settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture],
)
@hypothesis.given(path=st.sampled_from(_PATHS), body=_body)
def test_generated_rest_calls_get_a_documented_answer(server, path, body):
    serving_targets.rest_http(serving_targets.raw_request("POST", path, json.dumps(body).encode()))


@hypothesis.settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture],
)
@hypothesis.given(data=st.binary(min_size=4, max_size=400))
def test_generated_tensor_protos_get_a_documented_answer(server, data):
    serving_targets.grpc_tensor_protos(data)


def test_the_structure_aware_generator_reaches_every_kind_of_proto():
    """Over the seed bytes, `predict_request_from` builds every signature, unknown ranks,
    tensor_content and value fields (a generator stuck on one kind would fuzz nothing else)."""
    requests = [
        serving_targets.predict_request_from(ByteSource(data))
        for data in seeds.seeds()["grpc_tensor_protos"]
    ]
    protos = [p for r in requests for p in r.inputs.values()]
    assert len({r.model_spec.name for r in requests}) >= 4
    assert any(p.tensor_shape.unknown_rank for p in protos)
    assert any(p.tensor_content for p in protos)
    assert any(p.string_val for p in protos) and any(p.half_val or p.float_val for p in protos)


# ------------------------------------------------------------------ findings, as regression tests
def _strings_in_tensor_content(values, shape):
    proto = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING, tensor_content=serving_targets.encode_string_list(values)
    )
    for n in shape:
        proto.tensor_shape.dim.add(size=n)
    return proto


def test_strings_in_tensor_content_are_read_not_replaced_by_empty_ones(server):
    """Finding (grpc_tensor_protos): a DT_STRING TensorProto carrying its strings in
    tensor_content (what TensorFlow's C++ AsProtoTensorContent writes, and TF Serving reads) was
    read as that many empty strings, its content ignored: the model answered for "" silently."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "swag"
    request.inputs["text"].CopyFrom(_strings_in_tensor_content([b"ab", "é".encode()], [2]))
    choices = [b"x", b"", b"yyy", b"z" * 200, b"1", b"22", b"333", b"4444"]
    request.inputs["choices"].CopyFrom(_strings_in_tensor_content(choices, [2, 4]))
    response = server.service.predict(request)
    scores = np.frombuffer(response.outputs["scores"].tensor_content, np.float32).reshape(2, 4)
    np.testing.assert_array_equal(scores, [[3, 2, 5, 202], [2, 3, 4, 5]])


def test_model_names_a_request_sends_add_no_metric_series(server):
    """Finding (live-server fuzz): every model name a request sent became a `model` label of
    four metrics (5,000 unknown names grew the exposition from 29 KB to 8.7 MB, without
    bound). Requests for models the server does not serve are counted under model=""."""
    metrics = "/monitoring/prometheus/metrics"
    before = server.answer("GET", metrics, b"")[1]
    for i in range(30):
        status, _, _ = server.answer("POST", f"/v1/models/fuzz{i}:predict", b'{"instances": [1]}')
        assert status == 404
    after = server.answer("GET", metrics, b"")[1].decode()
    assert "fuzz" not in after
    assert len(after) - len(before) < 2000  # the model="" series, at most, are new
    assert 'serving_requests_total{api="predict",model="",status="NOT_FOUND",version=""}' in after


def test_a_quantized_proto_to_a_string_input_is_refused_by_name(server):
    """Finding (grpc_predict): a DT_QINT16 proto, which tf.make_ndarray reads into a numpy
    structured dtype, sent to a string input was INTERNAL (TypeError naming the dtype)."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "clf"
    request.inputs["text_b"].CopyFrom(_strings_in_tensor_content([b"a", b"b"], [2]))
    request.inputs["text"].dtype = types_pb2.DT_QINT16
    request.inputs["text"].tensor_shape.dim.add(size=2)
    request.inputs["text"].string_val.extend([b"ok", b"caf\xe9"])
    with pytest.raises(errors.ServingError) as info:
        server.service.predict(request)
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.message == (
        "input 'text' expects dtype string but got numpy [('qint16', '<i2')]"
    )


def test_a_proto_flagged_unknown_rank_is_refused_before_tensorflow_reads_its_dimensions(server):
    """Finding (grpc_tensor_protos): a 64-byte bfloat16 proto flagged unknown_rank whose
    dimensions say [4, 2**31], sent to an input of unknown rank, went to tf.make_ndarray
    unchecked, which allocated the 17 GB its dimensions claim (and filled them: the fuzzing
    process was killed); refused after that by the element limit."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "hp2"
    proto = request.inputs["x"]
    proto.dtype = types_pb2.DT_BFLOAT16
    proto.tensor_shape.unknown_rank = True
    for n in (4, 2**31):
        proto.tensor_shape.dim.add(size=n)
    proto.half_val.extend([16256, 16256])
    tracemalloc.start()
    try:
        with pytest.raises(errors.ServingError) as info:
            server.service.predict(request)
        grown = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.message == "input 'x' has unknown rank but a tensor sent must give its shape"
    assert grown < 1 << 20
