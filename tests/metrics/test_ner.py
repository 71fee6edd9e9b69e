"""Entity-level NER scores (seqeval) against values computed by hand."""

import pytest

from keras_bert.metrics.ner import entity_scores


def test_scores_equal_hand_computed_values():
    true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-MISC", "I-MISC"]]
    pred = [["B-PER", "I-PER", "B-LOC", "B-ORG"], ["B-ORG", "O", "B-MISC", "O"]]
    # true entities: PER[0:2], LOC[3], ORG[0], MISC[2:4] (4); predicted: PER[0:2] ok, LOC[2],
    # ORG[3], ORG[0] ok, MISC[2] (wrong end) (5). P = 2/5, R = 2/4, F1 = 2PR/(P+R) = 4/9.
    s = entity_scores(true, pred)
    assert s["precision"] == pytest.approx(0.4) and s["recall"] == pytest.approx(0.5)
    assert s["f1"] == pytest.approx(4 / 9)
    assert s["accuracy"] == pytest.approx(5 / 8)  # tokens 0, 1 | 0, 1, 2 right
    assert (s["num_true_entities"], s["num_pred_entities"]) == (4, 5)
    assert s["per_type"]["PER"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}
    assert s["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert s["per_type"]["ORG"]["precision"] == pytest.approx(0.5)
    assert s["per_type"]["ORG"]["recall"] == 1.0


def test_iob1_input_scores_as_its_iob2_form():
    # IOB1: B- only between two touching entities of one type -> PER[0:2], PER[2], LOC[4].
    true_iob1 = [["I-PER", "I-PER", "B-PER", "O", "I-LOC"]]
    merged = [["B-PER", "I-PER", "I-PER", "O", "B-LOC"]]  # one PER[0:3]: wrong; LOC right
    s = entity_scores(true_iob1, merged)
    assert (s["precision"], s["recall"]) == (pytest.approx(1 / 2), pytest.approx(1 / 3))
    assert s["f1"] == pytest.approx(0.4)
    exact = [["B-PER", "I-PER", "B-PER", "O", "B-LOC"]]
    assert entity_scores(true_iob1, exact)["f1"] == 1.0
    # A stray I- after O begins an entity (conlleval's reading).
    assert entity_scores([["O", "B-LOC"]], [["O", "I-LOC"]])["f1"] == 1.0


def test_no_entities_and_mismatched_lengths():
    assert entity_scores([["O", "O"]], [["O", "O"]])["f1"] == 0.0
    with pytest.raises(ValueError, match="sentence 0: 2 true tags but 1 predicted"):
        entity_scores([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="1 true sentences but 2 predicted"):
        entity_scores([["O"]], [["O"], ["O"]])
