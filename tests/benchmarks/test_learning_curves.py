"""tools/learning_curves.py: per-step losses back from Keras's running means, the peer's
progress lines, and the table."""

import keras
import numpy as np
import pytest

from tools import learning_curves


def test_step_losses_come_back_from_running_means():
    losses = [2.0, 1.0, 3.0, 0.5]
    means = {s: float(np.mean(losses[:s])) for s in range(1, 5)}
    got = learning_curves.step_losses_from_running_means(means)
    assert got == pytest.approx({1: 2.0, 2: 1.0, 3: 3.0, 4: 0.5})
    # a step whose predecessor was not logged cannot be recovered
    assert learning_curves.step_losses_from_running_means({1: 2.0, 3: 2.0}) == {1: 2.0}


def test_peer_lines_are_read_and_other_lines_ignored():
    log = "\n".join(
        [
            "train: 5696 questions -> 5915 windows",
            "step 1/185 loss 5.9871 lr 5.26e-06 1.30 windows/s 49s",
            "{'loss': '5.9', 'epoch': 0.1}",
            "step 2/185 loss 5.9971 lr 1.05e-05 1.39 windows/s 69s",
        ]
    )
    assert learning_curves.peer(log) == {1: 5.9871, 2: 5.9971}


def test_the_table_averages_each_block_per_run():
    runs = {"ours": {1: 1.0, 2: 3.0, 3: 5.0}, "peer": {1: 2.0, 3: 4.0}}
    assert learning_curves.table(runs, block=2).splitlines()[2:] == [
        "| 1-2 | 2.000 | 2.000 |",
        "| 3-3 | 5.000 | 4.000 |",
    ]


def test_ours_reads_a_keras_tensorboard_log_at_every_step(tmp_path):
    """A real Keras fit with TensorBoard(update_freq=1), the callback `--log_steps=1` gives:
    the per-step losses recovered equal the losses of a second, identical model stepped by hand."""
    x = np.arange(24, dtype="float32").reshape(8, 3) / 10
    y = x.sum(1, keepdims=True)

    def model():
        keras.utils.set_random_seed(1)
        m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        m.compile(keras.optimizers.SGD(0.05), "mse")
        return m

    fitted = model()
    fitted.fit(
        x,
        y,
        batch_size=2,
        epochs=1,
        shuffle=False,
        verbose=0,
        callbacks=[keras.callbacks.TensorBoard(str(tmp_path / "logs"), update_freq=1)],
    )
    by_hand = model()
    want = {
        step: float(by_hand.train_on_batch(x[2 * step - 2 : 2 * step], y[2 * step - 2 : 2 * step]))
        for step in range(1, 5)
    }
    assert learning_curves.ours(str(tmp_path)) == pytest.approx(want, rel=1e-5)


def test_an_output_dir_without_per_batch_losses_reads_as_none(tmp_path):
    assert learning_curves.ours(str(tmp_path)) == {}  # no logs/ at all: empty, so main says why


def test_a_peer_line_is_split_at_newlines_only():
    """A progress line holding U+2028 (which str.splitlines() splits at) stays one line: the
    text after it is no step of its own."""
    log = "step 1/2 loss 1.5 note \u2028step 7/9 loss 9.0\r\nstep 2/2 loss 0.5\n"
    assert learning_curves.peer(log) == {1: 1.5, 2: 0.5}
