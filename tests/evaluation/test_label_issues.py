"""Label-error detection (cleanlab confident learning) on constructed probabilities with known
flipped labels."""

import numpy as np
import pytest

from keras_bert.evaluation import label_issues as li

NAMES = ["neg", "neutral", "pos"]


def noisy_set(n=900, flips=45, seed=0):
    """True labels, a model's probabilities (right most of the time), and labels with `flips`
    rows flipped to another class."""
    rng = np.random.default_rng(seed)
    true = rng.integers(0, 3, n)
    logits = rng.normal(0.0, 1.0, (n, 3))
    logits[np.arange(n), true] += 3.0
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    flipped = rng.choice(n, flips, replace=False)
    given = true.copy()
    given[flipped] = (given[flipped] + rng.integers(1, 3, flips)) % 3
    return true, given, probs, flipped


def test_flipped_labels_are_found_with_stated_recall_and_precision():
    true, given, probs, flipped = noisy_set()
    issues = li.find_label_issues(given, probs, NAMES)
    recall, precision = li.recall_precision(issues, flipped)
    # 45 of 900 rows flipped: 40 of them listed (recall 0.889), 40 of the 45 suspects flipped
    # (precision 0.889).
    assert len(issues) == 45
    assert (round(recall, 3), round(precision, 3)) == (0.889, 0.889)
    # Without flips almost nothing is suspected: the suspects are the flips, not the model's errors.
    clean = li.find_label_issues(true, probs, NAMES)
    assert len(clean) < len(issues) / 10


def test_rows_names_and_scores():
    true, given, probs, _ = noisy_set()
    issues = li.find_label_issues(given, probs, NAMES)
    scores = [x["score"] for x in issues]
    assert scores == sorted(scores)
    for x in issues:
        assert x["given"] == NAMES[given[x["row"]]]
        assert x["score"] == pytest.approx(probs[x["row"], given[x["row"]]])
        other = probs[x["row"]].copy()
        other[given[x["row"]]] = -1
        assert x["suggested"] == NAMES[other.argmax()] != x["given"]


def test_hand_made_suspect():
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.85, 0.15], [0.1, 0.9], [0.2, 0.8], [0.95, 0.05]])
    given = np.array([0, 0, 0, 1, 1, 1])  # row 5 says class 1, the model is sure of class 0
    assert li.find_label_issues(given, probs, ["a", "b"]) == [
        {"row": 5, "given": "b", "suggested": "a", "score": pytest.approx(0.05)}
    ]


def test_one_class_and_bad_shapes():
    assert li.find_label_issues([1, 1], [[0.2, 0.8], [0.6, 0.4]], ["a", "b"]) == []
    with pytest.raises(ValueError, match=r"probabilities \(2, 2\) do not fit 3 labels"):
        li.find_label_issues([0, 1, 0], [[0.2, 0.8], [0.6, 0.4]], ["a", "b"])


TAGS = ["O", "B-PER", "I-PER", "B-LOC"]


def noisy_sentences(sentences=150, words=6, flips=30, seed=0):
    """True tags per sentence, a tagger's probabilities (right most of the time), the given tags
    with `flips` words flipped to another tag, and the flipped (sentence, word) pairs."""
    rng = np.random.default_rng(seed)
    true = [rng.choice(4, words, p=[0.6, 0.15, 0.1, 0.15]) for _ in range(sentences)]
    probs = []
    for t in true:
        logits = rng.normal(0.0, 1.0, (words, 4))
        logits[np.arange(words), t] += 3.0
        probs.append(np.exp(logits) / np.exp(logits).sum(1, keepdims=True))
    cells = rng.choice(sentences * words, flips, replace=False)
    flipped = [(int(c) // words, int(c) % words) for c in cells]
    given = [t.copy() for t in true]
    for s, w in flipped:
        given[s][w] = (given[s][w] + rng.integers(1, 4)) % 4
    names = [[TAGS[i] for i in g] for g in given]
    return names, probs, flipped


def test_flipped_tags_are_found_with_stated_recall_and_precision():
    given, probs, flipped = noisy_sentences()
    words = [[f"w{s}.{w}" for w in range(len(g))] for s, g in enumerate(given)]
    issues = li.find_token_label_issues(given, probs, TAGS, words)
    recall, precision = li.recall_precision(issues, flipped)
    # 30 of 900 words flipped: 25 of them listed (recall 0.833), 25 of the 32 suspects flipped
    # (precision 0.781).
    assert len(issues) == 32
    assert (round(recall, 3), round(precision, 3)) == (0.833, 0.781)
    scores = [x["score"] for x in issues]
    assert scores == sorted(scores)
    for x in issues:
        p = probs[x["row"]][x["token"]]
        assert x["word"] == f"w{x['row']}.{x['token']}"
        assert x["given"] == given[x["row"]][x["token"]] != x["suggested"]
        assert x["score"] == pytest.approx(p[TAGS.index(x["given"])])
        other = p.copy()
        other[TAGS.index(x["given"])] = -1
        assert x["suggested"] == TAGS[other.argmax()]


def test_token_issue_on_a_hand_made_sentence_and_unknown_tags_left_out():
    sure = {"O": [0.9, 0.04, 0.03, 0.03], "B-PER": [0.05, 0.9, 0.03, 0.02]}
    given = [["B-PER", "O", "O"], ["O", "B-PER", "O"], ["B-PER", "O", "O"], ["O", "B-MISC"]]
    model = [["B-PER", "O", "O"], ["O", "B-PER", "O"], ["B-PER", "O", "B-PER"], ["O", "O"]]
    probs = [np.array([sure[t] for t in m]) for m in model]
    words = [["Ann", "is", "here"], ["so", "Bo", "is"], ["Cy", "met", "Di"], ["a", "b"]]
    # Sentence 2's "Di" is tagged O, the model is sure of B-PER; sentence 3 has a tag the model
    # does not know and is left out.
    assert li.find_token_label_issues(given, probs, TAGS, words) == [
        {
            "row": 2,
            "token": 2,
            "word": "Di",
            "given": "O",
            "suggested": "B-PER",
            "score": pytest.approx(0.05),
        }
    ]
