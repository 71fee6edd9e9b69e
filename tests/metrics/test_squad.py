"""SQuAD scoring through the official evaluators, by hand and on oracle logits of real questions."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from official.nlp.tools import squad_evaluate_v2_0

from keras_bert.data import squad
from keras_bert.data import squad_answers as post
from keras_bert.metrics import squad as squad_eval
from keras_bert.tokenization.full_tokenizer import FullTokenizer


@pytest.fixture(scope="module")
def tok(uncased_vocab):
    return FullTokenizer(uncased_vocab, do_lower_case=True)


def example(qid, answers, impossible=False):
    context = "the Eiffel Tower in Paris , France was built in 1889 ."
    return squad.SquadExample(
        qid, "q?", context, tuple((a, context.index(a)) for a in answers), impossible
    )


def test_v1_scores_by_hand_through_the_official_evaluator():
    examples = [
        example("a", ["the Eiffel Tower"]),
        example("b", ["Paris", "in Paris"]),
        example("c", ["1889"]),
    ]
    predictions = {"a": "Eiffel Tower", "b": "Paris , France", "c": ""}
    scores = squad_eval.evaluate_v1(squad_eval.dataset_of(examples), predictions)
    # a: EM 1, F1 1 (articles dropped); b: F1 max(2/3, 1/2); c: 0.
    assert scores["exact_match"] == pytest.approx(100 / 3)
    assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)


def test_v2_scores_and_threshold_sweep_by_hand():
    examples = [
        example("A", ["1889"]),
        example("B", ["Paris"]),
        example("C", [], True),
        example("D", [], True),
    ]
    answers = {
        "A": {"best_non_null_text": "1889", "null_odds": -2.0},
        "B": {"best_non_null_text": "France", "null_odds": 1.0},
        "C": {"best_non_null_text": "Tower", "null_odds": 0.5},
        "D": {"best_non_null_text": "", "null_odds": post.NO_ANSWER_ODDS},
    }
    for threshold, exact in ((0.0, 75.0), (0.7, 50.0), (5.0, 50.0)):
        texts = post.with_threshold(answers, threshold)
        given = {q: a | {"text": texts[q]} for q, a in answers.items()}
        scores = squad_eval.evaluate_v2(squad_eval.dataset_of(examples), given)
        assert scores["exact"] == exact and scores["total"] == 4
        assert scores["HasAns_total"] == 2 and scores["NoAns_total"] == 2
        # Sweep, by hand: all null = 2/4; A (-2) +1 -> 3/4 best; C (0.5) -1; B (1) 0; D -1.
        assert scores["best_exact"] == 75.0 and scores["best_exact_thresh"] == -2.0
        assert scores["best_f1"] == 75.0 and scores["best_f1_thresh"] == -2.0
    at_best = post.with_threshold(answers, -2.0)
    assert at_best == {"A": "1889", "B": "", "C": "", "D": ""}
    given = {q: answers[q] | {"text": at_best[q]} for q in answers}
    assert (
        squad_eval.evaluate(squad_eval.dataset_of(examples), given, version_2_with_negative=True)[
            "exact"
        ]
        == 75.0
    )


def below(value) -> float:
    """The largest float32 below `value`."""
    return float(np.nextafter(np.float32(value), np.float32(-np.inf)))


def scores_at(examples, answers, threshold) -> dict:
    """The official v2.0 EM / F1 of `answers` thresholded at `threshold`."""
    texts = post.with_threshold(answers, threshold)
    return squad_eval.official_scores(squad_eval.dataset_of(examples), texts, True)


# Two sets where answering nothing is best: the official sweep reports that score at its
# starting threshold 0.0, which answers the questions of negative null odds (50 and 33.33).
ALL_NULL_BEST = {
    "two unanswerable": (
        [example("A", [], True), example("B", [], True)],
        {
            "A": {"best_non_null_text": "Paris", "null_odds": -0.5},
            "B": {"best_non_null_text": "1889", "null_odds": 2.0},
        },
        100.0,
        50.0,
    ),
    "one answerable answered wrong": (
        [example("A", ["1889"]), example("B", [], True), example("C", [], True)],
        {
            "A": {"best_non_null_text": "Paris", "null_odds": -0.5},
            "B": {"best_non_null_text": "Tower", "null_odds": -0.25},
            "C": {"best_non_null_text": "France", "null_odds": 1.0},
        },
        100.0 * 2 / 3,
        100.0 / 3,
    ),
}


@pytest.mark.parametrize("name", ALL_NULL_BEST)
def test_the_best_threshold_gives_the_best_score_when_answering_nothing_is_best(name):
    examples, answers, best, at_zero = ALL_NULL_BEST[name]
    dataset = squad_eval.dataset_of(examples)
    non_null = {q: a["best_non_null_text"] for q, a in answers.items()}
    official = squad_evaluate_v2_0.evaluate(
        dataset, non_null, na_probs={q: a["null_odds"] for q, a in answers.items()}
    )
    assert (official["final_f1"], official["final_f1_thresh"]) == (best, 0.0)
    assert scores_at(examples, answers, 0.0)["f1"] == at_zero
    given = {q: a | {"text": non_null[q]} for q, a in answers.items()}
    scores = squad_eval.evaluate_v2(dataset, given)
    threshold = below(-0.5)  # just below the lowest null odds: nothing answered
    assert (scores["best_f1"], scores["best_f1_thresh"]) == (best, threshold)
    assert (scores["best_exact"], scores["best_exact_thresh"]) == (best, threshold)
    assert post.with_threshold(answers, threshold) == {q: "" for q in answers}
    obtained = scores_at(examples, answers, threshold)
    assert (obtained["exact_match"], obtained["f1"]) == (best, best)


def test_a_run_of_equal_null_odds_is_answered_whole():
    # The official sweep adds A (+1) alone and reports 100 at 1.0; at 1.0 B (equal odds, an
    # unanswerable question answered) is answered too. No threshold answers A without B.
    examples = [example("A", ["1889"]), example("B", [], True)]
    answers = {
        "A": {"best_non_null_text": "1889", "null_odds": 1.0, "text": ""},
        "B": {"best_non_null_text": "Tower", "null_odds": 1.0, "text": ""},
    }
    dataset = squad_eval.dataset_of(examples)
    official = squad_evaluate_v2_0.evaluate(
        dataset, {"A": "1889", "B": "Tower"}, na_probs={"A": 1.0, "B": 1.0}
    )
    assert (official["final_exact"], official["final_exact_thresh"]) == (100.0, 1.0)
    assert scores_at(examples, answers, 1.0)["exact_match"] == 50.0
    scores = squad_eval.evaluate_v2(dataset, answers)
    assert (scores["best_exact"], scores["best_exact_thresh"]) == (50.0, below(1.0))
    assert scores_at(examples, answers, below(1.0))["exact_match"] == 50.0


def test_the_sweep_refuses_odds_that_are_not_finite():
    examples = [example("A", ["1889"])]
    for bad in (float("nan"), float("inf"), 1e39):
        answers = {"A": {"best_non_null_text": "1889", "null_odds": bad, "text": "1889"}}
        message = f"null odds must be finite float32 numbers; question 'A' has {bad}"
        with pytest.raises(ValueError, match=re.escape(message)):
            squad_eval.evaluate_v2(squad_eval.dataset_of(examples), answers)


GOLD = "Eiffel Tower in Paris"
PREDICTIONS = ["", "1889", "Paris", "Tower in Paris", "the Eiffel Tower", "Paris , France"]
questions = st.lists(
    st.tuples(
        st.booleans(),  # answerable
        st.sampled_from(PREDICTIONS),  # best non-null answer ("": no valid span)
        st.one_of(st.sampled_from([-1.0, -0.5, 0.0, 0.5, 2.0]), st.floats(-4, 4, width=32)),
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(questions)
def test_the_stored_threshold_reproduces_the_best_score_property(drawn):
    """Random questions, odds with ties: each best threshold gives its reported score through
    the official evaluator, no threshold gives more, and without ties the score is the
    official sweep's."""
    examples, answers = [], {}
    for i, (answerable, text, odds) in enumerate(drawn):
        q = str(i)
        examples.append(example(q, [GOLD] if answerable else [], not answerable))
        odds = post.NO_ANSWER_ODDS if not text else odds
        answers[q] = {"best_non_null_text": text, "null_odds": odds, "text": ""}
    dataset = squad_eval.dataset_of(examples)
    scores = squad_eval.evaluate_v2(dataset, answers)
    values = sorted({float(np.float32(a["null_odds"])) for a in answers.values()})
    reachable = [below(values[0]), *values]
    for key, metric in (("exact", "exact_match"), ("f1", "f1")):
        threshold = scores[f"best_{key}_thresh"]
        assert threshold in reachable
        assert scores_at(examples, answers, threshold)[metric] == scores[f"best_{key}"]
        for other in reachable:
            assert scores_at(examples, answers, other)[metric] <= scores[f"best_{key}"] + 1e-9
        official = squad_evaluate_v2_0.evaluate(
            dataset,
            {q: a["best_non_null_text"] for q, a in answers.items()},
            na_probs={q: a["null_odds"] for q, a in answers.items()},
        )[f"final_{key}"]
        assert official >= scores[f"best_{key}"] - 1e-9  # it also counts unreachable points
        if len(values) == len(answers):
            assert scores[f"best_{key}"] == pytest.approx(official, abs=1e-9)


@pytest.mark.parametrize("version", ["v1.1", "v2.0"])
def test_oracle_logits_on_real_dev_questions_give_the_labelled_text(version, tok, data_dir):
    """Real contexts, windows of 64 pieces: logits pointing at each training label must give back
    exactly the gold answer text (cut by character offsets) or "" for unanswerable questions."""
    v2 = version == "v2.0"
    name = "dev-v2.0-subset.json" if v2 else "dev-v1.1.json"
    examples = squad.read_squad_examples(data_dir / "squad" / name, v2)[:240:2]
    features = squad.convert_examples(
        examples, tok, max_seq_length=64, doc_stride=24, max_query_length=16, is_training=True
    )
    assert len(features) > 2 * len(examples)  # real contexts span several windows
    results = []
    for f in features:
        start, end = np.zeros(64, np.float32), np.zeros(64, np.float32)
        start[f.start_position] = end[f.end_position] = 10.0  # position 0 ([CLS]) when outside
        results.append((start, end))
    covered = {}  # the characters of the labelled pieces: the best any model can answer
    for f in features:
        if f.start_position:
            covered[f.example_index] = examples[f.example_index].context[
                f.token_start[f.start_position] : f.token_end[f.end_position]
            ]
    answers = post.predict_examples(
        examples, features, results, version_2_with_negative=v2, max_answer_length=64
    )
    exact = 0
    for i, e in enumerate(examples):
        expected = "" if e.is_impossible else covered[i]
        assert answers[e.qas_id]["text"] == expected
        exact += expected == ("" if e.is_impossible else e.answers[0][0])
    # Pieces are whole words or word parts: an answer inside a piece ("gold" of "golden") is
    # the only way to miss the gold text.
    assert exact >= 0.97 * len(examples)
    scores = squad_eval.evaluate(squad_eval.dataset_of(examples), answers, v2)
    # the official EM normalizes and takes the best of all gold answers: never below ours
    assert scores["exact" if v2 else "exact_match"] >= 100.0 * exact / len(examples) - 1e-9
