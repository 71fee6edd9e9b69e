"""Best-evaluation selection: NaN and infinite metrics never win while a finite one exists."""

import json
import math

import pytest

from keras_bert.training.evaluation_callback import EvaluationCallback
from keras_bert.training.selection import best_index, is_better

NAN, INF = float("nan"), float("inf")


def test_is_better_and_best_index_with_nan_and_inf():
    assert is_better(NAN, None) and is_better(0.1, NAN) and is_better(0.1, INF)
    assert not is_better(NAN, 0.1) and not is_better(INF, 0.1) and not is_better(-INF, NAN)
    assert is_better(0.6, 0.5) and not is_better(0.5, 0.5) and not is_better(0.4, 0.5)
    assert best_index([0.5, NAN]) == 0 and best_index([NAN, 0.5]) == 1
    assert best_index([NAN, INF, 0.2, 0.7, NAN, 0.7]) == 3  # first of the ties
    assert best_index([NAN, None, INF]) == 0  # nothing finite: the first
    with pytest.raises(ValueError, match="needs at least one value"):
        best_index([])


def test_equal_values_go_to_the_lower_dev_loss_then_to_on_tie():
    assert is_better(1.0, 1.0, loss=0.2, best_loss=0.5) is True
    assert is_better(1.0, 1.0, loss=0.5, best_loss=0.2) is False
    assert is_better(1.0, 1.0, loss=0.5, best_loss=0.2, on_tie=True) is False  # the loss decides
    for on_tie in (False, True):  # equal or unknown losses: on_tie decides
        assert is_better(1.0, 1.0, loss=0.3, best_loss=0.3, on_tie=on_tie) is on_tie
        assert is_better(1.0, 1.0, loss=NAN, best_loss=0.3, on_tie=on_tie) is on_tie
        assert is_better(1.0, 1.0, loss=0.3, best_loss=NAN, on_tie=on_tie) is on_tie
        assert is_better(1.0, 1.0, loss=None, best_loss=0.3, on_tie=on_tie) is on_tie
        assert is_better(1.0, 1.0, on_tie=on_tie) is on_tie
    # The loss only breaks ties: a higher value wins whatever the losses.
    assert is_better(0.9, 1.0, loss=0.1, best_loss=0.5) is False
    assert is_better(1.0, 0.9, loss=0.5, best_loss=0.1) is True
    assert best_index([0.9, 0.9], losses=[0.5, 0.2]) == 1
    assert best_index([0.9, 0.9], losses=[0.2, 0.5]) == 0
    assert best_index([0.9, 0.9], losses=[0.3, 0.3]) == 0  # equal losses: the first
    assert best_index([0.9, 0.9, 0.8], losses=[None, 0.2, 0.1]) == 0  # a missing loss: the first
    assert best_index([0.5, 0.9, 0.9], losses=[0.0, NAN, 0.4]) == 1


def test_evaluation_callback_keeps_the_later_of_equal_scores_and_losses(tmp_path):
    scripted = iter([(1.0, 0.3), (1.0, 0.2), (1.0, 0.4), (1.0, 0.2)])
    callback = EvaluationCallback(
        lambda model: dict(zip(("accuracy", "loss"), next(scripted))),
        "accuracy",
        state_file=tmp_path / "state.json",
    )
    for epoch in range(4):
        callback.on_epoch_end(epoch, {"loss": 1.0})
    # 0.2 at epoch 2 beats 0.3; epoch 3's 0.4 does not; epoch 4 ties epoch 2 and is later.
    assert json.loads((tmp_path / "state.json").read_text())["best"]["epoch"] == 4


def test_evaluation_callback_keeps_the_first_finite_best_after_a_nan(tmp_path):
    scripted = iter([NAN, 0.5, 0.75, INF, 0.25])
    state = tmp_path / "state.json"
    callback = EvaluationCallback(
        lambda model: {"pearson": next(scripted)}, "pearson", state_file=state
    )
    for epoch in range(5):
        callback.on_epoch_end(epoch, {"loss": 1.0})
    saved = json.loads(state.read_text())
    assert saved["best"]["epoch"] == 3 and saved["best"]["pearson"] == 0.75
    assert [e["epoch"] for e in saved["epochs"]] == [1, 2, 3, 4, 5]
    assert math.isnan(saved["epochs"][0]["pearson"])
