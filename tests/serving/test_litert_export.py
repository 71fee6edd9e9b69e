"""The LiteRT exports (`--tflite`, `--quantize=int8`): model.tflite beside the SavedModel, loaded
in a fresh process by the LiteRT runtime alone, served by `serving.server --prefer_tflite_model`,
agreeing with the float32 SavedModel.

Model: a tiny TextClassifier (3 labels, real uncased vocab) with N(0, 0.5) weights, so its
outputs differ per sentence and are far from ties. Bounds, against the SavedModel's `encoded`:
float32 LiteRT within 1e-4 (the same float32 arithmetic in another order); int8 the same label on
every sentence and probabilities within 0.02 (dynamic-range int8: about 1/254 of each output
channel's largest weight per weight, and per-row int8 activations).
"""

import concurrent.futures
import http.client
import json
import pathlib
import subprocess
import sys
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import get_model_metadata_pb2

from tests.serving.test_declared_sizes import declared_size_cases
from tests.serving.test_grpc_api import outputs, predict_request, prediction_stub

LABELS = ["negative", "neutral", "positive"]
SENTENCES = [
    "a gripping , beautifully acted film .",
    "it 's a dull , lifeless mess .",
    "naïve café",
    "x",
    "the plot is thin but the actors carry it with ease and charm .",
]
INT8_PROBABILITY_BOUND = 0.02

LOAD_IN_FRESH_PROCESS = r"""
import json, sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter
runner = Interpreter(model_path=sys.argv[1]).get_signature_runner("encoded")
ids = np.load(sys.argv[2])
out = runner(input_word_ids=ids["input_word_ids"], input_mask=ids["input_mask"],
             input_type_ids=ids["input_type_ids"])
print(json.dumps({"modules": sorted({m.split(".")[0] for m in sys.modules}),
                  "probabilities": out["probabilities"].tolist(),
                  "labels": [x.decode() for x in out["labels"]]}))
"""


@pytest.fixture(scope="module")
def litert_exports(tmp_path_factory, uncased_vocab):
    """(base, {"float32": version dir 1, "int8": version dir 2}, packed ids of SENTENCES)."""
    from tests.export.conftest import tiny_classifier

    model = tiny_classifier(3, LABELS, "sst3", seed=3, vocab_file=uncased_vocab)
    preprocessor = model.preprocessor
    base = tmp_path_factory.mktemp("litert")
    paths = {q: pathlib.Path(model.export(base, "sst3", litert=q)) for q in ("float32", "int8")}
    packed = preprocessor(tf.constant(SENTENCES))
    ids = {
        k: np.asarray(packed[k], np.int32)
        for k in ("input_word_ids", "input_mask", "input_type_ids")
    }
    return base, paths, ids


def saved_model_encoded(path, ids):
    fn = tf.saved_model.load(str(path)).signatures["encoded"]
    return {k: v.numpy() for k, v in fn(**{k: tf.constant(v) for k, v in ids.items()}).items()}


@pytest.mark.slow
def test_layout_config_and_warmup(litert_exports):
    _, paths, _ = litert_exports
    from tests.export.conftest import read_warmup

    for quantize, path in paths.items():
        assert (path / "model.tflite").is_file() and (path / "saved_model.pb").is_file()
        config = json.loads((path / "assets" / "export_config.json").read_text())
        assert config["litert"]["quantize"] == quantize
        assert config["litert"]["signatures"] == ["encoded"]
        # Only records a LiteRT-served version can answer: encoded at batch 1 and 2.
        logs = read_warmup(path)
        assert [log.predict_log.request.model_spec.signature_name for log in logs] == ["encoded"]
    # int8: the dense and embedding weights take a byte each instead of four.
    sizes = {q: (p / "model.tflite").stat().st_size for q, p in paths.items()}
    assert sizes["int8"] < 0.4 * sizes["float32"], sizes


@pytest.mark.slow
def test_fresh_process_with_litert_alone_agrees_with_the_saved_model(litert_exports, tmp_path):
    _, paths, ids = litert_exports
    np.savez(tmp_path / "ids.npz", **ids)
    want = saved_model_encoded(paths["float32"], ids)
    for quantize, path in paths.items():
        out = subprocess.run(
            [
                sys.executable,
                "-I",
                "-c",
                LOAD_IN_FRESH_PROCESS,
                str(path / "model.tflite"),
                str(tmp_path / "ids.npz"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        got = json.loads(out.stdout.strip().splitlines()[-1])
        assert "tensorflow" not in got["modules"] and "keras_bert" not in got["modules"]
        probabilities = np.array(got["probabilities"])
        bound = 1e-4 if quantize == "float32" else INT8_PROBABILITY_BOUND
        np.testing.assert_allclose(probabilities, want["probabilities"], atol=bound)
        assert got["labels"] == [x.decode() for x in want["labels"]]


@pytest.mark.slow
def test_server_prefers_the_tflite_file(litert_exports, start_server):
    base, paths, ids = litert_exports
    want = saved_model_encoded(paths["float32"], ids)
    # Version 2 (int8) is the latest; a second model name serves version 1 (float32) only.
    config = base / "models.config"
    config.write_text(
        f'model_config_list {{ config {{ name: "int8" base_path: "{base / "sst3"}" '
        f'model_platform: "tensorflow" }} config {{ name: "float32" base_path: "{base / "sst3"}" '
        'model_platform: "tensorflow" model_version_policy { specific { versions: 1 } } } }'
    )
    server = start_server(
        [
            f"--model_config_file={config}",
            "--prefer_tflite_model",
            "--tensorflow_intra_op_parallelism=1",
        ],
        rest=False,
    )
    assert "with LiteRT" in server.log()
    with prediction_stub(server.grpc_target) as stub:
        for name, bound in (("float32", 1e-4), ("int8", INT8_PROBABILITY_BOUND)):
            response = stub.Predict(
                predict_request(model=name, signature="encoded", **ids), timeout=60
            )
            got = outputs(response)
            np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=bound)
            assert list(got["labels"]) == list(want["labels"])
            np.testing.assert_array_equal(got["label_ids"], want["label_ids"])
            # int64 ids from a client are cast to the signature's int32, as for SavedModels.
            response = stub.Predict(
                predict_request(
                    model=name,
                    signature="encoded",
                    **{k: v[:1].astype(np.int64) for k, v in ids.items()},
                ),
                timeout=60,
            )
            assert tf.make_ndarray(response.outputs["labels"])[0] == want["labels"][0]

        # Only the flatbuffer's signature exists, as with tensorflow_model_server.
        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        request.model_spec.name = "int8"
        metadata = stub.GetModelMetadata(request, timeout=30)
        sig_map = get_model_metadata_pb2.SignatureDefMap()
        metadata.metadata["signature_def"].Unpack(sig_map)
        assert sorted(sig_map.signature_def) == ["encoded"]
        encoded = sig_map.signature_def["encoded"]
        assert sorted(encoded.inputs) == ["input_mask", "input_type_ids", "input_word_ids"]
        assert sorted(encoded.outputs) == ["label_ids", "labels", "probabilities"]
        assert [d.size for d in encoded.outputs["probabilities"].tensor_shape.dim] == [-1, 3]
        with pytest.raises(grpc.RpcError) as info:
            stub.Predict(predict_request(model="int8", text=["a text"]), timeout=30)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION

        # Sizes a request declares are checked before a LiteRT servable sees it, as for
        # SavedModels (tests/serving/test_declared_sizes.py has every case).
        for hostile, fragment in declared_size_cases(name="int8"):
            with pytest.raises(grpc.RpcError) as info:
                stub.Predict(hostile, timeout=30)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert fragment in info.value.details()
            response = stub.Predict(
                predict_request(model="int8", signature="encoded", **ids), timeout=60
            )
            assert list(tf.make_ndarray(response.outputs["labels"])) == list(want["labels"])

        # An id outside the embedding table: INVALID_ARGUMENT naming it, and the server goes on.
        bad = dict(ids, input_word_ids=ids["input_word_ids"] + 40000)
        with pytest.raises(grpc.RpcError) as info:
            stub.Predict(predict_request(model="int8", signature="encoded", **bad), timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "gather index out of bounds" in info.value.details()
        response = stub.Predict(
            predict_request(model="int8", signature="encoded", **ids), timeout=60
        )
        assert list(tf.make_ndarray(response.outputs["labels"])) == list(want["labels"])
        # A mask value other than 0 / 1 (above or below): refused with the SavedModel's message.
        for bad_mask in (ids["input_mask"] * 2, -ids["input_mask"]):
            with pytest.raises(grpc.RpcError) as info:
                stub.Predict(
                    predict_request(
                        model="float32", signature="encoded", **dict(ids, input_mask=bad_mask)
                    ),
                    timeout=30,
                )
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert info.value.details() == "input_mask: values must be 0 or 1"
        # Longer than the 24-entry position table: refused, and the interpreter recovers.
        long_ids = {k: np.tile(v[:1], (1, 2)) for k, v in ids.items()}  # T = 32
        with pytest.raises(grpc.RpcError) as info:
            stub.Predict(
                predict_request(model="float32", signature="encoded", **long_ids), timeout=30
            )
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "LiteRT could not run signature 'encoded'" in info.value.details()
        response = stub.Predict(
            predict_request(model="float32", signature="encoded", **ids), timeout=60
        )
        np.testing.assert_allclose(
            tf.make_ndarray(response.outputs["probabilities"]), want["probabilities"], atol=1e-4
        )


def encoded_request(ids):
    ids = np.array(ids, np.int32)
    return {
        "input_word_ids": ids,
        "input_mask": np.ones_like(ids),
        "input_type_ids": np.zeros_like(ids),
    }


def fresh_litert_answer(path, inputs):
    """What a fresh interpreter gives for `inputs` alone: ("ok", outputs) or ("error", message as
    the server words it)."""
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(path / "model.tflite")).get_signature_runner("encoded")
    try:
        return "ok", runner(**inputs)
    except RuntimeError as e:
        return "error", f"LiteRT could not run signature 'encoded': {str(e).strip()}"


class RestClient:
    """One client: its own keep-alive HTTP connection to the server's REST port."""

    def __init__(self, server):
        self.connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=60)

    def predict(self, model, inputs):
        body = json.dumps(
            {"signature_name": "encoded", "inputs": {k: v.tolist() for k, v in inputs.items()}}
        )
        self.connection.request(
            "POST", f"/v1/models/{model}:predict", body, {"Content-Type": "application/json"}
        )
        response = self.connection.getresponse()
        return response.status, json.loads(response.read())


def assert_answer(status, body, want):
    kind, value = want
    if kind == "error":
        assert (status, body) == (400, {"error": value})
    else:
        assert status == 200, body
        for name in ("probabilities", "label_ids"):
            np.testing.assert_array_equal(
                np.array(body["outputs"][name], value[name].dtype), value[name]
            )
        assert body["outputs"]["labels"] == [x.decode() for x in value["labels"]]


BAD_ID = encoded_request([[101, 40000, 102]])  # outside the 30522-entry vocabulary
TOO_LONG = encoded_request([[101] + [2000] * 30 + [102]])  # 32 > the 24-entry position table
GOOD = encoded_request([[101, 2000, 102]])
GOOD_2x5 = encoded_request([[101, 2000, 2001, 2002, 102], [101, 7592, 1010, 2088, 102]])


@pytest.mark.slow
def test_litert_errors_belong_to_their_request(litert_exports, start_server, tmp_path):
    """The LiteRT wrapper's error reporter keeps every earlier error's text. Two clients
    send bad, bad, good and bad requests in turn; each answer is exactly what a fresh interpreter
    gives for that request alone (no earlier text, a good request after failures unchanged). Then
    with batching, a bad and a good request merged into one failing call get their own answers."""
    base, paths, _ = litert_exports
    path = paths["float32"]
    fresh = {
        name: fresh_litert_answer(path, inputs)
        for name, inputs in (
            ("bad_id", BAD_ID),
            ("too_long", TOO_LONG),
            ("good", GOOD),
            ("good_2x5", GOOD_2x5),
        )
    }
    # What a fresh interpreter says, once each: the gather failure, and a different one.
    assert fresh["bad_id"][0] == fresh["too_long"][0] == "error"
    assert fresh["bad_id"][1].startswith(
        "LiteRT could not run signature 'encoded': gather index out of bounds"
    )
    assert fresh["bad_id"][1].endswith("(GATHER) failed to invoke.")
    assert fresh["bad_id"][1].count("failed to invoke.") == 1
    assert "gather" not in fresh["too_long"][1]
    assert fresh["good"][0] == fresh["good_2x5"][0] == "ok"

    config = tmp_path / "models.config"
    config.write_text(
        f'model_config_list {{ config {{ name: "float32" base_path: "{base / "sst3"}" '
        'model_platform: "tensorflow" model_version_policy { specific { versions: 1 } } } }'
    )
    flags = [
        f"--model_config_file={config}",
        "--prefer_tflite_model",
        "--tensorflow_intra_op_parallelism=1",
        "--file_system_poll_wait_seconds=0",
    ]
    inputs = {"bad_id": BAD_ID, "too_long": TOO_LONG, "good": GOOD, "good_2x5": GOOD_2x5}

    server = start_server(flags)
    assert "with LiteRT" in server.log()
    a, b = RestClient(server), RestClient(server)
    for client, name in (
        (a, "bad_id"),
        (b, "too_long"),
        (a, "bad_id"),
        (b, "good"),
        (a, "bad_id"),
        (b, "good_2x5"),
        (a, "too_long"),
        (b, "bad_id"),
        (a, "good"),
    ):
        status, body = client.predict("float32", inputs[name])
        assert_answer(status, body, fresh[name])

    # Batching: two 1-row requests of one shape merge into one call (max_batch_size 2), which the
    # bad row fails; each then runs alone. Unmerged, each would wait out the 600 s timeout; the
    # bound below is far from both (a busy machine made a merged pair take 16.6 s).
    params = tmp_path / "batching.config"
    params.write_text(
        "max_batch_size { value: 2 } batch_timeout_micros { value: 600000000 } "
        "num_batch_threads { value: 1 }"
    )
    server = start_server([*flags, "--enable_batching", f"--batching_parameters_file={params}"])
    a, b = RestClient(server), RestClient(server)
    for names in (("bad_id", "good"), ("good", "bad_id"), ("bad_id", "bad_id")):
        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda c, n: c.predict("float32", inputs[n]), (a, b), names))
        assert time.monotonic() - start < 300  # merged: neither waited for the timeout
        for (status, body), name in zip(answers, names):
            assert_answer(status, body, fresh[name])


def servable_answer(servable, inputs):
    """A LiteRtServable's answer in fresh_litert_answer's form."""
    from serving.wire import errors

    try:
        return "ok", servable.run("encoded", inputs)
    except errors.ServingError as e:
        assert e.code == grpc.StatusCode.INVALID_ARGUMENT, e
        return "error", e.message


def assert_same_answer(got, want):
    assert got[0] == want[0], (got, want)
    if want[0] == "error":
        assert got[1] == want[1]
    else:
        for name in ("probabilities", "label_ids", "labels"):
            np.testing.assert_array_equal(got[1][name], want[1][name])


@pytest.mark.slow
def test_litert_servable_concurrent_clients_get_their_own_answers(litert_exports):
    """Four threads share one LiteRtServable, each sending its own mix of bad and good requests:
    every answer equals a fresh interpreter's for that request alone."""
    from serving.models.servable import LiteRtServable

    path = litert_exports[1]["float32"]
    inputs = {"bad_id": BAD_ID, "too_long": TOO_LONG, "good": GOOD, "good_2x5": GOOD_2x5}
    fresh = {name: fresh_litert_answer(path, x) for name, x in inputs.items()}
    servable = LiteRtServable("float32", 1, str(path), num_threads=1)
    names = list(inputs)

    def client(c):
        sequence = [str(n) for n in np.random.default_rng(c).permutation(names * 6)]
        return sequence, [servable_answer(servable, inputs[n]) for n in sequence]

    try:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(client, range(4)))
    finally:
        servable.close()
    for sequence, answers in results:
        assert sorted(sequence) == sorted(names * 6)
        for name, got in zip(sequence, answers):
            assert_same_answer(got, fresh[name])


@pytest.mark.slow
def test_litert_servable_reload_failure_after_a_failed_call(litert_exports, tmp_path):
    """The interpreter is replaced after a failed call; when model.tflite cannot be read then, the
    bad request still gets its own message, later calls are UNAVAILABLE until it can be read
    again, and then answer as a fresh interpreter does."""
    import shutil

    from serving.wire import errors
    from serving.models.servable import LiteRtServable

    path = tmp_path / "1"
    shutil.copytree(litert_exports[1]["float32"], path)
    fresh = {name: fresh_litert_answer(path, x) for name, x in (("bad_id", BAD_ID), ("good", GOOD))}
    servable = LiteRtServable("m", 1, str(path), num_threads=1)
    try:
        (path / "model.tflite").rename(path / "moved.tflite")
        assert_same_answer(servable_answer(servable, BAD_ID), fresh["bad_id"])
        for _ in range(2):
            with pytest.raises(errors.ServingError) as info:
                servable.run("encoded", GOOD)
            assert info.value.code == grpc.StatusCode.UNAVAILABLE
            assert info.value.message == (
                'Model "m" version 1: the LiteRT interpreter could not be reloaded after a failed '
                "call (FileNotFoundError); retry later"
            )
        (path / "moved.tflite").rename(path / "model.tflite")
        assert_same_answer(servable_answer(servable, GOOD), fresh["good"])
        assert_same_answer(servable_answer(servable, BAD_ID), fresh["bad_id"])
        assert_same_answer(servable_answer(servable, GOOD), fresh["good"])
    finally:
        servable.close()


def tensorflow_mapped(pid) -> bool:
    """Whether process `pid` has TensorFlow's runtime library mapped (Linux /proc/<pid>/maps)."""
    return "libtensorflow" in pathlib.Path(f"/proc/{pid}/maps").read_text()


def wait_available(stub, name, timeout=120):
    from tensorflow_serving.apis import get_model_status_pb2

    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            states = [
                s.state for s in stub.GetModelStatus(request, timeout=10).model_version_status
            ]
        except grpc.RpcError:
            states = []
        if get_model_status_pb2.ModelVersionStatus.AVAILABLE in states:
            return
        time.sleep(0.2)
    raise TimeoutError(f"model {name} not AVAILABLE after {timeout} s")


@pytest.mark.slow
def test_litert_only_server_loads_no_tensorflow_until_a_saved_model_needs_it(
    litert_exports, start_server, model_base, tmp_path
):
    """Every version served from LiteRT: TensorFlow's runtime is never loaded (gRPC and REST
    predictions, the export's warmup record replayed, model metadata). A SavedModel-only model
    added by a config reload then loads it, with the thread and custom-op set-up of the flags."""
    from tensorflow_serving.apis import model_service_pb2_grpc

    base, paths, ids = litert_exports
    want = saved_model_encoded(paths["float32"], ids)
    litert_only = (
        f'config {{ name: "float32" base_path: "{base / "sst3"}" model_platform: "tensorflow" '
        "model_version_policy { specific { versions: 1 } } }"
    )
    config = tmp_path / "models.config"
    config.write_text(f"model_config_list {{ {litert_only} }}")
    server = start_server(
        [
            f"--model_config_file={config}",
            "--model_config_file_poll_wait_seconds=0.5",
            "--prefer_tflite_model",
            "--tensorflow_intra_op_parallelism=1",
            "--tensorflow_inter_op_parallelism=1",
        ]
    )
    assert "replayed 1 warmup requests for float32 version 1" in server.log()
    with prediction_stub(server.grpc_target) as stub:
        response = stub.Predict(
            predict_request(model="float32", signature="encoded", **ids), timeout=60
        )
        np.testing.assert_allclose(
            outputs(response)["probabilities"], want["probabilities"], atol=1e-4
        )
    body = json.dumps(
        {"signature_name": "encoded", "inputs": {k: v.tolist() for k, v in ids.items()}}
    )
    host, port = server.rest_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    connection.request("POST", "/v1/models/float32:predict", body)
    answer = json.loads(connection.getresponse().read())
    connection.close()
    np.testing.assert_allclose(answer["outputs"]["probabilities"], want["probabilities"], atol=1e-4)
    assert not tensorflow_mapped(server.proc.pid)
    assert "TensorFlow threads" not in server.log()

    clf = f'config {{ name: "clf" base_path: "{model_base / "clf"}" model_platform: "tensorflow" }}'
    config.write_text(f"model_config_list {{ {litert_only} {clf} }}")
    with grpc.insecure_channel(server.grpc_target) as channel:
        wait_available(model_service_pb2_grpc.ModelServiceStub(channel), "clf")
    with prediction_stub(server.grpc_target) as stub:
        response = stub.Predict(
            predict_request(model="clf", text=["a fine film"], text_b=[""]), timeout=60
        )
        assert outputs(response)["probabilities"].shape == (1, 3)
        response = stub.Predict(
            predict_request(model="float32", signature="encoded", **ids), timeout=60
        )
        np.testing.assert_allclose(
            outputs(response)["probabilities"], want["probabilities"], atol=1e-4
        )
    assert tensorflow_mapped(server.proc.pid)
    assert "TensorFlow threads: intra-op 1, inter-op 1" in server.log()


@pytest.mark.slow
def test_without_the_flag_the_saved_model_serves_every_signature(litert_exports, start_server):
    base, _, _ = litert_exports
    server = start_server([f"--model_base_path={base / 'sst3'}", "--model_name=sst3"], rest=False)
    assert "--prefer_tflite_model" in server.log()  # says what the version also holds
    with prediction_stub(server.grpc_target) as stub:
        response = stub.Predict(predict_request(model="sst3", text=SENTENCES[:2]), timeout=60)
        assert len(tf.make_ndarray(response.outputs["labels"])) == 2


@pytest.mark.slow
def test_export_cli_quantize_flag(tmp_path, uncased_vocab):
    """`python -m export --quantize=int8` on a saved task; --tflite alone gives float32."""
    from tests.export.conftest import run_export, tiny_classifier

    model = tiny_classifier(2, ["no", "yes"], "cli", seed=1, vocab_file=uncased_vocab)
    model.save(tmp_path / "task.keras")
    for flags, quantize, version in (
        (["--quantize=int8"], "int8", 1),
        (["--tflite"], "float32", 2),
    ):
        out = run_export(tmp_path / "task.keras", tmp_path / "models", "cli", *flags, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        path = pathlib.Path(out.stdout.strip().splitlines()[-1])
        assert path.name == str(version)
        config = json.loads((path / "assets" / "export_config.json").read_text())
        assert config["litert"]["quantize"] == quantize


@pytest.mark.slow
def test_find_export_matches_the_litert_file(litert_exports):
    """A resumed recipe re-exports unless a version has the same weights AND the same LiteRT
    file (recipes/run_classifier.py export_once)."""
    from keras_bert.saved_model import exporter

    base, paths, _ = litert_exports
    fingerprint = json.loads((paths["int8"] / "assets" / "export_config.json").read_text())[
        "weights_sha256"
    ]
    assert exporter.find_export(base, "sst3", fingerprint, litert="float32") == str(
        paths["float32"]
    )
    assert exporter.find_export(base, "sst3", fingerprint, litert="int8") == str(paths["int8"])
    assert exporter.find_export(base, "sst3", fingerprint) is None  # none without model.tflite
    assert exporter.find_export(base, "sst3", "0" * 64, litert="int8") is None
