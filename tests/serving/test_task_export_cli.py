"""`python -m export` needs only its three required flags: the task knows the rest.

A fine-tuning output_dir holding only the saved task is exported twice, once with the three
required flags and once with every flag restating the task; one server serves both (a model config
with two models) and every signature answers the same."""

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2, prediction_service_pb2_grpc

from tests.export.conftest import run_export, tiny_classifier
from tests.serving.test_grpc_api import example, predict_request

LABELS = ["entailment", "not_entailment"]
TEXTS = ["A gripping, beautifully acted film.", "It's a DULL mess!!", "naïve café", ""]
TEXTS_B = ["The film is gripping.", "boring", "No.", "empty first"]


def _export(run_dir, base, name, *extra):
    """`python -m export` of the task saved in `run_dir` as <base>/<name>; the path it printed."""
    proc = run_export(run_dir, base, name, *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_three_flag_export_serves_like_an_export_with_every_flag(
    tmp_path, start_server, uncased_vocab
):
    task = tiny_classifier(
        2, LABELS, "rte", 7, uncased_vocab, is_pair=True, num_layers=1, for_export=True
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    task.save(run_dir / "best_model.keras")
    base = tmp_path / "models"
    short = _export(run_dir, base, "short")
    full = _export(
        run_dir,
        base,
        "full",
        "--version=1",
        "--tokenizer=core",
        "--dtype=float32",
        "--max_seq_length=16",
        f"--label_names={','.join(LABELS)}",
        "--do_lower_case",
        "--is_pair",
        "--task_type=classification",
    )
    assert short.endswith("short/1") and full.endswith("full/1")
    config = tmp_path / "models.config"
    config.write_text(
        "model_config_list {"
        + "".join(
            f' config {{ name: "{n}" base_path: "{base / n}" model_platform: "tensorflow" }}'
            for n in ("short", "full")
        )
        + " }"
    )
    server = start_server([f"--model_config_file={config}"])
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        answers = {}
        for name in ("short", "full"):
            response = stub.Predict(
                predict_request(model=name, text=TEXTS, text_b=TEXTS_B), timeout=60
            )
            outputs = {k: tf.make_ndarray(v) for k, v in response.outputs.items()}
            request = classification_pb2.ClassificationRequest()
            request.model_spec.name, request.model_spec.signature_name = name, "classification"
            request.input.example_list.examples.extend(
                example(text=a, text_b=b) for a, b in zip(TEXTS, TEXTS_B)
            )
            result = stub.Classify(request, timeout=60).result
            classify = [[(c.label, c.score) for c in r.classes] for r in result.classifications]
            answers[name] = (outputs, classify)
    (short_out, short_cls), (full_out, full_cls) = answers["short"], answers["full"]
    assert sorted(short_out) == ["label_ids", "labels", "probabilities"]
    for key in short_out:
        np.testing.assert_array_equal(short_out[key], full_out[key])
    assert short_cls == full_cls
    np.testing.assert_allclose(
        short_out["probabilities"], task.predict((TEXTS, TEXTS_B)), atol=1e-6
    )
    assert [x.decode() for x in short_out["labels"]] == [
        LABELS[i] for i in task.predict((TEXTS, TEXTS_B)).argmax(-1)
    ]
