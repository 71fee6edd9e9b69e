"""SQuAD scoring through the official evaluators, by hand and on oracle logits of real questions."""

import numpy as np
import pytest

from keras_bert.data import squad
from keras_bert.data import squad_answers as post
from keras_bert.evaluation import squad as squad_eval
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
