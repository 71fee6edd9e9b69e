"""Progress the way a user reads it: "Epoch 1/3" first, plain lines when not a terminal."""
import io

import keras
import numpy as np
import tensorflow as tf

from keras_bert.training.callbacks import ProgressLogger, ResumableCheckpoint
from keras_bert.training.fit import resumable_fit


def _fit(tmp_path, stream, interval_s=0.0, total_steps=None):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((8, 3), np.float32), np.zeros((8, 1), np.float32)

    def make(epoch, skip):
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(2).skip(skip)

    checkpoint = ResumableCheckpoint(tmp_path / "ckpt")
    logger = ProgressLogger(3, 4, total_steps or 12, verbose=1, interval_s=interval_s, stream=stream)
    resumable_fit(model, make, 4, 3, checkpoint, [checkpoint, logger], verbose=0,
                  total_steps=total_steps)
    return stream.getvalue()


def test_epochs_count_from_one_and_lines_have_no_carriage_returns(tmp_path):
    out = _fit(tmp_path, io.StringIO())
    assert "\r" not in out and "\x1b" not in out
    lines = out.splitlines()
    assert [line for line in lines if line.startswith("Epoch")] == ["Epoch 1/3", "Epoch 2/3", "Epoch 3/3"]
    assert lines[1].startswith("  batch 1/4 (step 1/12) - ")
    assert "  batch 4/4 (step 12/12) - " in lines[-1] and " - loss: " in lines[-1]


def test_quiet_interval_prints_one_line_per_epoch_and_a_partial_last_epoch(tmp_path):
    out = _fit(tmp_path, io.StringIO(), interval_s=3600.0, total_steps=10)
    lines = out.splitlines()
    assert lines[0] == "Epoch 1/3" and lines[2] == "Epoch 2/3" and lines[4] == "Epoch 3/3"
    assert lines[5].startswith("  batch 2/2 (step 10/10) - ")
    assert len(lines) == 6
