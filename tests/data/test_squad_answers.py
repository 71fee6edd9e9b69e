"""SQuAD answers from window logits (`keras_bert.data.squad_answers`), on constructed logits."""

import warnings

import numpy as np
import pytest

from keras_bert.data import squad
from keras_bert.data import squad_answers as post
from keras_bert.tokenization.full_tokenizer import FullTokenizer

WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
).split()
CONTEXT = " ".join(WORDS)
OFFSET = 4  # [CLS] what ? [SEP]


@pytest.fixture(scope="module")
def tok(uncased_vocab):
    return FullTokenizer(uncased_vocab, do_lower_case=True)


@pytest.fixture(scope="module")
def features(tok):
    # windows (0,7) (3,7) (6,7) (9,7) of 7 one-piece words each, 12 positions per window.
    example = squad.SquadExample("q", "what ?", CONTEXT)
    return squad.convert_example(example, tok, max_seq_length=12, doc_stride=3, max_query_length=4)


def logits(features, marks):
    """Start/end logits: -5 everywhere, `marks` = {(window, 'start'|'end', piece): value}."""
    out = []
    for w, f in enumerate(features):
        start, end = np.full(12, -5.0), np.full(12, -5.0)
        start[0] = end[0] = -1.0
        for (mw, kind, piece), value in marks.items():
            if mw == w:
                position = OFFSET + piece - [0, 3, 6, 9][w]
                (start if kind == "start" else end)[position] = value
        out.append((start, end))
    return out


def test_max_context_rule_picks_the_window(features):
    # window 0 holds piece 6 at its right edge (not its max-context window): its high start
    # logit must not count; window 1 (max context for pieces 5 and 6) answers "five six".
    results = logits(
        features,
        {(0, "start", 6): 10.0, (0, "end", 6): 4.0, (1, "start", 5): 5.0, (1, "end", 6): 5.0},
    )
    out = post.predict_example(CONTEXT, features, results)
    assert out["text"] == "five six" == CONTEXT[out["start"] : out["end"]]
    assert out["score"] == 10.0
    assert out["nbest"][0]["text"] == "five six"


def test_answer_at_the_end_and_max_answer_length(features):
    results = logits(features, {(3, "start", 13): 6.0, (3, "end", 15): 6.0, (3, "start", 15): 1.0})
    out = post.predict_example(CONTEXT, features, results)
    assert out["text"] == "thirteen fourteen fifteen" and out["end"] == len(CONTEXT)
    short = post.predict_example(CONTEXT, features, results, max_answer_length=2)
    assert short["text"] == "fifteen"  # start 15 + end 15 = 7.0 beats the rest


def test_v2_null_score_and_strict_threshold(features):
    results = logits(features, {(1, "start", 5): 2.0, (1, "end", 5): 2.0})
    results[2][0][0] = -3.0  # window 2: CLS start -3 + end -1 = -4 (the minimum)
    out = post.predict_example(CONTEXT, features, results, version_2_with_negative=True)
    assert out["null_score"] == -4.0 and out["null_odds"] == -8.0
    assert out["text"] == "five"
    assert "" in [n["text"] for n in out["nbest"]]
    kept = post.predict_example(
        CONTEXT, features, results, version_2_with_negative=True, null_score_diff_threshold=-8.0
    )
    assert kept["text"] == "five"  # -8 > -8 is false: answered
    empty = post.predict_example(
        CONTEXT, features, results, version_2_with_negative=True, null_score_diff_threshold=-8.5
    )
    assert (empty["text"], empty["start"], empty["end"], empty["score"]) == ("", 0, 0, -4.0)
    assert empty["best_non_null_text"] == "five"


def test_no_valid_candidate_gives_empty_answer(features):
    # Only the first start and end are kept (n_best_size=1): start at piece 8, end at piece 2.
    results = logits(
        features,
        {(1, "start", 8): 9.0, (1, "end", 5): 9.0, (2, "start", 8): 9.0, (0, "end", 2): 9.0},
    )
    for w in range(4):
        results[w][1][OFFSET:] = np.where(results[w][1][OFFSET:] == 9.0, 9.0, -5.0)
    out = post.predict_example(CONTEXT, features[2:3], results[2:3], n_best_size=1)
    assert out["text"] == "" and out["null_odds"] == post.NO_ANSWER_ODDS
    v2 = post.predict_example(
        CONTEXT, features[2:3], results[2:3], n_best_size=1, version_2_with_negative=True
    )
    assert v2["text"] == "" and len(v2["nbest"]) == 1


def test_nbest_dedupes_texts_and_sums_to_one(features):
    results = logits(
        features,
        {(0, "start", 3): 3.0, (0, "end", 4): 3.0, (1, "start", 3): 2.0, (1, "end", 4): 2.0},
    )
    out = post.predict_example(CONTEXT, features, results, n_best_size=3)
    texts = [n["text"] for n in out["nbest"]]
    assert texts[0] == "three four" and len(set(texts)) == len(texts) == 3
    assert abs(sum(n["probability"] for n in out["nbest"]) - 1.0) < 1e-9
    with pytest.raises(ValueError, match="one result per feature"):
        post.predict_example(CONTEXT, features, results[:1])


def test_the_null_rule_compares_in_float32_as_the_serving_graph():
    odds = float(np.float32(0.1))  # 0.10000000149...: above 0.1 as float64, equal as float32
    assert odds > 0.1 and post.predicts_null(odds, 0.1) is False
    assert post.predicts_null(float(np.nextafter(np.float32(0.1), np.float32(1))), 0.1) is True
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # beyond float32: +-inf, as TensorFlow converts it
        assert post.predicts_null(post.NO_ANSWER_ODDS, 1e40) is False
        assert post.predicts_null(post.NO_ANSWER_ODDS, -1e40) is True
    answers = {"a": {"null_odds": odds, "best_non_null_text": "five"}}
    assert post.with_threshold(answers, 0.1) == {"a": "five"}


def test_the_best_span_is_found_when_the_null_answer_fills_the_nbest_alone(features):
    # null = -1 + -1 = -2 in every window; the best span "five" scores -1.5 + -1.5 = -3.
    results = logits(features, {(1, "start", 5): -1.5, (1, "end", 5): -1.5})
    for threshold, text in ((0.5, ""), (1.0, "five")):
        out = post.predict_example(
            CONTEXT,
            features,
            results,
            n_best_size=1,
            version_2_with_negative=True,
            null_score_diff_threshold=threshold,
        )
        assert [n["text"] for n in out["nbest"]] == [""]
        assert (out["best_non_null_text"], out["null_odds"], out["text"]) == ("five", 1.0, text)
