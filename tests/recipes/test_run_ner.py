"""recipes/run_ner.py: two-step smoke run on real CoNLL-2003 sentences, export, and the exported
`serving_default` (loaded with plain TensorFlow in a fresh process) against `task.predict`."""

import json
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from keras_bert.data import conll
from keras_bert.metrics.ner import entity_scores
from keras_bert.tasks import TokenClassifier, load_task
from tests.recipes.finished_run import served_in_fresh_process, assert_finished_run_dir, result_line
from tests.recipes.kill_resume import assert_killed_and_resumed_like_uninterrupted
from tests.recipes.recipe_process import exported_run_flags, recipe_env, run_recipe, tiny_run_flags
from tests.serving.conftest import ServerProcess

TEXTS = [
    "EU rejects German call to boycott British lamb .",
    "",
    "Zürich São Paulo Ångström qxzvwk " * 4,  # accents, [UNK] words, > one 30-piece window
    "Peter Blackburn\tBRUSSELS  1996-08-22",
]


@pytest.mark.slow
def test_two_step_smoke_export_and_serving_signature(tmp_path, data_dir, uncased_vocab):
    out, export_base = tmp_path / "out", tmp_path / "models"
    proc = run_recipe(
        "run_ner.py",
        f"--data_dir={data_dir / 'conll2003'}",
        *tiny_run_flags(uncased_vocab, 32, 4, 8),
        "--num_train_epochs=1",
        "--verbose=0",
        *exported_run_flags(out, export_base, "ner_tiny"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((out / "config.json").read_text())["max_train_examples"] == 8
    metrics = json.loads((out / "metrics.json").read_text())
    # 8 training sentences -> 13 windows of <= 30 pieces -> 3 batches of 4 + the last 1 (kept).
    run = metrics["runs"][0]
    assert metrics["train_sentences"] == 8 and run["train_examples"] == 13 and run["steps"] == 4
    assert metrics["family"] == "ner" and metrics["monitor"] == "f1" and metrics["best_run"] == 0
    assert [e["epoch"] for e in run["epochs"]] == [1] and metrics["best"] == run["epochs"][0]
    assert metrics["best"]["f1"] == metrics["dev"]["f1"]  # the kept weights are the best's
    assert metrics["label_names"] == [
        "O",
        "B-LOC",
        "I-LOC",
        "B-MISC",
        "I-MISC",
        "B-ORG",
        "I-ORG",
        "B-PER",
        "I-PER",
    ]
    task = load_task(out)
    assert isinstance(task, TokenClassifier)
    test = conll.read_conll(data_dir / "conll2003" / "test.txt")[:8]
    predicted = task.predict_word_lists([s.words for s in test])
    assert metrics["test"]["f1"] == pytest.approx(
        entity_scores([s.tags for s in test], predicted)["f1"]
    )
    assert "exported to" in proc.stdout
    assert_finished_run_dir(out)
    assert result_line(proc.stdout) == (
        f"dev f1 {metrics['dev']['f1']:.4f}, test f1 {metrics['test']['f1']:.4f}, steps 4 "
        f"(all metrics: {out}/metrics.json)"
    )

    ids = {k: v.numpy() for k, v in task.preprocessor(TEXTS[:1]).items()}
    served = served_in_fresh_process(
        tmp_path,
        "ner",
        export_base / "ner_tiny" / "1",
        {
            "text": ("signature", "serving_default", {"text": np.array(TEXTS, dtype=object)}),
            "ids": ("signature", "encoded", ids),
        },
        recipe_env(),
    )
    assert "keras_bert" not in served["modules"] and "tensorflow_text" not in served["modules"]
    outputs = served["ner"]["calls"]["text"]
    expected = task.predict(TEXTS)
    words = [t.split() for t in TEXTS]
    assert outputs["num_words"].tolist() == [len(w) for w in words] == [9, 0, 20, 4]
    width = max(map(len, words))
    assert outputs["tags"].shape == outputs["words"].shape == (4, width)
    for i, w in enumerate(words):
        assert [x.decode() for x in outputs["words"][i]] == w + [""] * (width - len(w))
        assert [x.decode() for x in outputs["tags"][i]] == expected[i] + [""] * (width - len(w))
    by_ids = served["ner"]["calls"]["ids"]
    np.testing.assert_allclose(
        by_ids["probabilities"], tf.nn.softmax(task(ids)).numpy(), rtol=1e-4, atol=1e-6
    )
    assert by_ids["tags"].shape == ids["input_word_ids"].shape
    signatures = served["ner"]["signatures"]
    assert signatures["serving_default"]["inputs"] == {"text": ("string", (None,))}
    assert set(signatures["encoded"]["outputs"]) == {"probabilities", "tag_ids", "tags"}

    by_grpc, by_rest = serve_and_predict(tmp_path, export_base, "ner_tiny", {"text": TEXTS})
    assert by_grpc["num_words"].tolist() == by_rest["num_words"] == [9, 0, 20, 4]
    padded = [e + [""] * (width - len(e)) for e in expected]
    assert [[x.decode() for x in row] for row in by_grpc["tags"]] == by_rest["tags"] == padded
    assert by_rest["words"][0] == words[0] + [""] * (width - len(words[0]))


def serve_and_predict(tmp_path, base, model_name, inputs: dict) -> tuple[dict, dict]:
    """Starts `python -m serving.server` on `base/model_name`, sends one gRPC Predict and one REST
    predict (columnar "inputs") on serving_default; returns (gRPC outputs, REST outputs)."""
    server = ServerProcess(
        [f"--model_name={model_name}", f"--model_base_path={base / model_name}"],
        tmp_path / "server.log",
    )
    try:
        server.wait_serving()
        request = predict_pb2.PredictRequest()
        request.model_spec.name, request.model_spec.signature_name = model_name, "serving_default"
        for name, value in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(np.array(value, dtype=object)))
        with grpc.insecure_channel(server.grpc_target) as channel:
            response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
                request, timeout=60
            )
        by_grpc = {k: tf.make_ndarray(v) for k, v in response.outputs.items()}
        body = json.dumps({"signature_name": "serving_default", "inputs": inputs}).encode()
        http = urllib.request.Request(
            f"{server.rest_url}/v1/models/{model_name}:predict",
            body,
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(http, timeout=60) as reply:
            by_rest = json.loads(reply.read())["outputs"]
        return by_grpc, by_rest
    finally:
        server.stop()


@pytest.mark.slow
def test_killed_at_the_first_evaluation_and_resumed_ends_like_an_uninterrupted_run(
    tmp_path, data_dir, uncased_vocab
):
    flags = [
        f"--data_dir={data_dir / 'conll2003'}",
        *tiny_run_flags(uncased_vocab, 32, 4, 8),
        "--num_train_epochs=2",
        "--learning_rate=1e-3",
        "--verbose=0",
    ]
    # 13 windows -> 4 batches an epoch; killed as epoch 1's evaluation starts (its checkpoint
    # written), resumed at step 4: the lost evaluation made up, then epoch 2 trained with the
    # dropout masks (bert_tiny's 0.1 and the head's) the uninterrupted run drew.
    metrics = assert_killed_and_resumed_like_uninterrupted(
        tmp_path, "run_ner.py", flags, "evaluation:1", resumed_from_step=4, epochs=[1, 2], steps=8
    )
    assert metrics["best"]["f1"] == metrics["dev"]["f1"]


# Usage errors are checked in process on the argument set and `trainer.prepare` (what the recipe
# turns into "run_ner.py: error: <message>", exit 2: tests/recipes/test_run_classifier.py).
def test_bad_flag_is_a_usage_error(tmp_path):
    from keras_bert.training.families.ner import NerArgs

    with pytest.raises(
        ValueError, match=r"^--max_seq_length must be >= 3 \(\[CLS\], a piece, \[SEP\]\), got 2$"
    ):
        NerArgs(data_dir=str(tmp_path), output_dir=str(tmp_path / "out"), max_seq_length=2)


def test_bad_data_is_a_usage_error_naming_file_and_line(tmp_path, uncased_vocab):
    from keras_bert.training import trainer
    from keras_bert.training.families.ner import FAMILY, NerArgs

    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.txt").write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP X-ORG\n")
    args = NerArgs(
        data_dir=str(tmp_path),
        output_dir=str(tmp_path / "out"),
        preset="bert_tiny",
        vocab_file=str(uncased_vocab),
    )
    with pytest.raises(ValueError, match="train.txt:2: expected 'word ... NER-tag'"):
        trainer.prepare(FAMILY, args)
    assert not (tmp_path / "out").exists()
