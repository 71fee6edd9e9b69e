"""recipes/distill.py: a tiny teacher distilled into a 1-layer student, exported, then compared
with the teacher by recipes/evaluate.py; bad settings are usage errors."""

import json

import keras
import numpy as np
import pytest

from tests.recipes.finished_run import assert_finished_run_dir, result_line
from tests.recipes.kill_resume import assert_killed_and_resumed_like_uninterrupted
from tests.recipes.recipe_process import exported_run_flags, run_recipe
from tests.training.test_distillation import rule_rows, trained_teacher, write_rows


@pytest.fixture(scope="module")
def teacher_and_data(uncased_vocab, tmp_path_factory):
    """A 4-layer teacher fitted to 96 rule rows; train.jsonl (those rows) and dev.jsonl (48)."""
    base = tmp_path_factory.mktemp("distill")
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    train, dev = rule_rows(rng, 96), rule_rows(rng, 48)
    trained_teacher(uncased_vocab, train, base / "teacher.keras")
    write_rows(base / "train.jsonl", train)
    write_rows(base / "dev.jsonl", dev)
    return base


def data_flags(base):
    return [
        f"--teacher={base / 'teacher.keras'}",
        f"--train_file={base / 'train.jsonl'}",
        f"--dev_file={base / 'dev.jsonl'}",
        "--student_layers=1",
        "--learning_rate=3e-3",
        "--train_batch_size=16",
        "--warmup_proportion=0",
    ]


@pytest.mark.slow
def test_distill_export_and_compare(tmp_path, teacher_and_data):
    base = teacher_and_data
    out, models = tmp_path / "student", tmp_path / "models"
    proc = run_recipe(
        "distill.py",
        *data_flags(base),
        "--num_train_epochs=3",
        *exported_run_flags(out, models, "student"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    run = metrics["runs"][0]  # 96 rows / 16 = 6 steps an epoch; an evaluation after each epoch
    assert metrics["student"]["layers"] == 1 and metrics["teacher"]["layers"] == 4
    assert metrics["family"] == "distillation" and metrics["monitor"] == "dev_accuracy"
    assert [e["epoch"] for e in run["epochs"]] == [1, 2, 3] and run["steps"] == 18
    assert metrics["train_examples"] == run["train_examples"] == 96
    assert metrics["dev_examples"] == 48 and metrics["best"] in run["epochs"]
    assert_finished_run_dir(out)
    best = metrics["best"]
    assert result_line(proc.stdout) == (
        f"student dev accuracy {best['dev_accuracy']:.4f}, teacher "
        f"{metrics['teacher']['dev_accuracy']:.4f}, agreement {best['dev_agreement']:.4f}, after "
        f"{best['epoch']:g} epoch{'' if best['epoch'] == 1 else 's'} (all metrics: "
        f"{out}/metrics.json)"
    )
    assert json.loads((out / "config.json").read_text())["student_layers"] == 1
    exported = models / "student" / "1"
    config = json.loads((exported / "assets" / "export_config.json").read_text())
    assert config["label_names"] == ["neg", "pos"] and config["bert_config"]["num_layers"] == 1
    proc = run_recipe(
        "evaluate.py",
        f"--model={base / 'teacher.keras'}",
        f"--compare={exported}",
        f"--data={base / 'dev.jsonl'}",
        "--noprogress",
        "--bootstrap_samples=100",
        f"--output_dir={tmp_path / 'cmp'}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cmp = json.loads((tmp_path / "cmp" / "metrics.json").read_text())
    assert cmp["headline"]["accuracy"]["a"] == pytest.approx(metrics["teacher"]["dev_accuracy"])
    assert cmp["headline"]["accuracy"]["b"] == pytest.approx(best["dev_accuracy"])
    assert cmp["disagreements"]["count"] == round((1 - best["dev_agreement"]) * 48)


@pytest.mark.slow
def test_killed_mid_epoch_with_dropout_and_resumed_ends_like_an_uninterrupted_run(
    tmp_path, teacher_and_data
):
    flags = [*data_flags(teacher_and_data), "--num_train_epochs=2", "--verbose=0"]
    # 6 batches an epoch, a checkpoint at each epoch end: killed after batch 3 of epoch 2,
    # resumed at step 6. The student keeps the teacher's encoder dropout (0.1): the resumed
    # batches draw the masks the uninterrupted run drew (`random_state`).
    assert_killed_and_resumed_like_uninterrupted(
        tmp_path, "distill.py", flags, "train_batch:9", resumed_from_step=6, epochs=[1, 2], steps=12
    )


def test_bad_alpha_is_a_usage_error(tmp_path):  # in process: the recipe prints it (exit 2)
    from keras_bert.training.families.distillation import DistillArgs

    with pytest.raises(ValueError, match=r"^--alpha must be in \[0, 1\], got 2.0$"):
        DistillArgs(
            teacher=str(tmp_path), task_name="sst2", alpha=2.0, output_dir=str(tmp_path / "out")
        )
