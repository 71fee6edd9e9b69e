"""recipes/run_swag.py: two-step smoke run on a small file in the official SWAG CSV layout,
export, and the exported `serving_default` (plain TensorFlow, fresh process) against predict."""

import json

import numpy as np
import pytest

from keras_bert.data import swag
from keras_bert.tasks import MultipleChoice, load_task
from tests.data.test_swag import HEADER, ROWS, write
from tests.recipes.finished_run import served_in_fresh_process, assert_finished_run_dir, result_line
from tests.recipes.kill_resume import assert_killed_and_resumed_like_uninterrupted
from tests.recipes.recipe_process import exported_run_flags, recipe_env, run_recipe, tiny_run_flags
from tests.recipes.test_run_ner import serve_and_predict


@pytest.mark.slow
def test_two_step_smoke_export_and_serving_signature(tmp_path, uncased_vocab):
    data = write(tmp_path / "train.csv", HEADER, ROWS * 2)  # 4 examples
    out, export_base = tmp_path / "out", tmp_path / "models"
    proc = run_recipe(
        "run_swag.py",
        f"--train_file={data}",
        f"--dev_file={data}",
        *tiny_run_flags(uncased_vocab, 24, 2),
        "--num_train_epochs=1",
        "--verbose=0",
        *exported_run_flags(out, export_base, "swag_tiny"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    run = metrics["runs"][0]
    assert run["steps"] == 2 and run["train_examples"] == metrics["train_examples"] == 4
    assert metrics["family"] == "swag" and metrics["monitor"] == "accuracy"
    assert [e["epoch"] for e in run["epochs"]] == [1] and metrics["best"] == run["epochs"][0]
    assert metrics["best"]["accuracy"] == metrics["dev"]["accuracy"]
    assert metrics["best"]["loss"] == metrics["dev"]["loss"]
    assert_finished_run_dir(out)
    assert result_line(proc.stdout) == (
        f"dev accuracy {metrics['dev']['accuracy']:.4f}, steps 2 (all metrics: {out}/metrics.json)"
    )
    task = load_task(out)
    assert isinstance(task, MultipleChoice)
    examples = swag.read_swag(data)
    contexts, endings = [e.context for e in examples], [e.second_segments() for e in examples]
    expected = task.predict((contexts, endings))
    labels = np.array([e.label for e in examples])
    assert metrics["dev"]["accuracy"] == pytest.approx((expected.argmax(-1) == labels).mean())

    ids = {k: v.numpy() for k, v in task.encode_choices(contexts, endings).items()}  # [4, 4, T]
    inputs = {
        "context": np.array(contexts, dtype=object),
        "endings": np.array(endings, dtype=object),
    }
    served = served_in_fresh_process(
        tmp_path,
        "swag",
        export_base / "swag_tiny" / "1",
        {
            "text": ("signature", "serving_default", inputs),
            "bad": (
                "signature",
                "serving_default",
                {"context": inputs["context"][:1], "endings": inputs["endings"]},
            ),
            "ids": ("signature", "encoded", ids),
        },
        recipe_env(),
    )
    assert "keras_bert" not in served["modules"]
    outputs = served["swag"]["calls"]["text"]
    assert outputs["probabilities"].shape == (4, 4)
    np.testing.assert_allclose(outputs["probabilities"], expected, rtol=1e-4, atol=1e-6)
    assert outputs["choice"].tolist() == expected.argmax(-1).tolist()
    np.testing.assert_allclose(
        served["swag"]["calls"]["ids"]["probabilities"], expected, rtol=1e-4, atol=1e-6
    )
    error = served["swag"]["calls"]["bad"]
    assert error[0] == "error" and "endings must be [batch, 4]" in error[2]
    assert served["swag"]["signatures"]["serving_default"]["inputs"] == {
        "context": ("string", (None,)),
        "endings": ("string", (None, 4)),
    }

    by_grpc, by_rest = serve_and_predict(
        tmp_path, export_base, "swag_tiny", {"context": contexts, "endings": endings}
    )
    np.testing.assert_allclose(by_grpc["probabilities"], expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.array(by_rest["probabilities"]), expected, rtol=1e-4, atol=1e-6)
    assert by_rest["choice"] == expected.argmax(-1).tolist()


@pytest.mark.slow
def test_killed_after_the_first_best_is_saved_and_resumed_ends_like_an_uninterrupted_run(
    tmp_path, uncased_vocab
):
    data = write(tmp_path / "train.csv", HEADER, ROWS * 2)  # 4 examples
    flags = [
        f"--train_file={data}",
        f"--dev_file={data}",
        *tiny_run_flags(uncased_vocab, 24, 2),
        "--num_train_epochs=2",
        "--learning_rate=1e-3",
        "--verbose=0",
    ]
    # 2 batches an epoch; killed once epoch 1's best weights are written, before its evaluation
    # is recorded: resumed at step 2, the evaluation made up; dropout on (bert_tiny's 0.1).
    assert_killed_and_resumed_like_uninterrupted(
        tmp_path, "run_swag.py", flags, "best_saved:1", resumed_from_step=2, epochs=[1, 2], steps=4
    )


def test_bad_flag_is_a_usage_error(tmp_path):  # in process: the recipe prints it (exit 2)
    from keras_bert.training.families.swag import SwagArgs

    with pytest.raises(ValueError, match=r"^--learning_rate must be > 0, got 0.0$"):
        SwagArgs(
            train_file=f"{tmp_path}/x.csv",
            dev_file=f"{tmp_path}/x.csv",
            output_dir=str(tmp_path / "out"),
            learning_rate=0.0,
        )
