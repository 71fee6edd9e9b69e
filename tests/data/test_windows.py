"""Window spans and the max-context rule: hand-computed values, the google-research reference, and
the in-graph twins equal to the Python rules."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.data import squad
from keras_bert.data import windows
from keras_bert.tokenization.full_tokenizer import FullTokenizer


def reference_is_max_context(doc_spans, cur_span_index, position):
    """google-research/bert run_squad.py `_check_is_max_context`, verbatim but for the span type."""
    best_score = None
    best_span_index = None
    for span_index, (start, length) in enumerate(doc_spans):
        end = start + length - 1
        if position < start:
            continue
        if position > end:
            continue
        num_left_context = position - start
        num_right_context = end - position
        score = min(num_left_context, num_right_context) + 0.01 * length
        if best_score is None or score > best_score:
            best_score = score
            best_span_index = span_index
    return cur_span_index == best_span_index


def test_window_spans_follow_run_squad():
    # google-research/bert: next window starts min(length, doc_stride) later; last reaches the end.
    assert windows.window_spans(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert windows.window_spans(10, 4, 5) == [(0, 4), (4, 4), (8, 2)]
    assert windows.window_spans(3, 4, 2) == [(0, 3)]
    assert windows.window_spans(0, 4, 2) == [(0, 0)]
    assert windows.window_spans(155, 150, 140) == [(0, 150), (140, 15)]
    for window, stride in ((0, 2), (5, 0)):
        with pytest.raises(ValueError, match="window >= 1 and stride >= 1"):
            windows.window_spans(5, window, stride)


def test_max_context_by_hand():
    spans = [(0, 4), (3, 4), (6, 4)]
    # piece 3: window 0 score 100*min(3,0)+4 = 4; window 1: 100*min(0,3)+4 = 4 -> tie, earlier.
    assert windows.is_max_context(spans, 0, 3) and not windows.is_max_context(spans, 1, 3)
    # piece 5: window 1 (min(2,1)=1 -> 104) beats window 0 (not inside).
    assert windows.is_max_context(spans, 1, 5)
    # piece 6: window 1 min(3,0)=0 -> 4; window 2 min(0,3)=0 -> 4: tie, window 1.
    assert windows.is_max_context(spans, 1, 6)
    assert not windows.is_max_context(spans, 2, 1)  # not inside window 2
    for p in range(10):  # each piece has exactly one max-context window
        assert sum(windows.is_max_context(spans, w, p) for w in range(3)) == 1


def test_window_length_counts_beyond_ties():
    """The 0.01 x length term of the reference decides piece 145 of windows (0, 150), (140, 15):
    window 0: min(145, 4) + 1.50 = 5.50; window 1: min(5, 9) + 0.15 = 5.15 -> window 0, though
    window 1 gives it more context on its short side. Piece 146: 3 + 1.50 < 6 + 0.15 -> window 1."""
    spans = windows.window_spans(155, 150, 140)
    flags = [
        [windows.is_max_context(spans, w, p) for p in range(s, s + n)]
        for w, (s, n) in enumerate(spans)
    ]
    assert flags[0] == [True] * 146 + [False] * 4
    assert flags[1] == [False] * 6 + [True] * 9
    assert [reference_is_max_context(spans, 0, p) for p in (144, 145, 146)] == [True, True, False]
    _, graph = windows.graph_max_context(tf.constant([0, 140]), tf.constant([150, 15]), 155)
    assert graph.to_list() == flags


@pytest.mark.parametrize(
    "num_tokens,window,stride",
    list(itertools.product((0, 1, 7, 23, 130, 262), (1, 4, 9, 120), (1, 3, 8, 100, 200))),
)
def test_python_rule_equals_the_reference(num_tokens, window, stride):
    spans = windows.window_spans(num_tokens, window, stride)
    for w, p in itertools.product(range(len(spans)), range(num_tokens)):
        assert windows.is_max_context(spans, w, p) == reference_is_max_context(spans, w, p)


def test_graph_twins_equal_the_python_rules():
    rng = np.random.default_rng(0)
    num_tokens = np.asarray([0, 1, 5, 9, 30, 61, 200, 262, 0, 17], np.int32)
    window = rng.integers(1, 130, size=num_tokens.size).astype(np.int32)
    for stride, keep_empty in ((3, True), (64, True), (7, False)):
        got = windows.graph_window_spans(
            tf.constant(num_tokens), tf.constant(window), stride, keep_empty
        )
        spans = [
            windows.window_spans(int(n), int(k), stride) if n or keep_empty else []
            for n, k in zip(num_tokens, window)
        ]
        assert got["count"].numpy().tolist() == [len(s) for s in spans]
        assert got["sequence"].numpy().tolist() == [b for b, s in enumerate(spans) for _ in s]
        assert got["index"].numpy().tolist() == [i for s in spans for i in range(len(s))]
        assert list(zip(got["start"].numpy().tolist(), got["length"].numpy().tolist())) == [
            x for s in spans for x in s
        ]
        assert got["start"].dtype == tf.int32
        offsets = np.concatenate([[0], np.cumsum(num_tokens)])
        first = tf.gather(offsets, got["sequence"]) + tf.cast(got["start"], tf.int64)
        pieces, flags = windows.graph_max_context(first, got["length"], int(offsets[-1]))
        expected = [
            [windows.is_max_context(s, w, p) for p in range(a, a + n)]
            for s in spans
            for w, (a, n) in enumerate(s)
        ]
        assert flags.to_list() == expected
        assert pieces.to_list() == [
            list(range(offsets[b] + a, offsets[b] + a + n))
            for b, s in enumerate(spans)
            for a, n in s
        ]


def test_squad_features_use_the_shared_rule(monkeypatch, uncased_vocab):
    calls = []
    real = windows.is_max_context

    def spy(spans, window_index, position):
        calls.append((tuple(spans), window_index, position))
        return real(spans, window_index, position)

    monkeypatch.setattr(windows, "is_max_context", spy)
    tok = FullTokenizer(uncased_vocab, do_lower_case=True)
    context = "zero one two three four five six seven eight nine"
    features = squad.convert_example(
        squad.SquadExample("q", "what ?", context),
        tok,
        max_seq_length=10,
        doc_stride=2,
        max_query_length=4,
    )
    # windows of 10 - 2 ("what ?") - 3 = 5 pieces, stride 2; by hand, the max-context pieces
    # are 0-3 | 4-5 | 6-7 | 8-9 (piece 3: tie min 1 + 5 in windows 0 and 1 -> the earlier).
    assert calls and {c[0] for c in calls} == {((0, 5), (2, 5), (4, 5), (6, 4))}
    assert [int(f.token_is_max_context.sum()) for f in features] == [4, 2, 2, 2]
