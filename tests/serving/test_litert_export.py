"""The LiteRT exports (`--tflite`, `--quantize=int8`): model.tflite beside the SavedModel, loaded
in a fresh process by the LiteRT runtime alone, served by `serving.server --prefer_tflite_model`,
agreeing with the float32 SavedModel.

Model: a tiny TextClassifier (3 labels, real uncased vocab) with N(0, 0.5) weights, so its
outputs differ per sentence and are far from ties. Bounds, against the SavedModel's `encoded`:
float32 LiteRT within 1e-4 (the same float32 arithmetic in another order); int8 the same label on
every sentence and probabilities within 0.02 (dynamic-range int8: about 1/254 of each output
channel's largest weight per weight, and per-row int8 activations).
"""
import json
import pathlib
import subprocess
import sys

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import get_model_metadata_pb2, prediction_service_pb2_grpc

from tests.conftest import REPO_ROOT
from tests.serving.test_grpc_api import predict_request

LABELS = ["negative", "neutral", "positive"]
SENTENCES = ["a gripping , beautifully acted film .", "it 's a dull , lifeless mess .",
             "naïve café", "x", "the plot is thin but the actors carry it with ease and charm ."]
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
    from keras_bert import BertEncoder
    from keras_bert.tasks import TextClassifier
    from keras_bert.tokenization import BertPreprocessor

    encoder = BertEncoder(vocab_size=30522, hidden_size=8, num_layers=2, num_heads=2,
                          intermediate_size=12, max_sequence_length=24)
    preprocessor = BertPreprocessor(uncased_vocab, max_seq_length=16)
    model = TextClassifier(encoder, 3, label_names=LABELS, task_name="sst3",
                           preprocessor=preprocessor)
    model.build()
    rng = np.random.default_rng(3)
    for w in model.weights:
        w.assign(rng.normal(0.0, 0.5, w.shape).astype("float32"))
    base = tmp_path_factory.mktemp("litert")
    paths = {q: model.export(base, "sst3", litert=q) for q in ("float32", "int8")}
    packed = preprocessor(tf.constant(SENTENCES))
    ids = {k: np.asarray(packed[k], np.int32)
           for k in ("input_word_ids", "input_mask", "input_type_ids")}
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
        assert [log.predict_log.request.model_spec.signature_name for log in logs] == \
            ["encoded"]
    # int8: the dense and embedding weights take a byte each instead of four.
    sizes = {q: (p / "model.tflite").stat().st_size for q, p in paths.items()}
    assert sizes["int8"] < 0.4 * sizes["float32"], sizes


@pytest.mark.slow
def test_fresh_process_with_litert_alone_agrees_with_the_saved_model(litert_exports, tmp_path):
    _, paths, ids = litert_exports
    np.savez(tmp_path / "ids.npz", **ids)
    want = saved_model_encoded(paths["float32"], ids)
    for quantize, path in paths.items():
        out = subprocess.run([sys.executable, "-I", "-c", LOAD_IN_FRESH_PROCESS,
                              str(path / "model.tflite"), str(tmp_path / "ids.npz")],
                             capture_output=True, text=True, timeout=120, check=True)
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
        'model_platform: "tensorflow" model_version_policy { specific { versions: 1 } } } }')
    server = start_server([f"--model_config_file={config}", "--prefer_tflite_model",
                           "--tensorflow_intra_op_parallelism=1"], rest=False)
    assert "with LiteRT" in server.log()
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        for name, bound in (("float32", 1e-4), ("int8", INT8_PROBABILITY_BOUND)):
            response = stub.Predict(predict_request(model=name, signature="encoded", **ids),
                                    timeout=60)
            got = {k: tf.make_ndarray(v) for k, v in response.outputs.items()}
            np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=bound)
            assert list(got["labels"]) == list(want["labels"])
            np.testing.assert_array_equal(got["label_ids"], want["label_ids"])
            # int64 ids from a client are cast to the signature's int32, as for SavedModels.
            response = stub.Predict(predict_request(
                model=name, signature="encoded",
                **{k: v[:1].astype(np.int64) for k, v in ids.items()}), timeout=60)
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

        # An id outside the embedding table: INVALID_ARGUMENT naming it, and the server goes on.
        bad = dict(ids, input_word_ids=ids["input_word_ids"] + 40000)
        with pytest.raises(grpc.RpcError) as info:
            stub.Predict(predict_request(model="int8", signature="encoded", **bad), timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "gather index out of bounds" in info.value.details()
        response = stub.Predict(predict_request(model="int8", signature="encoded", **ids),
                                timeout=60)
        assert list(tf.make_ndarray(response.outputs["labels"])) == list(want["labels"])
        # A mask value other than 0 / 1: refused with the SavedModel's message.
        with pytest.raises(grpc.RpcError) as info:
            stub.Predict(predict_request(model="float32", signature="encoded",
                                         **dict(ids, input_mask=ids["input_mask"] * 2)), timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert info.value.details() == "input_mask: values must be 0 or 1"
        # Longer than the 24-entry position table: refused, and the interpreter recovers.
        long_ids = {k: np.tile(v[:1], (1, 2)) for k, v in ids.items()}  # T = 32
        with pytest.raises(grpc.RpcError) as info:
            stub.Predict(predict_request(model="float32", signature="encoded", **long_ids),
                         timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "LiteRT could not run signature 'encoded'" in info.value.details()
        response = stub.Predict(predict_request(model="float32", signature="encoded", **ids),
                                timeout=60)
        np.testing.assert_allclose(tf.make_ndarray(response.outputs["probabilities"]),
                                   want["probabilities"], atol=1e-4)


@pytest.mark.slow
def test_without_the_flag_the_saved_model_serves_every_signature(litert_exports, start_server):
    base, _, _ = litert_exports
    server = start_server([f"--model_base_path={base / 'sst3'}", "--model_name=sst3"], rest=False)
    assert "--prefer_tflite_model" in server.log()  # says what the version also holds
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        response = stub.Predict(predict_request(model="sst3", text=SENTENCES[:2]), timeout=60)
        assert len(tf.make_ndarray(response.outputs["labels"])) == 2


@pytest.mark.slow
def test_export_cli_quantize_flag(tmp_path, uncased_vocab):
    """`python -m export --quantize=int8` on a saved task; --tflite alone gives float32."""
    from tests.export.conftest import tiny_classifier

    model = tiny_classifier(2, ["no", "yes"], "cli", seed=1, vocab_file=uncased_vocab)
    model.save(tmp_path / "task.keras")
    for flags, quantize, version in ((["--quantize=int8"], "int8", 1), (["--tflite"], "float32", 2)):
        out = subprocess.run(
            [sys.executable, "-m", "export", f"--model_dir={tmp_path / 'task.keras'}",
             f"--export_base={tmp_path / 'models'}", "--model_name=cli", *flags],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
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
        "weights_sha256"]
    assert exporter.find_export(base, "sst3", fingerprint, litert="float32") == paths["float32"]
    assert exporter.find_export(base, "sst3", fingerprint, litert="int8") == paths["int8"]
    assert exporter.find_export(base, "sst3", fingerprint) is None  # none without model.tflite
    assert exporter.find_export(base, "sst3", "0" * 64, litert="int8") is None
