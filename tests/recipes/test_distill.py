"""recipes/distill.py: a tiny teacher distilled into a 1-layer student, exported, then compared
with the teacher by recipes/evaluate.py; bad settings are usage errors."""
import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.training.test_distillation import rule_rows, trained_teacher, write_rows

REPO = pathlib.Path(__file__).resolve().parents[2]


def run_recipe(name, *args, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, str(REPO / "recipes" / name), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_distill_export_and_compare(tmp_path, uncased_vocab):
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    train, dev = rule_rows(rng, 96), rule_rows(rng, 48)
    trained_teacher(uncased_vocab, train, tmp_path / "teacher.keras")
    out, models = tmp_path / "student", tmp_path / "models"
    proc = run_recipe("distill.py", f"--teacher={tmp_path / 'teacher.keras'}",
                      f"--train_file={write_rows(tmp_path / 'train.jsonl', train)}",
                      f"--dev_file={write_rows(tmp_path / 'dev.jsonl', dev)}", "--student_layers=1",
                      "--learning_rate=3e-3", "--num_train_epochs=3", "--train_batch_size=16",
                      "--warmup_proportion=0", f"--output_dir={out}", f"--export_dir={models}",
                      "--model_name=student")
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["student"]["layers"] == 1 and len(metrics["history"]) == 4
    assert json.loads((out / "config.json").read_text())["student_layers"] == 1
    exported = models / "student" / "1"
    config = json.loads((exported / "assets" / "export_config.json").read_text())
    assert config["label_names"] == ["neg", "pos"] and config["bert_config"]["num_layers"] == 1
    proc = run_recipe("evaluate.py", f"--model={tmp_path / 'teacher.keras'}", f"--compare={exported}",
                      f"--data={tmp_path / 'dev.jsonl'}", "--noprogress", "--bootstrap_samples=100",
                      f"--output_dir={tmp_path / 'cmp'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    cmp = json.loads((tmp_path / "cmp" / "metrics.json").read_text())
    assert cmp["headline"]["accuracy"]["a"] == pytest.approx(metrics["teacher"]["dev_accuracy"])
    assert cmp["headline"]["accuracy"]["b"] == pytest.approx(metrics["student"]["dev_accuracy"])
    assert cmp["disagreements"]["count"] == round((1 - metrics["student"]["dev_agreement"]) * 48)


def test_bad_alpha_is_a_usage_error(tmp_path):
    proc = run_recipe("distill.py", f"--teacher={tmp_path}", "--task_name=sst2", "--alpha=2",
                      f"--output_dir={tmp_path / 'out'}")
    assert proc.returncode == 2 and "alpha must be in [0, 1], got 2.0" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()
