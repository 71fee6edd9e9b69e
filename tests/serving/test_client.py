"""serving.client: predict_text over gRPC and REST, and the command line."""
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
    np.testing.assert_array_equal(np.asarray(got["scores"], np.float32), reference("reg", text=TEXTS)["scores"])


@pytest.mark.parametrize("rest", [False, True])
def test_predict_text_errors_carry_status(shared_server, rest):
    target = shared_server.rest_url.removeprefix("http://") if rest else shared_server.grpc_target
    with pytest.raises(client.ClientError) as info:
        client.predict_text(target, "nope", ["a"], rest=rest)
    assert info.value.code == (404 if rest else "NOT_FOUND") and "nope" in info.value.message
    with pytest.raises(TypeError, match="list of strings"):
        client.predict_text(target, "clf", "a single string", rest=rest)


def test_format_prediction():
    outputs = {"probabilities": np.array([[0.25, 0.75]], np.float32), "label_ids": np.array([1]),
               "labels": np.array([b"positive"], dtype=object)}
    assert client.format_prediction(outputs) == ("label: positive\nprobabilities: 0.2500, 0.7500\n"
                                                 "label_id: 1")
    assert client.format_prediction({"scores": np.array([3.5], np.float32)}) == "score: 3.5000"


@pytest.mark.slow
@pytest.mark.parametrize("rest", [False, True])
def test_command_line_prints_label_and_probabilities(shared_server, reference, rest):
    args = ([f"--rest_server={shared_server.rest_url.removeprefix('http://')}", "--rest"] if rest
            else [f"--server={shared_server.grpc_target}"])
    result = subprocess.run([sys.executable, "-m", "serving.client", *args, "--model_name=clf",
                             TEXTS[0], TEXTS_B[1]], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    want = reference("clf", text=[TEXTS[0]], text_b=[TEXTS_B[1]])
    lines = result.stdout.strip().splitlines()
    assert lines[0] == f"label: {want['labels'][0].decode()}"
    assert lines[1] == "probabilities: " + ", ".join(f"{p:.4f}" for p in want["probabilities"][0])
    assert lines[2] == f"label_id: {want['label_ids'][0]}"
