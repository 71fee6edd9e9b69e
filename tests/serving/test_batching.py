"""Request batching: the scheduler in process, and 16 concurrent clients against a batching server."""

import concurrent.futures
import re
import threading
import time
import urllib.request

import grpc
import hypothesis
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import strategies as st
from tensorflow_serving.apis import prediction_service_pb2_grpc

from serving.wire import dtypes, errors
from serving.dispatch.batching import (
    BatchingOptions,
    BatchScheduler,
    call_sized_outputs,
    parse_batching_parameters,
)
from serving.dispatch.inference import InferenceService
from serving.monitoring.metrics import Metrics
from serving.models.servable import PREDICT_METHOD, Signature, TensorSpec
from serving.wire.tensors import Limits
from tests.serving.test_grpc_api import predict_request
from tests.tolerance import assert_close_across_paths


def _scrape(server):
    """The server's Prometheus text, and `metric(name)`: the value there of the clf model's
    serving_default series `name` (e.g. serving_batch_size_count)."""
    with urllib.request.urlopen(
        server.rest_url + "/monitoring/prometheus/metrics", timeout=30
    ) as r:
        text = r.read().decode()

    def metric(name):
        pattern = name + r'\{model="clf",signature="serving_default"\} (\S+)'
        return float(re.search(pattern, text).group(1))

    return text, metric


def test_parse_batching_parameters():
    options = parse_batching_parameters("""
        max_batch_size { value: 8 } batch_timeout_micros { value: 2000 }
        num_batch_threads { value: 2 } max_enqueued_batches { value: 50 }
        allowed_batch_sizes: 2 allowed_batch_sizes: 4 allowed_batch_sizes: 8
        pad_variable_length_inputs: true""")
    assert options == BatchingOptions(8, 2000, 2, 50, (2, 4, 8))
    with pytest.raises(ValueError, match="end with max_batch_size"):
        parse_batching_parameters("max_batch_size { value: 8 } allowed_batch_sizes: 4")
    with pytest.raises(Exception, match="no_such_field"):
        parse_batching_parameters("no_such_field { value: 1 }")


def test_scheduler_merges_pads_and_slices():
    calls = []
    gate = threading.Event()

    def run(inputs):  # row-wise function; records the merged batch
        gate.wait(5)
        calls.append(inputs["x"].copy())
        return {"y": inputs["x"] * 10, "z": inputs["x"][:, None] + 1}

    scheduler = BatchScheduler(
        run,
        BatchingOptions(
            max_batch_size=8,
            batch_timeout_micros=200_000,
            num_batch_threads=1,
            allowed_batch_sizes=(4, 8),
        ),
    )
    try:
        requests = [np.array([1, 2]), np.array([3]), np.array([4, 5])]
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(scheduler.submit, {"x": r}) for r in requests]
            gate.set()
            results = [f.result(timeout=10) for f in futures]
        for r, out in zip(requests, results):
            np.testing.assert_array_equal(out["y"], r * 10)
            np.testing.assert_array_equal(out["z"], r[:, None] + 1)
        assert sum(len(c) for c in calls) >= 5 and all(len(c) in (4, 8) for c in calls)  # padded
        with pytest.raises(errors.ServingError, match="larger than maximum batch size 8"):
            scheduler.submit({"x": np.arange(9)})
    finally:
        scheduler.stop()


def test_full_queue_is_unavailable():
    gate = threading.Event()
    scheduler = BatchScheduler(
        lambda x: (gate.wait(10), x)[1],
        BatchingOptions(max_batch_size=2, num_batch_threads=1, max_enqueued_batches=1),
    )
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            running = pool.submit(scheduler.submit, {"x": np.array([1, 2])})  # taken by the worker
            deadline = time.monotonic() + 10
            while scheduler._queue and time.monotonic() < deadline:
                time.sleep(0.01)
            queued = pool.submit(
                scheduler.submit, {"x": np.array([3, 4])}
            )  # fills the one batch slot
            while not scheduler._queue and time.monotonic() < deadline:
                time.sleep(0.01)
            with pytest.raises(errors.ServingError, match="queue .* is full") as info:
                scheduler.submit({"x": np.array([5])})
            assert info.value.code.name == "UNAVAILABLE"
            gate.set()
            np.testing.assert_array_equal(running.result(10)["x"], [1, 2])
            np.testing.assert_array_equal(queued.result(10)["x"], [3, 4])
    finally:
        gate.set()
        scheduler.stop()


def test_scheduler_reports_model_errors_to_every_caller():
    def run(inputs):
        raise tf.errors.InvalidArgumentError(None, None, "bad row")

    scheduler = BatchScheduler(run, BatchingOptions(max_batch_size=4, num_batch_threads=1))
    try:
        with pytest.raises(errors.ServingError, match="bad row") as info:
            scheduler.submit({"x": np.array([1])})
        assert info.value.code.name == "INVALID_ARGUMENT"
    finally:
        scheduler.stop()


@pytest.mark.slow
def test_16_concurrent_clients_with_batching_match_unbatched(
    start_server, model_base, reference, tmp_path
):
    params = tmp_path / "batching.config"
    params.write_text(
        "max_batch_size { value: 8 } batch_timeout_micros { value: 5000 } "
        "num_batch_threads { value: 2 } max_enqueued_batches { value: 1000 } "
        "allowed_batch_sizes: 2 allowed_batch_sizes: 4 allowed_batch_sizes: 8"
    )
    server = start_server(
        [
            f"--model_base_path={model_base / 'clf'}",
            "--model_name=clf",
            "--enable_batching",
            f"--batching_parameters_file={params}",
            "--file_system_poll_wait_seconds=0",
        ]
    )
    clients, per_client = 16, 50

    def texts(c, i):
        rows = 1 + (c + i) % 2
        return [f"client {c} request {i} row {r}" for r in range(rows)], [f"b{c}" * (i % 3)] * rows

    def client(c):
        results = []
        with grpc.insecure_channel(server.grpc_target) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            for i in range(per_client):
                a, b = texts(c, i)
                response = stub.Predict(predict_request(text=a, text_b=b), timeout=60)
                results.append({k: tf.make_ndarray(v) for k, v in response.outputs.items()})
        return results

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        all_results = list(pool.map(client, range(clients)))  # any RpcError fails the test
    rows = 0
    for c, results in enumerate(all_results):
        assert len(results) == per_client
        for i, got in enumerate(results):
            a, b = texts(c, i)
            want = reference("clf", text=a, text_b=b)  # unbatched, in process
            # Merged into batches of 2-8 rows: other kernels, so equal within tests/tolerance.py.
            assert_close_across_paths(got["probabilities"], want["probabilities"])
            np.testing.assert_array_equal(got["label_ids"], want["label_ids"])
            np.testing.assert_array_equal(got["labels"], want["labels"])
            rows += len(a)
    text, metric = _scrape(server)
    batches = metric("serving_batch_size_count")
    assert metric("serving_batch_size_sum") == rows + 2 * 2  # + the two 2-row warmup requests
    assert batches < clients * per_client  # requests were merged
    assert re.search(
        r'serving_requests_total\{api="predict",model="clf",status="OK",version="1"\} 800.0', text
    )
    print(f"{clients * per_client} requests ({rows} rows) ran as {batches:.0f} batched model calls")


def test_large_batch_splitting_parameters():
    options = parse_batching_parameters(
        "max_batch_size { value: 8 } enable_large_batch_splitting { value: true } "
        "max_execution_batch_size { value: 4 } allowed_batch_sizes: 2 "
        "allowed_batch_sizes: 4"
    )
    assert (options.execution_batch_size, options.input_batch_size_limit) == (4, 8)
    flag_only = BatchingOptions(max_batch_size=4, enable_large_batch_splitting=True)
    assert (flag_only.execution_batch_size, flag_only.input_batch_size_limit) == (4, None)
    with pytest.raises(ValueError, match="needs enable_large_batch_splitting"):
        BatchingOptions(max_batch_size=8, max_execution_batch_size=4)
    with pytest.raises(ValueError, match="end with max_execution_batch_size=4"):
        BatchingOptions(
            max_batch_size=8,
            max_execution_batch_size=4,
            enable_large_batch_splitting=True,
            allowed_batch_sizes=(2, 8),
        )


def test_large_request_is_split_in_order_and_equals_the_pieces():
    calls = []

    def run(inputs):  # a row-wise model; records every call
        calls.append(inputs["x"].copy())
        return {"y": np.sin(inputs["x"]).astype(np.float32) * 3, "n": inputs["x"].astype(np.int64)}

    x = np.random.default_rng(0).normal(size=(12, 3)).astype(np.float32)
    splitting = BatchScheduler(
        run,
        BatchingOptions(max_batch_size=4, num_batch_threads=2, enable_large_batch_splitting=True),
    )
    plain = BatchScheduler(run, BatchingOptions(max_batch_size=4, num_batch_threads=1))
    try:
        got = splitting.submit({"x": x})
        assert [c.shape[0] for c in calls] == [4, 4, 4]  # three model calls of max_batch_size rows
        pieces = [plain.submit({"x": x[i : i + 4]}) for i in (0, 4, 8)]  # three separate requests
        for name in ("y", "n"):
            np.testing.assert_array_equal(got[name], np.concatenate([p[name] for p in pieces]))
        np.testing.assert_array_equal(got["n"], x.astype(np.int64))  # rows in request order
        calls.clear()
        odd = splitting.submit({"x": x[:10]})  # 4 + 4 + 2
        assert sorted(c.shape[0] for c in calls) == [2, 4, 4]
        np.testing.assert_array_equal(odd["y"], got["y"][:10])
        with pytest.raises(errors.ServingError, match="larger than maximum batch size 4") as info:
            plain.submit({"x": x})
        assert info.value.code.name == "INVALID_ARGUMENT"
    finally:
        splitting.stop()
        plain.stop()


def test_input_limit_with_max_execution_batch_size():
    scheduler = BatchScheduler(
        lambda inputs: inputs,
        BatchingOptions(
            max_batch_size=8,
            max_execution_batch_size=4,
            enable_large_batch_splitting=True,
            num_batch_threads=1,
        ),
    )
    try:
        np.testing.assert_array_equal(scheduler.submit({"x": np.arange(8)})["x"], np.arange(8))
        with pytest.raises(errors.ServingError, match="larger than maximum input batch size 8"):
            scheduler.submit({"x": np.arange(9)})
    finally:
        scheduler.stop()


@pytest.mark.slow
def test_server_splits_a_3x_request_like_three_requests(start_server, model_base, tmp_path):
    params = tmp_path / "batching.config"
    params.write_text(
        "max_batch_size { value: 4 } batch_timeout_micros { value: 1000 } "
        "num_batch_threads { value: 2 } allowed_batch_sizes: 2 allowed_batch_sizes: 4"
    )
    server = start_server(
        [
            f"--model_base_path={model_base / 'clf'}",
            "--model_name=clf",
            "--enable_batching",
            f"--batching_parameters_file={params}",
            "--enable_large_batch_splitting",
            "--file_system_poll_wait_seconds=0",
        ]
    )
    texts = [f"row {i} of a large request" for i in range(12)]
    texts_b = [f"b{i}" * (i % 3) for i in range(12)]
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

        def predict(a, b):
            response = stub.Predict(predict_request(text=a, text_b=b), timeout=60)
            return {k: tf.make_ndarray(v) for k, v in response.outputs.items()}

        large = predict(texts, texts_b)
        pieces = [predict(texts[i : i + 4], texts_b[i : i + 4]) for i in (0, 4, 8)]
    assert_close_across_paths(
        large["probabilities"], np.concatenate([p["probabilities"] for p in pieces])
    )
    for name in ("label_ids", "labels"):
        np.testing.assert_array_equal(large[name], np.concatenate([p[name] for p in pieces]))
    assert large["probabilities"].shape == (12, 3)
    text, metric = _scrape(server)
    # 2 warmup calls of 2 rows, the large request as 3 calls of 4 rows, the three pieces as 3 calls
    assert (metric("serving_batch_size_count"), metric("serving_batch_size_sum")) == (
        2 + 3 + 3,
        4 + 12 + 12,
    )
    # the same calls under TF Serving's batching_session names (each call here holds one task)
    assert ":tensorflow:serving:batching_session:wrapped_run_count{} 8" in text.splitlines()
    assert re.search(
        r':tensorflow:serving:batching_session:queuing_latency_count\{thread_pool_name="batch_threads"\} 8\n',
        text,
    )


def test_a_failed_merged_call_runs_each_request_alone():
    """Three clients' rows in one call that one client's row fails: each request runs again on its
    own, so the good request gets its answer and each bad one the message about its own rows only
    (row numbers within that request), never another client's."""
    calls, merged = [], threading.Event()

    def run(inputs):  # a lookup in a 100-row table, failing like tf.gather on the first bad row
        x = inputs["x"]
        calls.append(sorted(x.tolist()))
        if len(x) == 4:
            merged.set()
        bad = np.flatnonzero(x >= 100)
        if bad.size:
            raise tf.errors.InvalidArgumentError(
                None, None, f"indices[{bad[0]}] = {x[bad[0]]} is not in [0, 100)"
            )
        return {"y": x * 10}

    scheduler = BatchScheduler(
        run, BatchingOptions(max_batch_size=4, batch_timeout_micros=10_000_000, num_batch_threads=1)
    )
    requests = {"a": np.array([1, 150]), "b": np.array([2]), "c": np.array([300])}
    try:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = {
                name: pool.submit(scheduler.submit, {"x": x}) for name, x in requests.items()
            }
            assert merged.wait(10)
            np.testing.assert_array_equal(futures["b"].result(timeout=10)["y"], [20])
            for name, message in (
                ("a", "indices[1] = 150 is not in [0, 100)"),
                ("c", "indices[0] = 300 is not in [0, 100)"),
            ):
                with pytest.raises(errors.ServingError) as info:
                    futures[name].result(timeout=10)
                assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
                assert info.value.message == message
    finally:
        scheduler.stop()
    assert calls[0] == [1, 2, 150, 300]  # the merged call, then each request alone
    assert sorted(calls[1:]) == [[1, 150], [2], [300]]


def _signature(inputs, outputs, key="key"):
    """A Signature from {name: shape} dicts (dtype float: `call_sized_outputs` reads shapes)."""
    spec = {n: TensorSpec(n, dtypes.as_dtype(np.dtype(np.float32)), s) for n, s in inputs.items()}
    out = {n: TensorSpec(n, dtypes.as_dtype(np.dtype(np.float32)), s) for n, s in outputs.items()}
    return Signature(key, PREDICT_METHOD, spec, out, None)


def test_call_sized_outputs_come_from_the_signature_shapes():
    # The exported shapes (keras_bert/saved_model/*_signatures.py): only the token classifier's
    # text signature has widths that no input shape decides.
    ner = _signature({"text": [-1]}, {"tags": [-1, -1], "words": [-1, -1], "num_words": [-1]})
    assert call_sized_outputs(ner) == ["tags", "words"]
    ids = {n: [-1, -1] for n in ("input_word_ids", "input_mask", "input_type_ids")}
    ner_ids = _signature(ids, {"probabilities": [-1, -1, 7], "tag_ids": [-1, -1]})
    swag = _signature({"context": [-1], "endings": [-1, 4]}, {"probabilities": [-1, 4]})
    swag_ids = _signature(
        {n: [-1, -1, -1] for n in ids}, {"probabilities": [-1, -1], "choice": [-1]}
    )
    squad = _signature({"question": [-1], "context": [-1]}, {"answer_text": [-1], "score": [-1]})
    squad_ids = _signature(ids, {"start_logits": [-1, -1], "end_logits": [-1, -1]})
    classify = _signature({"inputs": [-1]}, {"classes": [-1, 3], "scores": [-1, 3]})
    for merged in (ner_ids, swag, swag_ids, squad, squad_ids, classify):
        assert call_sized_outputs(merged) == []
    assert call_sized_outputs(_signature({"x": None}, {"y": None})) == []  # unknown ranks
    assert call_sized_outputs(_signature({"x": [-1]}, {"y": None, "z": [-1, 2]})) == ["y"]
    assert call_sized_outputs(_signature({"x": [-1, 3]}, {"y": [-1, -1]})) == ["y"]


class _PaddingServable:
    """Signatures `words` (text [B] -> words [B, W]: each text's words, "" padding to the call's
    most words) and `ids` (x [B, T] -> y [B, T]); records the rows of every call."""

    name, version = "fake", 1
    signatures = {
        "words": _signature({"text": [-1]}, {"words": [-1, -1]}, "words"),
        "ids": _signature({"x": [-1, -1]}, {"y": [-1, -1]}, "ids"),
    }

    def __init__(self):
        self.calls, self.closers = [], []

    def run(self, key, inputs):
        self.calls.append((key, len(next(iter(inputs.values())))))
        if key == "ids":
            return {"y": inputs["x"] * 2}
        words = [t.split() for t in inputs["text"]]
        width = max(len(w) for w in words)
        return {"words": np.array([w + [b""] * (width - len(w)) for w in words], object)}

    def add_closer(self, fn):
        self.closers.append(fn)


def test_service_never_merges_a_signature_whose_widths_the_call_decides():
    """Two concurrent 1-row requests of a 2-row batching service: the `ids` ones share a call;
    the `words` ones each run alone and come back as wide as their own text."""
    servable = _PaddingServable()
    service = InferenceService(
        None,
        Limits(),
        BatchingOptions(max_batch_size=2, batch_timeout_micros=10_000_000, num_batch_threads=1),
        Metrics(),
    )
    texts = [np.array([b"EU rejects"], object), np.array([b"Peter Blackburn went home ."], object)]
    ids = [np.array([[1, 2, 0]], np.int32), np.array([[3, 4, 5]], np.int32)]
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            words = list(
                pool.map(
                    lambda t: service._run(servable, servable.signatures["words"], {"text": t}),
                    texts,
                )
            )
            doubled = list(
                pool.map(
                    lambda x: service._run(servable, servable.signatures["ids"], {"x": x}), ids
                )
            )
    finally:
        for close in servable.closers:
            close()
    assert [w["words"].tolist() for w in words] == [
        [[b"EU", b"rejects"]],
        [[b"Peter", b"Blackburn", b"went", b"home", b"."]],
    ]
    assert [d["y"].tolist() for d in doubled] == [[[2, 4, 0]], [[6, 8, 10]]]
    assert sorted(servable.calls) == [("ids", 2), ("words", 1), ("words", 1)]


_SENTENCE = st.lists(st.sampled_from([b"EU", b"rejects", b"German", b"lamb", b"."]), max_size=11)
_REQUEST = st.one_of(
    st.tuples(st.just("words"), st.lists(_SENTENCE.map(b" ".join), min_size=1, max_size=3)),
    st.tuples(st.just("ids"), st.integers(1, 3), st.integers(1, 4)),  # rows, width
)


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(st.lists(_REQUEST, min_size=1, max_size=6), st.sampled_from([(), (2, 4)]))
@hypothesis.example(  # the reported case: a 2-word request beside an 11-word one
    [
        ("words", [b"EU rejects"]),
        ("words", [b"EU rejects German lamb . EU rejects German lamb . ."]),
    ],
    (),
)
def test_concurrent_requests_get_their_unbatched_answers(requests, allowed_batch_sizes):
    """Whatever requests arrive together (merged, padded to an allowed size, or run alone), each
    answer equals the servable's answer to that request alone, shapes included."""
    servable = _PaddingServable()
    options = BatchingOptions(
        max_batch_size=4,
        batch_timeout_micros=5000,
        num_batch_threads=2,
        allowed_batch_sizes=allowed_batch_sizes,
    )
    service = InferenceService(None, Limits(), options, Metrics())
    calls = []
    for i, request in enumerate(requests):
        if request[0] == "words":
            inputs = {"text": np.array(request[1], object)}
        else:
            rows, width = request[1:]
            inputs = {"x": np.arange(rows * width, dtype=np.int32).reshape(rows, width) + i}
        calls.append((servable.signatures[request[0]], inputs))
    try:
        with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
            got = list(pool.map(lambda call: service._run(servable, *call), calls))
    finally:
        for close in servable.closers:
            close()
    for (signature, inputs), answer in zip(calls, got):
        want = servable.run(signature.key, inputs)
        assert answer.keys() == want.keys()
        for name in want:
            assert answer[name].shape == want[name].shape
            np.testing.assert_array_equal(answer[name], want[name])
