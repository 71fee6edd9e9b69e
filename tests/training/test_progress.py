"""Progress the way a user reads it: "Epoch 1/3" first, plain lines when not a terminal."""

import io

import keras
import numpy as np
import tensorflow as tf

from keras_bert.training.callbacks import ProgressLogger, ResumableCheckpoint
from keras_bert.training.evaluation_callback import EvaluationCallback
from keras_bert.training.fit import resumable_fit


def _fit(tmp_path, stream, interval_s=0.0, total_steps=None):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((8, 3), np.float32), np.zeros((8, 1), np.float32)

    def make(epoch, skip):
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(2).skip(skip)

    checkpoint = ResumableCheckpoint(tmp_path / "ckpt")
    logger = ProgressLogger(
        3, 4, total_steps or 12, verbose=1, interval_s=interval_s, stream=stream
    )
    resumable_fit(
        model, make, 4, 3, checkpoint, [checkpoint, logger], verbose=0, total_steps=total_steps
    )
    return stream.getvalue()


def test_epochs_count_from_one_and_lines_have_no_carriage_returns(tmp_path):
    out = _fit(tmp_path, io.StringIO())
    assert "\r" not in out and "\x1b" not in out
    lines = out.splitlines()
    assert [line for line in lines if line.startswith("Epoch")] == [
        "Epoch 1/3",
        "Epoch 2/3",
        "Epoch 3/3",
    ]
    assert lines[1].startswith("  batch 1/4 (step 1/12) - ")
    assert "  batch 4/4 (step 12/12) - " in lines[-1] and " - loss: " in lines[-1]


def test_quiet_interval_prints_one_line_per_epoch_and_a_partial_last_epoch(tmp_path):
    out = _fit(tmp_path, io.StringIO(), interval_s=3600.0, total_steps=10)
    lines = out.splitlines()
    assert lines[0] == "Epoch 1/3" and lines[2] == "Epoch 2/3"
    assert lines[4] == "Epoch 3/3 (last 0.5 of an epoch: 2 of 4 batches)"  # num_train_epochs=2.5
    assert lines[5].startswith("  batch 2/2 (step 10/10) - ")
    assert len(lines) == 6


def test_an_evaluation_inside_an_epoch_prints_its_line_when_taken(tmp_path):
    """--evaluations_per_epoch=2: the dev result after batch 2 of 4 is printed at once, even
    when the periodic interval has not passed (it used to be dropped from plain output)."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((8, 3), np.float32), np.zeros((8, 1), np.float32)
    checkpoint = ResumableCheckpoint(tmp_path / "ckpt")
    scores = iter([0.25, 0.5, 0.75, 1.0])
    evaluator = EvaluationCallback(
        lambda m: {"accuracy": next(scores)},
        "accuracy",
        evaluations_per_epoch=2,
        step_fn=lambda: checkpoint.step,
        steps_per_epoch=4,
    )
    stream = io.StringIO()
    logger = ProgressLogger(2, 4, 8, verbose=1, interval_s=3600.0, stream=stream)
    resumable_fit(
        model,
        lambda e, s: tf.data.Dataset.from_tensor_slices((x, y)).batch(2).skip(s),
        4,
        2,
        checkpoint,
        [checkpoint, evaluator, logger],
        verbose=0,
        total_steps=8,
    )
    lines = stream.getvalue().splitlines()
    assert [line.split(" - ")[0] for line in lines] == [
        "Epoch 1/2",
        "  batch 2/4 (step 2/8)",
        "  batch 4/4 (step 4/8)",
        "Epoch 2/2",
        "  batch 2/4 (step 6/8)",
        "  batch 4/4 (step 8/8)",
    ]
    assert [line.rsplit("val_accuracy: ", 1)[1] for line in lines if "batch" in line] == [
        "0.2500",
        "0.5000",
        "0.7500",
        "1.0000",
    ]
