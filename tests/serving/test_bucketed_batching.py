"""Length-bucketed batching (`length_buckets` in the batching parameters file, our extension):
parsing, the length estimate, the scheduler merging only within a bucket, and a real server whose
bucketed answers to concurrent mixed-length requests equal the unbatched in-process calls."""

import concurrent.futures
import re
import threading
import time
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import prediction_service_pb2_grpc

from serving.dispatch.batching import (
    BatchingOptions,
    BatchScheduler,
    bucket_label,
    length_estimate,
    parse_batching_parameters,
)
from tests.export.conftest import LABELS3, tiny_classifier
from tests.serving.test_grpc_api import predict_request
from tests.tolerance import assert_close_across_paths

BUCKETS = (8, 16, 32)
WORDS = "the film is a gripping , funny and often rewarding piece of work".split()


def sentence(n):
    """n pieces (words and commas) of WORDS, cycling."""
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


def test_parse_length_buckets():
    options = parse_batching_parameters(
        "max_batch_size { value: 8 } allowed_batch_sizes: 4 allowed_batch_sizes: 8 "
        "length_buckets: 16 length_buckets: 32 length_buckets: 64"
    )
    assert options == BatchingOptions(8, allowed_batch_sizes=(4, 8), length_buckets=(16, 32, 64))
    assert parse_batching_parameters("max_batch_size { value: 8 }").length_buckets == ()
    with pytest.raises(ValueError, match=r"length_buckets \[32, 16\] must be increasing"):
        parse_batching_parameters("length_buckets: 32 length_buckets: 16")
    with pytest.raises(ValueError, match="must be increasing and positive"):
        parse_batching_parameters("length_buckets: 0 length_buckets: 16")


def test_bucket_labels():
    shapes = (("text", "|O", ()),)
    assert [bucket_label(BUCKETS, (shapes, i)) for i in (0, 1, 2, 3, None)] == [
        "<=8",
        "<=16",
        "<=32",
        ">32",
        "unestimated",
    ]
    assert bucket_label((), shapes) is None


def test_length_estimate_counts_pieces_cls_and_seps():
    text = np.array([b"a gripping, funny film", b"fine"], dtype=object)
    assert length_estimate({"text": text}) == 1 + 5 + 1  # [CLS] a gripping , funny film [SEP]
    pair = {"text": text, "text_b": np.array([b"", "naïve café !".encode()], dtype=object)}
    assert length_estimate(pair) == max(1 + 5 + 1 + 0 + 1, 1 + 1 + 1 + 3 + 1)
    endings = {"endings": np.array([[b"x y", b"x y z w"]], dtype=object)}  # the longest element
    assert length_estimate(endings) == 1 + 4 + 1
    ids = np.ones([2, 5], np.int32)
    assert length_estimate({"input_word_ids": ids, "input_mask": ids}) is None


def test_scheduler_merges_only_within_a_bucket():
    calls, started, gate = [], threading.Event(), threading.Event()

    def run(inputs):  # row-wise: the answer is each row's piece count; records each call's rows
        started.set()
        gate.wait(30)
        counts = np.array([len(t.split()) for t in inputs["text"]], np.int64)
        calls.append(counts.tolist())
        return {"pieces": counts}

    batches = []  # (rows, bucket) of each call, as the server's per-bucket metric sees them
    scheduler = BatchScheduler(
        run,
        BatchingOptions(max_batch_size=8, num_batch_threads=1, length_buckets=BUCKETS),
        on_batch=lambda rows, padded, waits, bucket: batches.append((rows, bucket)),
    )

    def submit(n):
        return scheduler.submit({"text": np.array([sentence(n).encode()], object)})

    # Estimates n + 2 ([CLS], [SEP]) -> buckets 0, 2, 0, 1, 3, 0, 1, 2, 0, 3, 0, 1 (3: beyond 32).
    lengths = [3, 30, 5, 12, 40, 4, 14, 25, 2, 50, 6, 13]
    try:
        with concurrent.futures.ThreadPoolExecutor(len(lengths) + 1) as pool:
            blocker = pool.submit(submit, 1)  # holds the one batch thread until all are queued
            assert started.wait(30)
            futures = []
            for queued, n in enumerate(lengths, 1):  # one at a time, so arrival order is known
                futures.append(pool.submit(submit, n))
                deadline = time.monotonic() + 30
                while len(scheduler._queue) < queued and time.monotonic() < deadline:
                    time.sleep(0.001)
                assert len(scheduler._queue) == queued
            gate.set()
            got = [f.result(timeout=30)["pieces"].tolist() for f in futures]
            assert blocker.result(timeout=30)["pieces"].tolist() == [1]
    finally:
        gate.set()
        scheduler.stop()
    assert got == [[n] for n in lengths]
    # One call per bucket, in the order of each bucket's first request, each in arrival order.
    assert calls[1:] == [[3, 5, 4, 2, 6], [30, 25], [12, 14, 13], [40, 50]]
    assert batches == [(1, "<=8"), (5, "<=8"), (2, "<=32"), (3, "<=16"), (2, ">32")]


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory, uncased_vocab):
    """A tiny real TextClassifier export (max_seq_length 16): text in, tokenized and cut to the
    batch's longest row inside the SavedModel (so a merged call is padded to its longest request)."""
    model = tiny_classifier(3, LABELS3, "sst3", seed=0, vocab_file=uncased_vocab)
    base = tmp_path_factory.mktemp("bucketed")
    return base, model.export(base, "sst3")


@pytest.mark.slow
def test_bucketed_server_answers_equal_unbatched_calls(tiny_export, start_server, tmp_path):
    base, path = tiny_export
    params = tmp_path / "batching.config"
    params.write_text(  # buckets: <= 6 estimated tokens, 7-10, longer (cut at 16 tokens)
        "max_batch_size { value: 8 } batch_timeout_micros { value: 20000 } "
        "num_batch_threads { value: 2 } max_enqueued_batches { value: 100 } "
        "allowed_batch_sizes: 4 allowed_batch_sizes: 8 length_buckets: 6 length_buckets: 10"
    )
    server = start_server(
        [
            f"--model_base_path={base / 'sst3'}",
            "--model_name=sst3",
            "--enable_batching",
            f"--batching_parameters_file={params}",
        ]
    )
    # Mixed lengths (1-20 pieces), every third request of 2 rows of different lengths.
    requests = [
        [sentence(1 + (7 * i) % 20)] + ([sentence(1 + (11 * i) % 17)] if i % 3 == 0 else [])
        for i in range(48)
    ]
    signature = tf.saved_model.load(str(path)).signatures["serving_default"]
    want = [  # each request alone, in process: no batching at all
        {k: v.numpy() for k, v in signature(text=tf.constant(texts)).items()} for texts in requests
    ]
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

        def one(i):
            response = stub.Predict(predict_request(model="sst3", text=requests[i]), timeout=60)
            return {k: tf.make_ndarray(v) for k, v in response.outputs.items()}

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            got = list(pool.map(one, range(len(requests))))  # any RpcError fails the test
    for i, (g, w) in enumerate(zip(got, want)):
        assert g["probabilities"].shape == (len(requests[i]), 3)
        assert_close_across_paths(g["probabilities"], w["probabilities"], err_msg=f"request {i}")
        np.testing.assert_array_equal(g["label_ids"], w["label_ids"])
        np.testing.assert_array_equal(g["labels"], w["labels"])
    # The answers differ far beyond the tolerance (the model reads the text): not a vacuous match.
    assert np.ptp([w["probabilities"][0] for w in want], axis=0).max() > 1e-4
    # Every batched row is counted once in its length bucket's series, and all three buckets ran.
    with urllib.request.urlopen(
        server.rest_url + "/monitoring/prometheus/metrics", timeout=30
    ) as r:
        exposition = r.read().decode()
    by_bucket = {}
    for labels, value in re.findall(
        r"serving_length_bucket_batch_size_sum\{(.*)\} (\S+)", exposition
    ):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if labels.pop("model") == "sst3" and labels.pop("signature") == "serving_default":
            by_bucket[labels["bucket"]] = float(value)
    series = 'model="sst3",signature="serving_default"'
    total = float(re.search("serving_batch_size_sum{" + series + r"} (\S+)", exposition).group(1))
    assert sorted(by_bucket) == ["<=10", "<=6", ">10"]
    assert sum(by_bucket.values()) == total >= sum(len(r) for r in requests)
