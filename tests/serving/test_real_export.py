"""The server on a real export/ SavedModel (tiny TextClassifier, real uncased vocab, core-op
tokenizer), batching on: gRPC, REST, Classify and the client agree with the in-process call.

Only this test imports keras_bert / export (to build the model); serving/ itself does not."""

import concurrent.futures

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2, prediction_service_pb2_grpc

from serving import client
from tests.serving.test_grpc_api import example, predict_request
from tests.serving.test_rest_api import call

LABELS = ["not_entailment", "entailment"]
TEXTS = ["A gripping, beautifully acted film.", "It's a dull, lifeless mess.", "naïve café", "x"]
TEXTS_B = ["The film is gripping.", "The movie is boring.", "No.", ""]


@pytest.fixture(scope="module")
def real_export(tmp_path_factory, uncased_vocab):
    from tests.export.conftest import tiny_classifier

    model = tiny_classifier(2, LABELS, "rte", seed=0, vocab_file=uncased_vocab, is_pair=True)
    base = tmp_path_factory.mktemp("real_export")
    path = model.export(base, "rte")
    return base, path


@pytest.mark.slow
def test_serves_real_export_with_batching(real_export, start_server, tmp_path):
    base, path = real_export
    loaded = tf.saved_model.load(str(path))
    want = {
        k: v.numpy()
        for k, v in loaded.signatures["serving_default"](
            text=tf.constant(TEXTS), text_b=tf.constant(TEXTS_B)
        ).items()
    }
    params = tmp_path / "batching.config"
    params.write_text(
        "max_batch_size { value: 16 } batch_timeout_micros { value: 5000 } "
        "num_batch_threads { value: 2 } allowed_batch_sizes: 8 allowed_batch_sizes: 16"
    )
    server = start_server(
        [
            f"--model_base_path={base / 'rte'}",
            "--model_name=rte",
            "--enable_batching",
            f"--batching_parameters_file={params}",
        ]
    )
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

        def one(i):  # each request: one row, sent concurrently so the server merges them
            response = stub.Predict(
                predict_request(model="rte", text=[TEXTS[i % 4]], text_b=[TEXTS_B[i % 4]]),
                timeout=60,
            )
            return i, {k: tf.make_ndarray(v) for k, v in response.outputs.items()}

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for i, got in pool.map(one, range(32)):
                np.testing.assert_allclose(
                    got["probabilities"][0], want["probabilities"][i % 4], atol=1e-6
                )
                assert got["labels"][0] == want["labels"][i % 4]
                assert got["label_ids"][0] == want["label_ids"][i % 4]

        request = classification_pb2.ClassificationRequest()
        request.model_spec.name, request.model_spec.signature_name = "rte", "classification"
        request.input.example_list.examples.extend(
            example(text=a, text_b=b) for a, b in zip(TEXTS, TEXTS_B)
        )
        result = stub.Classify(request, timeout=60).result
        np.testing.assert_allclose(
            [[c.score for c in r.classes] for r in result.classifications],
            want["probabilities"],
            atol=1e-6,
        )
        assert [c.label for c in result.classifications[0].classes] == LABELS

        ids = np.zeros([1, 25], np.int64)  # longer than the 24-entry position table
        with pytest.raises(grpc.RpcError) as info:
            stub.Predict(
                predict_request(
                    model="rte",
                    signature="encoded",
                    input_word_ids=ids,
                    input_mask=ids,
                    input_type_ids=ids,
                ),
                timeout=60,
            )
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    got = client.predict_text(server.grpc_target, "rte", TEXTS, TEXTS_B)
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=1e-6)
    status, body = call(
        server,
        "/v1/models/rte:predict",
        {"instances": [{"text": a, "text_b": b} for a, b in zip(TEXTS, TEXTS_B)]},
    )
    assert status == 200
    np.testing.assert_allclose(
        [p["probabilities"] for p in body["predictions"]], want["probabilities"], atol=1e-6
    )
    assert [p["labels"] for p in body["predictions"]] == [s.decode() for s in want["labels"]]


def test_an_unloaded_version_frees_its_variables_and_tables(real_export):
    """tf.saved_model.load registers the export's custom-gradient functions process-wide, and
    they hold the loaded functions and variables: a closed Servable removes exactly those, so
    its variables are freed and the registry is as before (each MiniLM-L6 version swap kept
    about 250 MB until it did; benchmarks/bench_memory.py, its `server` cases). Its vocabulary table, which
    TensorFlow's resource manager kept after the object was gone (3 MiB per swap with the real
    vocabulary; tools/soak.py), is destroyed; another loaded version's stays."""
    import gc
    import weakref

    from tensorflow.python.trackable import resource as resource_lib

    from serving.models import servable as servable_lib

    def tables(servable):
        return [
            obj.resource_handle
            for obj in tf.train.TrackableView(servable._loaded).descendants()
            if isinstance(obj, resource_lib.CapturableResource)
        ]

    registry = servable_lib._gradient_registry()
    before = set(registry)
    servable = servable_lib.Servable("rte", 1, str(real_export[1]))
    other = servable_lib.Servable("rte", 2, str(real_export[1]))  # the same files, loaded again
    added = set(registry) - before - other._gradients
    assert added and servable._gradients == added  # 2 layers: a few per layer
    variables = [weakref.ref(v) for v in servable._functions["serving_default"].variables]
    assert variables
    handles, kept = tables(servable), tables(other)
    assert len(handles) == len(kept) >= 1  # the vocabulary's lookup table
    servable.close()
    del servable
    gc.collect()
    assert set(registry) == before | other._gradients
    assert [v() for v in variables] == [None] * len(variables)
    for handle in handles:
        with pytest.raises(tf.errors.NotFoundError):
            tf.raw_ops.LookupTableSizeV2(table_handle=handle)
    assert [int(tf.raw_ops.LookupTableSizeV2(table_handle=h)) for h in kept] == [30522]
    texts = {"text": np.array([b"a film"]), "text_b": np.array([b"b"])}
    assert other.run("serving_default", texts)["probabilities"].shape == (1, 2)
    other.close()
    assert set(registry) == before


def test_a_failed_load_leaves_no_gradient_function_behind(real_export, tmp_path):
    """A version whose variables are cut short fails after its functions (and their gradients)
    were registered; the server retries such a version, so each try must clean up after itself."""
    import shutil

    from serving.models import servable as servable_lib

    broken = tmp_path / "broken"
    shutil.copytree(real_export[1], broken)
    data = next((broken / "variables").glob("variables.data-*"))
    data.write_bytes(data.read_bytes()[:100])
    registry = servable_lib._gradient_registry()
    before = set(registry)
    with pytest.raises(Exception):
        servable_lib.load_saved_model(str(broken))
    assert set(registry) == before
