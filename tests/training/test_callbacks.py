"""ResumableCheckpoint / EvaluationCallback / resumable_fit on a tiny dense model (fast)."""

import io
import json
import warnings
import zipfile

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.training.callbacks import ResumableCheckpoint, standard_callbacks
from keras_bert.training.evaluation_callback import EvaluationCallback
from keras_bert.training.fit import keep_best_model, resumable_fit


def _model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.1), "mse")
    return model


def _data(epoch, skip):
    x = np.arange(24, dtype="float32").reshape(8, 3) / 10
    return tf.data.Dataset.from_tensor_slices((x, x.sum(1))).batch(2).skip(skip)


def test_checkpoints_every_n_steps_keep_last_and_restore(tmp_path):
    model = _model()
    checkpoint = ResumableCheckpoint(tmp_path, save_freq=3, keep=2)
    assert (
        resumable_fit(model, _data, steps_per_epoch=4, epochs=2, checkpoint=checkpoint, verbose=0)
        == 8
    )
    # saved at steps 3, 4 (epoch end), 6, 8 (epoch end and step); the last two kept
    assert sorted(p.name for p in tmp_path.glob("ckpt-*")) == [
        "ckpt-6.weights.h5",
        "ckpt-8.weights.h5",
    ]
    state = json.loads((tmp_path / "checkpoint.json").read_text())
    assert sorted(state) == ["random", "step", "weights"]  # random_state.capture's record
    assert (state["step"], state["weights"]) == (8, "ckpt-8.weights.h5")
    assert state["random"]["seed_generators"] == []  # a model that draws nothing
    fresh = _model()
    again = ResumableCheckpoint(tmp_path, save_freq=3)
    assert resumable_fit(fresh, _data, 4, 2, again, verbose=0) == 8 and again.restored_step == 8
    for a, b in zip(fresh.weights, model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(fresh.optimizer.iterations) == 8  # optimizer state restored too


def test_keep_best_model_keeps_one_copy_and_a_rerun_trains_nothing(tmp_path):
    model = _model()
    checkpoint = ResumableCheckpoint(tmp_path / "checkpoints", save_freq=1)
    evaluator = EvaluationCallback(
        lambda m: {"accuracy": 1 - float(m.weights[1].numpy()[0]) ** 2},
        "accuracy",
        tmp_path / "best.weights.h5",
        tmp_path / "state.json",
    )
    resumable_fit(model, _data, 4, 3, checkpoint, [evaluator], verbose=0)
    kept = _model()
    kept.load_weights(tmp_path / "best.weights.h5")
    keep_best_model(model, checkpoint, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "best_model.keras",
        "checkpoints",
        "state.json",
    ]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["checkpoint.json"]
    assert json.loads((tmp_path / "checkpoints" / "checkpoint.json").read_text()) == {
        "step": 12,
        "weights": None,
        "complete": True,
    }
    for a, b in zip(model.weights, kept.weights):  # the best evaluation's weights, not the last
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # The kept file holds the model's weights and not the optimizer's state (nothing reads it
    # back); the model keeps its optimizer.
    with zipfile.ZipFile(tmp_path / "best_model.keras") as archive:
        with h5py.File(io.BytesIO(archive.read("model.weights.h5")), "r") as weights:
            assert sorted(weights) == ["layers", "vars"]
    assert model.optimizer is not None and model.optimizer.variables

    batches = []
    rerun, again = _model(), ResumableCheckpoint(tmp_path / "checkpoints", save_freq=1)
    assert (
        resumable_fit(
            rerun, lambda e, s: batches.append((e, s)) or _data(e, s), 4, 3, again, verbose=0
        )
        == 12
    )
    assert batches == [] and again.complete and again.restored_step == 12
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. Keras's "Skipping variable loading for optimizer"
        keep_best_model(rerun, again, tmp_path)  # weights back from best_model.keras
    for a, b in zip(rerun.weights, kept.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_resume_mid_epoch_skips_trained_batches(tmp_path):
    seen = []

    def data(epoch, skip):
        seen.append((epoch, skip))
        return _data(epoch, skip)

    first = ResumableCheckpoint(tmp_path, save_freq=1)
    resumable_fit(_model(), data, 4, 1, first, verbose=0)
    (tmp_path / "checkpoint.json").write_text(
        json.dumps({"step": 6, "weights": "ckpt-4.weights.h5"})
    )
    # pretend a run of 3 epochs died at step 6 (epoch 1, batch 2); only 6 batches remain
    (tmp_path / "ckpt-4.weights.h5").exists() or first.model.save_weights(
        tmp_path / "ckpt-4.weights.h5"
    )
    seen.clear()
    resumed = ResumableCheckpoint(tmp_path, save_freq=100)
    assert resumable_fit(_model(), data, 4, 3, resumed, verbose=0) == 12
    assert seen == [(1, 2), (2, 0)]


def _scripted_evaluator(tmp_path, scores, **kwargs):
    """An EvaluationCallback on "accuracy" whose i-th evaluation scores `scores[i]`, keeping the
    best weights and its state in tmp_path; `kwargs` go to EvaluationCallback."""
    scores = iter(scores)
    return EvaluationCallback(
        lambda model: {"accuracy": next(scores)},
        "accuracy",
        tmp_path / "best.weights.h5",
        tmp_path / "state.json",
        **kwargs,
    )


def test_evaluation_callback_best_and_early_stopping(tmp_path):
    evaluator = _scripted_evaluator(tmp_path, [0.5, 0.7, 0.6, 0.65, 0.9], patience=2)
    checkpoint, callbacks = standard_callbacks(tmp_path, save_freq=None, tensorboard=False)
    steps = resumable_fit(_model(), _data, 4, 10, checkpoint, [evaluator] + callbacks, verbose=0)
    assert steps == 16  # stopped after epoch 4: 2 epochs without gain
    state = json.loads((tmp_path / "state.json").read_text())
    assert [e["accuracy"] for e in state["epochs"]] == [0.5, 0.7, 0.6, 0.65]
    assert state["best"]["epoch"] == 2 and (tmp_path / "best.weights.h5").exists()
    # a restarted run sees the stop decision and trains no further
    again = EvaluationCallback(
        lambda model: {"accuracy": 1.0}, "accuracy", None, tmp_path / "state.json", 2
    )
    assert (
        resumable_fit(
            _model(),
            _data,
            4,
            10,
            ResumableCheckpoint(tmp_path / "checkpoints"),
            [again],
            verbose=0,
        )
        == 16
    )


def test_evaluation_inside_epochs_records_fractional_epochs_and_stops_mid_epoch(tmp_path):
    checkpoint, callbacks = standard_callbacks(tmp_path, save_freq=None, tensorboard=False)
    evaluator = _scripted_evaluator(
        tmp_path,
        [0.5, 0.8, 0.7, 0.6, 0.55, 0.9],
        patience=1,
        evaluations_per_epoch=2,
        step_fn=lambda: checkpoint.step,
        steps_per_epoch=4,
    )
    steps = resumable_fit(
        _model(), _data, 4, 10, checkpoint, [checkpoint, evaluator] + callbacks[1:], verbose=0
    )
    state = json.loads((tmp_path / "state.json").read_text())
    # evaluations at steps 2, 4, 6, 8: best 0.8 at epoch 1; 1 epoch without gain at step 8 stops the run
    assert [(e["epoch"], e["accuracy"]) for e in state["epochs"]] == [
        (0.5, 0.5),
        (1, 0.8),
        (1.5, 0.7),
        (2, 0.6),
    ]
    assert state["best"]["epoch"] == 1 and steps == 8
    with pytest.raises(ValueError, match="> 1 needs step_fn and steps_per_epoch"):
        EvaluationCallback(lambda model: {}, "accuracy", evaluations_per_epoch=2)
    # 250 batches, 4 evaluations per epoch: after batches 62, 125, 188 (round half to even) and 250
    quarter = EvaluationCallback(
        lambda model: {},
        "accuracy",
        evaluations_per_epoch=4,
        step_fn=lambda: 0,
        steps_per_epoch=250,
    )
    assert sorted(quarter.inner_points) == [62, 125, 188]


def test_evaluation_and_best_weights_use_the_weight_average(tmp_path):
    from keras_bert.training.optimizer import create_optimizer

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(create_optimizer(0.1, 8, 0, ema_momentum=0.9), "mse")
    seen = []

    def evaluate(m):
        seen.append([v.numpy() for v in m.trainable_variables])
        return {"accuracy": -len(seen)}  # the first evaluation stays the best

    evaluator = EvaluationCallback(evaluate, "accuracy", tmp_path / "best.weights.h5")
    checkpoint = ResumableCheckpoint(tmp_path / "checkpoints")
    resumable_fit(model, _data, 4, 2, checkpoint, [evaluator], verbose=0)
    averages = [a.numpy() for a in model.optimizer._model_variables_moving_average]
    trained = [v.numpy() for v in model.trainable_variables]
    for got, want in zip(seen[-1], averages):  # the last evaluation saw the average
        np.testing.assert_array_equal(got, want)
    assert np.abs(trained[0] - averages[0]).max() > 1e-4  # training kept the trained weights
    kept = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    kept.compile(create_optimizer(0.1, 8, 0, ema_momentum=0.9), "mse")
    kept.optimizer.build(kept.trainable_variables)
    kept.load_weights(tmp_path / "best.weights.h5")  # the best (first) evaluation's weights
    for got, want in zip(kept.trainable_variables, seen[0]):
        np.testing.assert_array_equal(got.numpy(), want)
