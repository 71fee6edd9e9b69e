"""Gradient accumulation counts optimizer updates everywhere: k accumulated batches of b rows
train as one batch of k·b rows over a whole run (weights, dev losses, the learning rate and the
loss of every step), the schedule is read per update, and every counter of the training loop
(checkpoints, evaluations inside an epoch, the time budget, TensorBoard, progress, the run's
record, resume) is in steps or in batches as its name says.

Accelerate #1170 and the report behind it: a schedule sized in updates but read per batch warmed
up and decayed k times too fast, and the last (k - 1) / k of a run trained at learning rate 0.
"""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

import keras_bert
from keras_bert.training import WarmupLinearDecay, create_optimizer, trainer
from keras_bert.training.callbacks import ProgressLogger
from tests.training.test_trainer import REPO, _env, _finished, _assert_same_run
from tests.training.tiny_family import FAMILY, TinyArgs


def _moves(k: int, updates: int, warmup: int, peak: float = 1e-3) -> list[float]:
    """How far one weight moves at each update of AdamW (no decay, no clipping) under a constant
    gradient of 1, fed one batch at a time with `k` batches per update."""
    weight = keras.Variable(np.zeros(1, "float32"))
    optimizer = create_optimizer(
        peak, updates, warmup, weight_decay=0.0, global_clipnorm=None, gradient_accumulation_steps=k
    )
    moves, before = [], 0.0
    for batch in range(updates * k):
        optimizer.apply_gradients([(np.ones(1, "float32"), weight)])
        if (batch + 1) % k == 0:
            moves.append(before - float(weight.numpy()[0]))
            before = float(weight.numpy()[0])
    assert int(optimizer.iterations) == updates
    return moves


def test_each_update_runs_at_the_schedule_value_of_that_update():
    # The report's case: 4 updates, no warmup, 2 batches each. Adam's step under a constant
    # gradient is the learning rate itself (up to epsilon): 1e-3, 7.5e-4, 5e-4, 2.5e-4, where
    # the schedule read per batch gave 7.5e-4, 2.5e-4, 0, 0.
    np.testing.assert_allclose(_moves(2, 4, 0), [1e-3, 7.5e-4, 5e-4, 2.5e-4], rtol=1e-4)
    schedule = WarmupLinearDecay(1e-3, 6, 2)
    want = [float(schedule(u)) for u in range(6)]  # 0, 5e-4, 1e-3, 7.5e-4, 5e-4, 2.5e-4
    for k in (1, 2, 3):
        np.testing.assert_allclose(_moves(k, 6, 2), want, rtol=1e-4, atol=1e-9)


def test_an_accumulated_update_equals_one_update_of_the_summed_batches():
    """AdamW with clipping, weight decay and the weight average, on a sparse gradient with a
    repeated row (the word embeddings'): two half-batches accumulated give the weights and the
    average that the whole batch gives in one update, update after update."""
    parts = [
        tf.IndexedSlices(tf.constant([[3.0, 0.0], [3.0, 1.0]]), tf.constant([0, 0]), [3, 2]),
        tf.IndexedSlices(tf.constant([[0.0, 2.0], [1.0, 1.0]]), tf.constant([2, 0]), [3, 2]),
    ]
    whole = tf.IndexedSlices(  # the mean gradient of the two halves, its rows unsummed
        tf.concat([p.values for p in parts], 0) / 2, tf.constant([0, 0, 2, 0]), [3, 2]
    )

    def train(k, gradients_of_update):
        weight = keras.Variable(np.full((3, 2), 0.5, "float32"), name="kernel")
        optimizer = create_optimizer(
            0.1, 5, 1, ema_momentum=0.9, global_clipnorm=1.0, gradient_accumulation_steps=k
        )
        for _ in range(5):
            for gradient in gradients_of_update:
                optimizer.apply_gradients([(gradient, weight)])
        average = optimizer._model_variables_moving_average[0]
        return weight.numpy(), average.numpy()

    accumulated, at_once = train(2, parts), train(1, [whole])
    for got, want in zip(accumulated, at_once):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert not np.allclose(at_once[0], 0.5)  # it trained


def _run(out, batch, k, **kw):
    args = TinyArgs(
        output_dir=str(out),
        verbose=0,
        train_batch_size=batch,
        gradient_accumulation_steps=k,
        group_by_length=False,  # the same row order at any batch size
        warmup_proportion=0.25,
        ema_momentum=0.9,
        layerwise_lr_decay=0.8,
        log_steps=1,
        **{"num_train_epochs": 4, **kw},
    )
    return trainer.run(FAMILY, args)


def _points(out, tag):
    events = event_accumulator.EventAccumulator(
        str(out / "logs" / "train"), size_guidance={"tensors": 0}
    )
    events.Reload()
    return [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in events.Tensors(tag)]


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 3])
def test_k_accumulated_batches_train_as_one_batch_k_times_larger(tmp_path, k):
    """48 rows, 4 epochs, warmup, clipping, weight decay, layer-wise decay and the weight
    average, mean-reduced loss, no dropout: batches of 8 with k per update against batches of
    8k, over the whole run."""
    accumulated = _run(tmp_path / "accumulated", 8, k)
    at_once = _run(tmp_path / "at_once", 8 * k, 1)
    updates = 4 * 48 // (8 * k)
    for summary, batches in ((accumulated, 4 * 48 // 8), (at_once, updates)):
        run = summary["runs"][0]
        assert (run["steps"], run["batches"], run["num_train_steps"]) == (
            updates,
            batches,
            updates,
        )
    for got, want in zip(accumulated["task"].get_weights(), at_once["task"].get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    dev_losses = [[e["loss"] for e in s["runs"][0]["epochs"]] for s in (accumulated, at_once)]
    np.testing.assert_allclose(dev_losses[0], dev_losses[1], rtol=1e-6)
    assert len(set(dev_losses[0])) == 4  # every epoch trained (the fault: epochs 2-4 alike)
    # TensorBoard: one point per update, at the run's step across the four fit calls; the rate
    # each update ran at is the schedule's value there, and its loss is the big batch's.
    schedule = WarmupLinearDecay(1e-2, updates, int(updates * 0.25))
    rates = _points(tmp_path / "accumulated", "learning_rate")
    assert [s for s, _ in rates] == list(range(1, updates + 1))
    np.testing.assert_allclose(
        [r for _, r in rates], [float(schedule(u)) for u in range(updates)], rtol=1e-6
    )
    assert rates == _points(tmp_path / "at_once", "learning_rate")
    losses = [_points(tmp_path / name, "step_loss") for name in ("accumulated", "at_once")]
    assert [s for s, _ in losses[0]] == [s for s, _ in losses[1]] == list(range(1, updates + 1))
    np.testing.assert_allclose([v for _, v in losses[0]], [v for _, v in losses[1]], rtol=1e-5)


@pytest.mark.slow
def test_evaluations_inside_an_epoch_wait_for_the_update_and_each_sees_new_weights(tmp_path):
    """40 rows at batch 8: 5 batches an epoch, 2 per update, so updates straddle the epochs.
    The point inside epoch 1 (after 2 of its batches: global batch 7) is taken after batch 8,
    where an update ends; every evaluation sees weights the one before did not."""
    summary = _run(tmp_path / "out", 8, 2, rows=40, num_train_epochs=2, evaluations_per_epoch=2)
    run = summary["runs"][0]
    assert [e["epoch"] for e in run["epochs"]] == [0.4, 1, 1.6, 2]
    assert (run["steps"], run["batches"]) == (5, 10)
    assert len({e["loss"] for e in run["epochs"]}) == 4


@pytest.mark.slow
def test_the_time_budget_stops_at_the_end_of_an_update(tmp_path, monkeypatch):
    clock = iter(range(0, 10_000, 100))  # every reading 100 s later: over budget at once
    monkeypatch.setattr(trainer.time, "monotonic", lambda: next(clock))
    summary = _run(tmp_path / "out", 8, 3, max_train_seconds=1.0)
    run = summary["runs"][0]
    assert (run["steps"], run["batches"], run["time_limit_reached"]) == (1, 3, True)


def test_progress_lines_count_steps_in_updates():
    logger = ProgressLogger(2, 5, 10, verbose=1, stream=sys.stdout, accumulation=2)
    logger.epoch, logger.step = 1, 8
    assert logger._line({"loss": 0.5}).split(" - ")[0] == "  batch 3/5 (step 4/5)"


def _command(out):
    return [
        sys.executable,
        "-m",
        "tests.training.tiny_family",
        f"--output_dir={out}",
        "--rows=40",  # 5 batches of 8 an epoch: the epoch-end checkpoint falls inside an update
        "--num_train_epochs=2",
        "--gradient_accumulation_steps=2",
        "--save_checkpoints_steps=100",
        "--dropout_rate=0.1",
        "--ema_momentum=0.9",
        "--verbose=0",
    ]


@pytest.mark.slow
def test_a_run_killed_inside_an_update_resumes_like_an_uninterrupted_one(tmp_path):
    """Killed after batch 6, the run resumes from the checkpoint of epoch 1's end, batch 5: half
    of update 3 accumulated. Its accumulator is in the checkpoint, so the resumed run ends with
    the uninterrupted run's metrics and weights, bit for bit."""

    def run(out, **env):
        done = subprocess.run(
            _command(out), cwd=REPO, env=_env() | env, capture_output=True, text=True, timeout=300
        )
        return done

    reference = run(tmp_path / "reference")
    assert reference.returncode == 0, reference.stderr[-3000:]
    killed = run(tmp_path / "killed", KERAS_BERT_CRASH_AT="train_batch:6")
    assert killed.returncode == -9, killed.stderr[-3000:]
    state = json.loads((tmp_path / "killed" / "checkpoints" / "checkpoint.json").read_text())
    assert state["step"] == 5  # batches: the data position
    resumed = run(tmp_path / "killed")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    record = json.loads((tmp_path / "killed" / "metrics.json").read_text())["runs"][0]
    assert (record["resumed_from_step"], record["steps"], record["batches"]) == (2, 5, 10)
    want, want_weights = _finished(tmp_path / "reference")
    got, got_weights = _finished(tmp_path / "killed")
    _assert_same_run(got, got_weights, want, want_weights)
    assert keras_bert.load_task(tmp_path / "killed") is not None
