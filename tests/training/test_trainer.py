"""The one fine-tuning driver on a tiny fake family (`tiny_family`): restarts keep the best run, a
NaN is never the best, ties go to the lower dev loss, early stopping, the time budget, the weight
average, and SIGKILL at several points ending like an uninterrupted run (dropout on, bit for bit)."""

import itertools
import json
import os
import pathlib
import signal
import subprocess
import sys
import types

import numpy as np
import pytest

import keras_bert
from keras_bert.training import trainer
from keras_bert.training.families import classification
from tests.tiny import tiny_run_args
from tests.training.tiny_family import FAMILY, TinyArgs

REPO = pathlib.Path(__file__).resolve().parents[2]


def _run(tmp_path, **kw):
    args = TinyArgs(output_dir=str(tmp_path / "out"), verbose=0, **kw)
    return trainer.run(FAMILY, args), tmp_path / "out"


def test_compile_task_builds_the_optimizer_the_flags_give():
    task = FAMILY.build_task(None, None, None)
    args = TinyArgs(output_dir="unused", adam_epsilon=1e-8, weight_decay=0.0, max_grad_norm=0.5)
    trainer.compile_task(task, args, num_train_steps=20, learning_rate=3e-4)
    opt = task.optimizer
    assert (opt.epsilon, opt.weight_decay, opt.global_clipnorm) == (1e-8, 0.0, 0.5)
    assert float(opt._learning_rate(2)) == pytest.approx(3e-4)  # int(20 * 0.1) = 2 warmup steps
    defaults = TinyArgs(output_dir="unused")
    assert (defaults.adam_epsilon, defaults.weight_decay, defaults.max_grad_norm) == (
        1e-6,
        0.01,
        1.0,
    )


@pytest.mark.slow
def test_restarts_keep_the_best_finite_run_and_a_nan_run_is_never_best(tmp_path, monkeypatch):
    encoded = []
    train_arrays = FAMILY.train_arrays
    monkeypatch.setattr(FAMILY, "train_arrays", lambda *a: encoded.append(a) or train_arrays(*a))
    summary, out = _run(tmp_path, num_restarts=2, nan_seed=42, num_train_epochs=1)
    assert len(encoded) == 1  # the trainer keeps the training arrays for the second run
    runs = summary["runs"]
    assert [r["seed"] for r in runs] == [42, 43]
    assert (
        runs[0]["all_evaluations_non_finite"] is True
        and runs[1]["all_evaluations_non_finite"] is False
    )
    assert summary["best_run"] == 1 and summary["best"] == runs[1]["best"]
    kept = keras_bert.load_task(out).get_weights()
    for got, want in zip(kept, keras_bert.load_task(out / "run_1").get_weights()):
        np.testing.assert_array_equal(got, want)
    assert json.loads((out / "metrics.json").read_text())["best_run"] == 1


@pytest.mark.slow
def test_ties_keep_the_lowest_dev_loss_and_say_the_metric_saturated(tmp_path):
    summary, _ = _run(tmp_path, num_train_epochs=3, script="1.0,1.0,1.0")
    evaluations = summary["runs"][0]["epochs"]
    lowest = min(evaluations, key=lambda e: e["loss"])
    assert [e["epoch"] for e in evaluations] == [1, 2, 3]
    assert summary["best"]["epoch"] == lowest["epoch"] != 1  # not the least-trained tie
    assert summary["monitor_ties"] == {
        "value": 1.0,
        "evaluations": 3,
        "epochs": [1, 2, 3],
        "kept_epoch": lowest["epoch"],
        "tie_break": "the lowest dev loss, then the later evaluation",
    }


@pytest.mark.slow
def test_early_stopping_after_patience_evaluations_without_improvement(tmp_path):
    summary, _ = _run(
        tmp_path, num_train_epochs=6, early_stopping_patience=2, script="0.5,0.7,0.6,0.6,0.9,0.9"
    )
    run = summary["runs"][0]
    assert [e["epoch"] for e in run["epochs"]] == [1, 2, 3, 4]
    assert summary["best"]["epoch"] == 2 and run["steps"] == 4 * 6  # 48 rows / batch 8


@pytest.mark.slow
def test_time_budget_stops_training_and_still_evaluates_once(tmp_path, monkeypatch):
    ticks = iter(range(10**6))  # a clock that moves 1 s at every reading: no timing in the test
    monkeypatch.setattr(trainer.time, "monotonic", lambda: float(next(ticks)))
    summary, out = _run(tmp_path, num_train_epochs=5, max_train_seconds=2.5)
    run = summary["runs"][0]
    # The clock starts as the first batch ends (tracing excluded): 1 s, then 2 s, then 3 s > 2.5.
    assert run["steps"] == 3 and run["time_limit_reached"] is True
    assert [e["epoch"] for e in run["epochs"]] == [round(3 / 6, 4)]
    assert (out / "best_model.keras").is_file()


def _driver_clock(monkeypatch):
    """The driver's clock (the time limit's) moves 1 s at every reading, no other clock does: the
    limit starts as the first batch ends and reads k s after batch k."""
    ticks = itertools.count()
    clock = types.SimpleNamespace(monotonic=lambda: float(next(ticks)))
    monkeypatch.setattr(trainer, "time", clock)


@pytest.mark.slow
def test_a_time_limit_at_an_evaluation_inside_an_epoch_evaluates_once_and_a_rerun_trains_nothing(
    tmp_path, monkeypatch
):
    _driver_clock(monkeypatch)
    settings = dict(num_train_epochs=2, evaluations_per_epoch=2, script="0.25,0.75")
    summary, out = _run(tmp_path, max_train_seconds=2.5, **settings)
    run = summary["runs"][0]
    # 6 batches an epoch, evaluated after 3 of them; the limit stops training there (3 s > 2.5).
    assert (run["steps"], run["time_limit_reached"]) == (3, True)
    # Once: the epoch's end evaluated nothing more (a second evaluation would have scored 0.75).
    assert [(e["epoch"], e["accuracy"]) for e in run["epochs"]] == [(0.5, 0.25)]
    assert summary["best"]["epoch"] == 0.5 and (out / "best_model.keras").is_file()
    # The run is finished: a rerun, under another limit, reuses it and trains nothing.
    again, _ = _run(tmp_path, max_train_seconds=1000.0, **settings)
    rerun = again["runs"][0]
    assert (rerun["steps"], rerun["time_limit_reached"]) == (3, False)
    assert rerun["epochs"] == run["epochs"] and again["best"] == summary["best"]


@pytest.mark.slow
def test_a_run_the_time_limit_stops_still_keeps_its_best_writes_metrics_and_exports(
    tmp_path, monkeypatch, data_dir, uncased_vocab
):
    _driver_clock(monkeypatch)
    models = tmp_path / "models"
    args = classification.ClassifierArgs(
        task_name="sst2",
        data_dir=str(data_dir / "glue"),
        max_seq_length=16,
        train_batch_size=4,
        **tiny_run_args(
            tmp_path / "out",
            uncased_vocab,
            max_examples=16,
            max_train_seconds=1.5,
            export_dir=str(models),
            model_name="sst2",
        ),
    )
    summary = trainer.run(classification.FAMILY, args)
    run = summary["runs"][0]
    # 16 rows in batches of 4: 4 batches laid out, stopped after the second (2 s > 1.5).
    assert (run["steps"], run["time_limit_reached"]) == (2, True)
    assert [e["epoch"] for e in run["epochs"]] == [0.5]  # evaluated where it stopped
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["best"] == summary["best"] and metrics["runs"][0]["time_limit_reached"]
    kept = keras_bert.load_task(tmp_path / "out")
    for got, want in zip(kept.get_weights(), summary["task"].get_weights()):
        np.testing.assert_array_equal(got, want)
    assert summary["export_path"] == str(models / "sst2" / "1")
    assert (models / "sst2" / "1" / "saved_model.pb").is_file()


@pytest.mark.slow
def test_the_weight_average_is_what_is_evaluated_and_kept(tmp_path):
    summary, _ = _run(tmp_path, num_train_epochs=2, ema_momentum=0.9, script="0.1,0.2")
    task = summary["task"]
    assert summary["best"]["epoch"] == 2  # the last evaluation: no update after it
    optimizer = task.optimizer
    averages = [a.numpy() for a in optimizer._model_variables_moving_average if a is not None]
    trainable = [v.numpy() for v in task.trainable_variables]
    assert len(averages) == len(trainable)
    for kept, average in zip(trainable, averages):
        np.testing.assert_allclose(kept, average, rtol=0, atol=1e-7)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    # A call from Python "gives" the fields that differ from their defaults.
    assert config["ema_momentum"] == 0.9
    assert config["given"] == [
        "ema_momentum",
        "num_train_epochs",
        "output_dir",
        "script",
        "verbose",
    ]


def _command(out):
    return [
        sys.executable,
        "-m",
        "tests.training.tiny_family",
        f"--output_dir={out}",
        "--num_train_epochs=2",
        "--evaluations_per_epoch=2",
        "--save_checkpoints_steps=2",
        "--dropout_rate=0.1",  # encoder and head: the resumed run must draw the killed run's masks
        "--verbose=0",
    ]


def _finished(out):
    metrics = json.loads((out / "metrics.json").read_text())
    for run in metrics["runs"]:  # what a resume cannot repeat: timings, the running train loss
        del run["train_seconds"], run["resumed_from_step"]
        for e in run["epochs"]:
            del e["train_loss"]
    best = dict(metrics["best"])
    best.pop("train_loss")
    metrics["best"] = best
    for run in metrics["runs"]:
        run["best"].pop("train_loss")
    return metrics, keras_bert.load_task(out).get_weights()


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "out"
    done = subprocess.run(
        _command(out), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return _finished(out)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["train_batch:3", "best_saved:2", "checkpoints_finalized"])
def test_sigkill_anywhere_then_rerun_ends_like_an_uninterrupted_run(tmp_path, point, uninterrupted):
    out = tmp_path / "killed"
    killed = subprocess.run(
        _command(out),
        cwd=REPO,
        env=_env() | {"KERAS_BERT_CRASH_AT": point},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    resumed = subprocess.run(
        _command(out), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    want, want_weights = uninterrupted
    got, got_weights = _finished(out)
    assert [e["epoch"] for e in want["runs"][0]["epochs"]] == [0.5, 1, 1.5, 2]
    _assert_same_run(got, got_weights, want, want_weights)


def _assert_same_run(got, got_weights, want, want_weights):
    """Equal metrics.json (less what a resume cannot repeat) and equal kept weights, bit for bit."""
    assert got == want
    assert len(got_weights) == len(want_weights)
    for a, b in zip(got_weights, want_weights):
        np.testing.assert_array_equal(a, b)


@pytest.fixture
def float32_policy_afterwards():
    """Sets Keras's global dtype policy back to float32 after the test (a mixed-precision run
    sets it process-wide)."""
    import keras

    yield
    keras.mixed_precision.set_global_policy("float32")


def _mixed_precision_run(tmp_path, policy):
    """The task of a one-epoch run with `mixed_precision=policy`, checked to have trained its
    encoder in `policy` for 6 finite steps with the logits and loss kept in float32."""
    summary, _ = _run(tmp_path, num_train_epochs=1, mixed_precision=policy)
    task = summary["task"]
    assert task.encoder.dtype_policy.name == policy
    assert task.classifier.dtype_policy.name == "float32"  # logits and loss in float32
    assert np.isfinite(summary["best"]["loss"]) and summary["runs"][0]["steps"] == 6
    return task


@pytest.mark.slow
def test_mixed_bfloat16_trains_in_bfloat16_and_keeps_float32_logits(
    tmp_path, float32_policy_afterwards
):
    _mixed_precision_run(tmp_path, "mixed_bfloat16")


@pytest.mark.slow
def test_mixed_float16_trains_with_dynamic_loss_scaling_and_keeps_float32_logits(
    tmp_path, float32_policy_afterwards
):
    import keras
    import tensorflow as tf

    from keras_bert.training.optimizer import FusedAdamW
    from tests.training.tiny_family import synthetic

    task = _mixed_precision_run(tmp_path, "mixed_float16")
    features, _ = synthetic(4, 2)
    assert task(features, training=False).dtype == "float32"
    # compile_task wrapped the BERT optimizer in Keras's LossScaleOptimizer: 6 finite steps
    # went through, and the scale is a variable that a non-finite gradient halves (the step
    # skipped, the weights kept): dynamic scaling.
    optimizer = task.optimizer
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    assert isinstance(optimizer.inner_optimizer, FusedAdamW)
    assert int(optimizer.iterations.numpy()) == 6
    scale = float(optimizer.dynamic_scale.numpy())
    assert 1.0 <= scale <= optimizer.initial_scale
    weights = [v.numpy() for v in task.trainable_variables]
    infinite = [tf.fill(v.shape, np.inf) for v in task.trainable_variables]
    optimizer.apply(infinite, task.trainable_variables)
    assert float(optimizer.dynamic_scale.numpy()) == scale / 2
    assert int(optimizer.iterations.numpy()) == 6
    for before, v in zip(weights, task.trainable_variables):
        np.testing.assert_array_equal(before, v.numpy())


@pytest.mark.slow
def test_sigterm_saves_the_step_stops_and_a_rerun_ends_like_an_uninterrupted_run(
    tmp_path, uninterrupted
):
    out = tmp_path / "preempted"
    stopped = subprocess.run(
        _command(out),
        cwd=REPO,
        env=_env() | {"KERAS_BERT_CRASH_AT": "train_batch:3:SIGTERM"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert stopped.returncode == 143, stopped.stderr[-3000:]  # 128 + SIGTERM, no traceback
    assert "Traceback" not in stopped.stderr
    assert (
        f"preempted (SIGTERM) after step 3: checkpoint saved in {out / 'checkpoints'}; "
        "rerun the same command to resume" in stopped.stderr
    )
    state = json.loads((out / "checkpoints" / "checkpoint.json").read_text())
    assert (state["step"], state["weights"]) == (3, "ckpt-3.weights.h5")
    # One mask per dropout layer and batch, 3 batches: the embeddings', the block's three
    # (attention probabilities, attention output, feed-forward output) and the head's.
    assert [draws for _, draws in state["random"]["seed_generators"]] == [3, 3, 3, 3, 3]
    # 6 batches an epoch: the evaluation due at step 3 (epoch 0.5) was not taken before stopping;
    # the rerun takes it first.
    assert not (out / "metrics_state.json").exists()
    resumed = subprocess.run(
        _command(out), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    want, want_weights = uninterrupted
    _assert_same_run(*_finished(out), want, want_weights)
