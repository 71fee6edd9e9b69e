"""Best-evaluation selection: NaN and infinite metrics never win while a finite one exists."""
import json
import math

import pytest

from keras_bert.training.callbacks import EvaluationCallback
from keras_bert.training.selection import best_index, is_better

NAN, INF = float("nan"), float("inf")


def test_is_better_and_best_index_with_nan_and_inf():
    assert is_better(NAN, None) and is_better(0.1, NAN) and is_better(0.1, INF)
    assert not is_better(NAN, 0.1) and not is_better(INF, 0.1) and not is_better(-INF, NAN)
    assert is_better(0.6, 0.5) and not is_better(0.5, 0.5) and not is_better(0.4, 0.5)
    assert best_index([0.5, NAN]) == 0 and best_index([NAN, 0.5]) == 1
    assert best_index([NAN, INF, 0.2, 0.7, NAN, 0.7]) == 3   # first of the ties
    assert best_index([NAN, None, INF]) == 0                 # nothing finite: the first
    with pytest.raises(ValueError, match="needs at least one value"):
        best_index([])


def test_evaluation_callback_keeps_the_first_finite_best_after_a_nan(tmp_path):
    scripted = iter([NAN, 0.5, 0.75, INF, 0.25])
    state = tmp_path / "state.json"
    callback = EvaluationCallback(lambda model: {"pearson": next(scripted)}, "pearson",
                                  state_file=state)
    for epoch in range(5):
        callback.on_epoch_end(epoch, {"loss": 1.0})
    saved = json.loads(state.read_text())
    assert saved["best"]["epoch"] == 3 and saved["best"]["pearson"] == 0.75
    assert [e["epoch"] for e in saved["epochs"]] == [1, 2, 3, 4, 5]
    assert math.isnan(saved["epochs"][0]["pearson"])
