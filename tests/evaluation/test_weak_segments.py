"""Weak-segment discovery: a planted weak property is found first; a set without one gives none."""

import numpy as np
import pytest

from keras_bert.evaluation import weak_segments as ws

WORDS = "the film was good bad long short plot actor scene music story ending".split()


def constructed(n=600, seed=0, fail_truncated=True):
    """Rows of random texts; 15% are longer than max_seq_length (truncated). With
    `fail_truncated` the deciding words of those rows were cut off: they are right 30% of the
    time; every other row 88%."""
    rng = np.random.default_rng(seed)
    truncated = rng.random(n) < 0.15
    pieces = np.where(truncated, rng.integers(130, 300, n), rng.integers(5, 120, n))
    texts = []
    for i in range(n):
        words = list(rng.choice(WORDS, 6))
        if rng.random() < 0.3:
            words.append("not")
        if rng.random() < 0.2:
            words.append("2019")
        if rng.random() < 0.25:
            words[0] = words[0].upper()
        texts.append(" ".join(words) + ("?" if rng.random() < 0.2 else "."))
    p_right = np.where(truncated & fail_truncated, 0.3, 0.88)
    correct = rng.random(n) < p_right
    unknown = (rng.random(n) < 0.1).astype(int)
    slices = rng.choice(["web", "app"], n)
    props = ws.text_properties(texts, pieces, truncated, unknown, slices, "source")
    return props, correct, texts, truncated


def test_planted_property_is_the_first_weak_segment():
    props, correct, texts, truncated = constructed()
    segs = ws.find_weak_segments(props, correct, texts)
    first = segs[0]
    assert first["description"] == "truncated = yes"
    assert first["size"] == int(truncated.sum())
    assert first["accuracy"] == pytest.approx(correct[truncated].mean())
    assert first["ci_low"] < first["accuracy"] < first["ci_high"]
    assert first["adjusted_p_value"] < ws.ALPHA and first["overall"] == correct.mean()
    assert all(not correct[e["row"]] and truncated[e["row"]] for e in first["examples"])
    assert len(first["examples"]) == ws.EXAMPLE_ROWS
    accuracies = [s["accuracy"] for s in segs]
    assert accuracies == sorted(accuracies)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_weak_segment_in_a_set_without_one(seed):
    props, correct, texts, _ = constructed(seed=seed, fail_truncated=False)
    assert ws.find_weak_segments(props, correct, texts) == []


def test_properties_on_fixed_inputs():
    texts = ["Why NOT?", "isn't 42 fine", "Привет мир", "東京大学 ok", "..."]
    props = ws.text_properties(
        texts, [5, 6, 4, 7, 3], [False, True, False, False, False], [0, 0, 2, 1, 0]
    )
    assert props["contains '?'"][1] == ["yes", "no", "no", "no", "no"]
    assert props["negation word"][1] == ["yes", "yes", "no", "no", "no"]
    assert props["contains a digit"][1] == ["no", "yes", "no", "no", "no"]
    assert props["script"][1] == ["LATIN", "LATIN", "CYRILLIC", "CJK", "none"]
    assert props["upper-case ratio"][1] == pytest.approx([4 / 6, 0, 1 / 9, 0, 0])
    assert props["[UNK] rate"][1] == pytest.approx([0, 0, 0.5, 1 / 7, 0])
    assert props["truncated"] == ("categorical", ["no", "yes", "no", "no", "no"])


def test_quantile_bins_describe_their_range():
    segs = ws.segments({"length": ("numeric", [1, 2, 3, 4, 5, 6, 7, 8]), "z": ("numeric", [0] * 8)})
    assert [(name, d, m.sum()) for name, d, m in segs] == [
        ("length", "length in 1 to 2", 2),
        ("length", "length in 3 to 4", 2),
        ("length", "length in 5 to 6", 2),
        ("length", "length in 7 to 8", 2),
        ("z", "z = 0", 8),
    ]
