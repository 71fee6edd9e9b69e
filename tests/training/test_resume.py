"""A fine-tuning run killed with SIGKILL mid-epoch and restarted with the same flags continues
from its last checkpoint and ends like an uninterrupted run (real subprocesses, the real recipe)."""

import concurrent.futures
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from tests.recipes.recipe_process import recipe_env, run_recipe

REPO = pathlib.Path(__file__).resolve().parents[2]
RECIPE = "run_classifier.py"  # run from the repository root, as a user does
STEPS_PER_EPOCH, EPOCHS = 100, 2


# A run: the encoder's sizes (vocab 30522, 2 heads, 32 positions, dropout 0.1 in the encoder and
# before the head), then the flags that set its length and schedule.
MID_EPOCH_RUN = (
    {"hidden_size": 32, "num_layers": 2, "intermediate_size": 48},
    [
        "--train_batch_size=4",
        f"--max_train_examples={4 * STEPS_PER_EPOCH}",
        "--max_eval_examples=32",
        f"--num_train_epochs={EPOCHS}",
        "--learning_rate=1e-3",
        "--save_checkpoints_steps=5",
    ],
)


def _sst2_flags(run, tmp_path, output_dir, data_dir, uncased_vocab) -> list[str]:
    """The recipe's flags for `run`, a short SST-2 fine-tuning from scratch into `output_dir`."""
    sizes, flags = run
    config = tmp_path / f"{output_dir.name}_bert_config.json"  # one per run: runs go in parallel
    config.write_text(
        json.dumps(
            {
                "vocab_size": 30522,
                "num_heads": 2,
                "max_sequence_length": 32,
                **sizes,
            }
        )
    )
    return [
        "--task_name=sst2",
        f"--data_dir={data_dir.resolve() / 'glue'}",
        f"--bert_config_file={config}",
        f"--vocab_file={uncased_vocab.resolve()}",
        "--max_seq_length=16",
        "--verbose=0",
        f"--output_dir={output_dir}",
        *flags,
    ]


def _recipe(flags, crash_at=None, timeout=600):
    """The classifier recipe run from the repository root, as a user runs it."""
    return run_recipe(
        RECIPE, *flags, crash_at=crash_at, tf_log_level="2", timeout=timeout, cwd=REPO
    )


def _run_mid_epoch(tmp_path, output_dir, data_dir, uncased_vocab):
    """MID_EPOCH_RUN into `output_dir` to its end; its metrics.json's run."""
    proc = _recipe(
        _sst2_flags(MID_EPOCH_RUN, tmp_path, output_dir, data_dir, uncased_vocab), timeout=400
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((output_dir / "metrics.json").read_text())["runs"][0]


@pytest.mark.slow
def test_sigkill_mid_training_then_restart_matches_uninterrupted(tmp_path, data_dir, uncased_vocab):
    reference = _run_mid_epoch(tmp_path, tmp_path / "ref", data_dir, uncased_vocab)
    assert reference["steps"] == STEPS_PER_EPOCH * EPOCHS and reference["resumed_from_step"] == 0

    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "recipes" / RECIPE),
            *_sst2_flags(MID_EPOCH_RUN, tmp_path, out, data_dir, uncased_vocab),
        ],
        env=recipe_env("2"),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    state = out / "checkpoints" / "checkpoint.json"
    deadline = time.time() + 300
    killed_at = None
    while time.time() < deadline and proc.poll() is None:
        if state.exists():
            try:
                killed_at = json.loads(state.read_text())["step"]
            except (ValueError, OSError):  # being replaced right now
                killed_at = None
            if killed_at is not None and killed_at >= 20:
                os.kill(proc.pid, signal.SIGKILL)
                break
        time.sleep(0.01)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert 20 <= killed_at < STEPS_PER_EPOCH, killed_at  # killed inside epoch 1

    resumed = _run_mid_epoch(tmp_path, out, data_dir, uncased_vocab)
    assert resumed["resumed_from_step"] >= killed_at
    assert resumed["steps"] == reference["steps"] == STEPS_PER_EPOCH * EPOCHS
    assert json.loads(state.read_text())["step"] == STEPS_PER_EPOCH * EPOCHS
    # The resumed batches drew the killed run's dropout masks: the same dev metrics after epoch 1
    # (its running training loss covers only the batches after the restart), and epoch 2, whole
    # in both runs, the same in every figure.
    ref_epoch1, res_epoch1 = reference["epochs"][0], resumed["epochs"][0]
    del ref_epoch1["train_loss"], res_epoch1["train_loss"]
    assert res_epoch1 == ref_epoch1
    assert resumed["epochs"][1] == reference["epochs"][1]


# ---- killed at any moment: the same evaluations, best and kept weights as an uninterrupted run ----

CRASH_POINTS = [
    "export_publish",
    "train_batch:13",
    "evaluation:4",
    "best_saved:1",
    "checkpoints_finalized",
    "metrics_write",
]


ANY_POINT_RUN = (
    {"hidden_size": 16, "num_layers": 1, "intermediate_size": 24},
    [
        "--train_batch_size=8",
        "--max_train_examples=76",
        "--max_eval_examples=48",
        "--num_train_epochs=2",
        "--learning_rate=3e-3",
        "--evaluations_per_epoch=2",
        "--save_checkpoints_steps=1",
        "--ema_momentum=0.9",  # the weight average is optimizer state: resumed, evaluated, kept
        "--model_name=sst2",
    ],
)


def _tiny_flags(tmp_path, output_dir, data_dir, uncased_vocab):
    flags = _sst2_flags(ANY_POINT_RUN, tmp_path, output_dir, data_dir, uncased_vocab)
    return [*flags, f"--export_dir={output_dir}_models"]


def _finished(output_dir):
    import numpy as np

    import keras_bert

    metrics = json.loads((output_dir / "metrics.json").read_text())
    run = metrics["runs"][0]
    evaluations = [(e["epoch"], e["accuracy"]) for e in run["epochs"]]
    weights = keras_bert.load_task(output_dir).get_weights()
    versions = sorted(p.name for p in pathlib.Path(f"{output_dir}_models/sst2").iterdir())
    exported = json.loads(
        pathlib.Path(f"{output_dir}_models/sst2/1/assets/export_config.json").read_text()
    )["weights_sha256"]
    return evaluations, run["best"]["epoch"], weights, versions, exported, np


@pytest.mark.slow
def test_killed_at_any_point_and_resumed_ends_like_an_uninterrupted_run(
    tmp_path, data_dir, uncased_vocab
):
    ref_dir = tmp_path / "ref"
    proc = _recipe(_tiny_flags(tmp_path, ref_dir, data_dir, uncased_vocab), timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref_evals, ref_best, ref_weights, ref_versions, ref_sha, np = _finished(ref_dir)
    # 76 rows / batch 8 = 10 batches per epoch (the last holds 4): evaluations at 0.5, 1, 1.5, 2.
    assert [e for e, _ in ref_evals] == [0.5, 1, 1.5, 2] and ref_versions == ["1"]

    def killed_then_resumed(point):
        out = tmp_path / point.replace(":", "_")
        flags = _tiny_flags(tmp_path, out, data_dir, uncased_vocab)
        killed = _recipe(flags, crash_at=point)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr[-2000:])
        resumed = _recipe(flags)
        assert resumed.returncode == 0, (point, resumed.stderr[-3000:])
        assert "already exported" not in resumed.stdout or point != "export_publish"
        return out

    # Two crash points at a time (each its own output dir; a process's results do not depend on
    # what else runs), so the six kill-and-resume pairs take about half the wall time.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        outs = dict(zip(CRASH_POINTS, pool.map(killed_then_resumed, CRASH_POINTS)))
    for point, out in outs.items():
        evals, best, weights, versions, sha, _ = _finished(out)
        assert evals == ref_evals, point
        assert best == ref_best, point
        for got, want in zip(weights, ref_weights):
            np.testing.assert_array_equal(got, want, err_msg=point)
        assert versions == ["1"], point  # the export is done once, never twice
        assert sha == exported_sha(weights), point


def exported_sha(weights):
    import hashlib

    import numpy as np

    digest = hashlib.sha256()
    for weight in weights:
        digest.update(str(weight.dtype).encode() + str(weight.shape).encode())
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()
