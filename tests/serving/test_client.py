"""serving.client: predict_text over gRPC and REST, and the command line."""

import json
import subprocess
import sys

import numpy as np
import pytest

from serving import client
from tests.conftest import REPO_ROOT
from tests.serving.test_grpc_api import TEXTS, TEXTS_B


@pytest.mark.parametrize("rest", [False, True])
def test_predict_text_equals_in_process(shared_server, reference, rest):
    target = shared_server.rest_url.removeprefix("http://") if rest else shared_server.grpc_target
    got = client.predict_text(target, "clf", TEXTS, TEXTS_B, rest=rest)
    want = reference("clf", text=TEXTS, text_b=TEXTS_B)
    np.testing.assert_array_equal(got["probabilities"].astype(np.float32), want["probabilities"])
    np.testing.assert_array_equal(got["label_ids"], want["label_ids"])
    assert list(got["labels"]) == list(want["labels"])
    got = client.predict_text(target, "reg", TEXTS, rest=rest)
    np.testing.assert_array_equal(
        np.asarray(got["scores"], np.float32), reference("reg", text=TEXTS)["scores"]
    )


@pytest.mark.parametrize("rest", [False, True])
def test_predict_text_errors_carry_status(shared_server, rest):
    target = shared_server.rest_url.removeprefix("http://") if rest else shared_server.grpc_target
    with pytest.raises(client.ClientError) as info:
        client.predict_text(target, "nope", ["a"], rest=rest)
    assert info.value.code == (404 if rest else "NOT_FOUND") and "nope" in info.value.message
    with pytest.raises(TypeError, match="list of strings"):
        client.predict_text(target, "clf", "a single string", rest=rest)


def test_model_status(shared_server):
    assert client.model_status(shared_server.grpc_target, "clf") == [(1, "AVAILABLE", "")]
    with pytest.raises(client.ClientError) as info:
        client.model_status(shared_server.grpc_target, "nope")
    assert info.value.code == "NOT_FOUND"


def test_format_prediction():
    outputs = {
        "probabilities": np.array([[0.25, 0.75]], np.float32),
        "label_ids": np.array([1]),
        "labels": np.array([b"positive"], dtype=object),
    }
    assert client.format_prediction(outputs) == (
        "label: positive\nprobabilities: 0.2500, 0.7500\nlabel_id: 1"
    )
    assert client.format_prediction({"scores": np.array([3.5], np.float32)}) == "score: 3.5000"


def test_cli_texts_batch_and_pairs():
    from absl import app

    assert client.cli_texts(["a gripping, funny film", "a dull mess"], None) == (
        ["a gripping, funny film", "a dull mess"],
        None,
    )  # a batch of two single texts
    assert client.cli_texts(["a", "b"], ["x", "y"]) == (["a", "b"], ["x", "y"])
    with pytest.raises(app.UsageError, match="got 2 TEXT arguments but 1 --text_b"):
        client.cli_texts(["a", "b"], ["x"])
    with pytest.raises(app.UsageError, match="give one or more TEXT arguments"):
        client.cli_texts([], None)


@pytest.mark.slow
def test_command_line_prints_label_and_probabilities(shared_server, reference):
    rest_target = shared_server.rest_url.removeprefix("http://")
    grpc_flag = f"--server={shared_server.grpc_target}"
    runs = [
        [grpc_flag, "--model_name=clf", TEXTS[0], f"--text_b={TEXTS_B[1]}"],
        [
            "--rest",
            f"--rest_server={rest_target}",
            "--model_name=clf",
            TEXTS[0],
            f"--text_b={TEXTS_B[1]}",
        ],
        [grpc_flag, "--model_name=reg", TEXTS[0], TEXTS[1]],
    ]  # a batch of two single texts
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "serving.client", *args],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in runs
    ]
    want = reference("clf", text=[TEXTS[0]], text_b=[TEXTS_B[1]])
    expected = [
        f"label: {want['labels'][0].decode()}",
        "probabilities: " + ", ".join(f"{p:.4f}" for p in want["probabilities"][0]),
        f"label_id: {want['label_ids'][0]}",
    ]
    scores = np.reshape(reference("reg", text=TEXTS[:2])["scores"], [2, -1])
    expected_batch = [
        f"[0] {TEXTS[0]!r}",
        "score: " + ", ".join(f"{s:.4f}" for s in scores[0]),
        f"[1] {TEXTS[1]!r}",
        "score: " + ", ".join(f"{s:.4f}" for s in scores[1]),
    ]
    for proc, want_lines in zip(procs, [expected, expected, expected_batch]):  # run side by side
        try:
            out, err = proc.communicate(timeout=180)
        finally:
            proc.kill()
        assert proc.returncode == 0, err[-2000:]
        assert out.strip().splitlines() == want_lines


# A client call in a fresh process: predict_text and model_status, then which TensorFlow modules
# it imported; with "then_tensorflow", TensorFlow imported afterwards loads and calls the model.
_FRESH_CLIENT = """
import json, sys
from serving import client
target, texts, texts_b, model_dir = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
out = client.predict_text(target, "clf", texts, texts_b)
result = {
    "imported": sorted(m for m in ("tensorflow", "tensorflow.python") if m in sys.modules),
    "probabilities": out["probabilities"].tolist(),
    "labels": [x.decode() for x in out["labels"]],
    "status": client.model_status(target, "clf"),
}
if len(sys.argv) > 5:
    import tensorflow as tf
    fn = tf.saved_model.load(model_dir).signatures["serving_default"]
    local = fn(text=tf.constant(texts), text_b=tf.constant(texts_b))
    result["in_process"] = local["probabilities"].numpy().tolist()
print(json.dumps(result))
"""


def _fresh_client(shared_server, model_base, *extra):
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            _FRESH_CLIENT,
            shared_server.grpc_target,
            json.dumps(TEXTS),
            json.dumps(TEXTS_B),
            str(model_base / "clf" / "1"),
            *extra,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_a_client_call_does_not_import_tensorflow(shared_server, model_base, reference):
    got = _fresh_client(shared_server, model_base)
    assert got["imported"] == []  # neither the package nor its runtime (tensorflow.python)
    want = reference("clf", text=TEXTS, text_b=TEXTS_B)
    np.testing.assert_array_equal(np.float32(got["probabilities"]), want["probabilities"])
    assert got["labels"] == [x.decode() for x in want["labels"]]
    assert got["status"] == [[1, "AVAILABLE", ""]]


@pytest.mark.slow
def test_tensorflow_imported_after_a_client_call_still_works(shared_server, model_base):
    got = _fresh_client(shared_server, model_base, "then_tensorflow")
    assert got["imported"] == []
    np.testing.assert_array_equal(np.float32(got["probabilities"]), np.float32(got["in_process"]))
