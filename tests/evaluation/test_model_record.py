"""What a report measured (metrics.json's "model") and the one rule of which two models may be set
side by side (`--compare`, a release gate's baseline): exact one-line messages naming both."""

import pytest

from keras_bert.evaluation import model_record as mr
from keras_bert.evaluation.predictors import ModelInfo


def record(name, task_type="classification", labels=("x", "y"), is_pair=False, **settings):
    info = ModelInfo(name, task_type, list(labels), is_pair, [], True, 16, settings)
    return mr.model_record(info, f"/m/{name}")


def test_the_record_of_a_model():
    info = ModelInfo(
        "r",
        "span_question_answering",
        [],
        True,
        ["[PAD]"],
        True,
        32,
        {"version_2_with_negative": True, "null_score_diff_threshold": 1.5},
    )
    assert mr.model_record(info, "/m/r") == {
        "name": "r",
        "path": "/m/r",
        "task_type": "span_question_answering",
        "label_names": [],
        "max_seq_length": 32,
        "is_pair": True,
        "metric_scale": "percent",
        "settings": {"version_2_with_negative": True},
    }
    assert [
        mr.metric_scale(t)
        for t in ("classification", "regression", "token_classification", "multiple_choice")
    ] == ["fraction"] * 4


@pytest.mark.parametrize(
    "b, message",
    [
        (
            record("b", "regression", ()),
            "cannot compare a classification model (a) with a regression model (b)",
        ),
        (
            record("b", labels=("y", "x")),
            "the models have different label names: a ['x', 'y'], b ['y', 'x']",
        ),
        (
            record("b") | {"metric_scale": "percent"},
            "the models' metrics are on different scales: a fraction, b percent (fraction: 0-1, "
            "percent: 0-100)",
        ),
        (record("b", is_pair=True), "a and b differ in taking one text or a pair"),
        (
            record("b", num_choices=5),
            "the models differ in num_choices: a None, b 5",
        ),
    ],
)
def test_what_differs_is_refused_in_one_line_naming_both(b, message):
    mr.check_comparable(record("a"), record("a2"))
    with pytest.raises(ValueError) as e:
        mr.check_comparable(record("a"), b)
    assert str(e.value) == message


def test_a_report_of_an_older_version_is_judged_on_what_it_recorded():
    old = {"name": "o", "path": "/m/o", "task_type": "classification", "label_names": ["x", "y"]}
    mr.check_comparable(record("a", is_pair=True, num_choices=4), old)
    old_squad = old | {"task_type": "span_question_answering", "label_names": []}
    squad_fractions = record("s", "span_question_answering", ()) | {"metric_scale": "fraction"}
    with pytest.raises(ValueError, match=r"^the models' metrics are on different scales: s "):
        mr.check_comparable(squad_fractions, old_squad)  # the old one: percent, by its family
