"""A fine-tuning run killed with SIGKILL mid-epoch and restarted with the same flags continues
from its last checkpoint and ends like an uninterrupted run (real subprocesses, the real recipe)."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "run_classifier.py"
STEPS_PER_EPOCH, EPOCHS = 100, 2


def _command(tmp_path, output_dir, data_dir, uncased_vocab):
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({"vocab_size": 30522, "hidden_size": 32, "num_layers": 2, "num_heads": 2,
                                  "intermediate_size": 48, "max_sequence_length": 32,
                                  "dropout_rate": 0.0, "attention_dropout_rate": 0.0}))
    return [sys.executable, str(RECIPE), "--task_name=sst2", f"--data_dir={data_dir / 'glue'}",
            f"--bert_config_file={config}", f"--vocab_file={uncased_vocab}", "--max_seq_length=16",
            "--train_batch_size=4", f"--max_train_examples={4 * STEPS_PER_EPOCH}", "--max_eval_examples=32",
            f"--num_train_epochs={EPOCHS}", "--learning_rate=1e-3", "--classifier_dropout=0",
            "--save_checkpoints_steps=5", "--verbose=0", f"--output_dir={output_dir}"]


def _env():
    return dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")


def _run(cmd):
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout[proc.stdout.index("{"):])


@pytest.mark.slow
def test_sigkill_mid_training_then_restart_matches_uninterrupted(tmp_path, data_dir, uncased_vocab):
    reference = _run(_command(tmp_path, tmp_path / "ref", data_dir, uncased_vocab))["runs"][0]
    assert reference["steps"] == STEPS_PER_EPOCH * EPOCHS and reference["resumed_from_step"] == 0

    out = tmp_path / "killed"
    proc = subprocess.Popen(_command(tmp_path, out, data_dir, uncased_vocab), env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = out / "checkpoints" / "checkpoint.json"
    deadline = time.time() + 300
    killed_at = None
    while time.time() < deadline and proc.poll() is None:
        if state.exists():
            try:
                killed_at = json.loads(state.read_text())["step"]
            except (ValueError, OSError):   # being replaced right now
                killed_at = None
            if killed_at is not None and killed_at >= 20:
                os.kill(proc.pid, signal.SIGKILL)
                break
        time.sleep(0.01)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert 20 <= killed_at < STEPS_PER_EPOCH, killed_at        # killed inside epoch 1

    resumed = _run(_command(tmp_path, out, data_dir, uncased_vocab))["runs"][0]
    assert resumed["resumed_from_step"] >= killed_at
    assert resumed["steps"] == reference["steps"] == STEPS_PER_EPOCH * EPOCHS
    assert json.loads(state.read_text())["step"] == STEPS_PER_EPOCH * EPOCHS
    # Epoch 2 saw identical batches from identical weights (no dropout): same loss and accuracy.
    ref_epoch2, res_epoch2 = reference["epochs"][1], resumed["epochs"][1]
    assert res_epoch2["train_loss"] == pytest.approx(ref_epoch2["train_loss"], rel=1e-3)
    assert res_epoch2["accuracy"] == pytest.approx(ref_epoch2["accuracy"], abs=1 / 32)
