"""The NER evidence pack: a CoNLL file read as training reads it; entity metrics equal to seqeval,
error kinds and the sentence-count bootstrap on constructed tags (the recipe test scores a
tagger's own tags)."""

import numpy as np
import pytest
from seqeval import metrics as sm

from keras_bert.data.conll import read_conll
from keras_bert.evaluation import comparison, report_sections, report_writer
from keras_bert.evaluation import evidence_pack as ep
from keras_bert.evaluation.kinds import token_classification as ner_pack
from keras_bert.evaluation.predictors import ModelInfo
from tests.evaluation.tiny_task import CONLL, NER_TAGS

GOLD = [
    ["B-PER", "I-PER", "O", "B-LOC"],
    ["B-ORG", "I-ORG", "O", "O", "B-PER"],
    ["O", "O"],
    ["B-LOC", "O", "B-MISC"],
]
PRED = [
    ["B-PER", "I-PER", "O", "B-ORG"],  # right; type error
    ["B-ORG", "O", "O", "B-PER", "I-PER"],  # boundary; boundary
    ["B-PER", "O"],  # spurious
    ["O", "O", "B-PER"],  # missed LOC; type error
]


def test_error_kinds_and_counts_on_constructed_tags():
    total, rows = ner_pack.entity_errors(GOLD, PRED)
    assert total == {
        "type": 2,
        "boundary": 2,
        "type_and_boundary": 0,
        "spurious": 1,
        "missed": 1,
    }
    assert rows[0] == {"type": 1, "boundary": 0, "type_and_boundary": 0, "spurious": 0, "missed": 0}
    _, rows = ner_pack.entity_errors([["B-PER", "I-PER", "O"]], [["O", "B-LOC", "I-LOC"]])
    assert rows[0]["type_and_boundary"] == 1 and rows[0]["missed"] == 0
    counts = ner_pack.sentence_counts(GOLD, PRED)
    assert counts.tolist() == [[1, 2, 2], [0, 2, 2], [0, 1, 0], [0, 1, 2]]
    micro = ner_pack.entity_metrics(counts.sum(0))
    assert float(micro["f1"]) == pytest.approx(sm.f1_score(GOLD, PRED))
    assert float(micro["precision"]) == pytest.approx(sm.precision_score(GOLD, PRED))
    assert float(micro["recall"]) == pytest.approx(sm.recall_score(GOLD, PRED))


def test_count_bootstrap_is_seqeval_on_the_same_resamples():
    rng = np.random.default_rng(0)
    gold = [GOLD[i] for i in rng.integers(0, 4, 30)]
    pred_a = [PRED[i % 4] if len(PRED[i % 4]) == len(g) else g for i, g in enumerate(gold)]
    pred_b = list(gold)
    ca, cb = ner_pack.sentence_counts(gold, pred_a), ner_pack.sentence_counts(gold, pred_b)
    out = comparison.count_bootstrap(ca, cb, ner_pack.entity_metrics, samples=40, seed=3)
    assert out["f1"]["a"] == pytest.approx(sm.f1_score(gold, pred_a))
    assert out["f1"]["b"] == 1.0
    idx = np.random.default_rng(3).integers(0, 30, size=(40, 30))
    deltas = [
        sm.f1_score([gold[j] for j in i], [pred_b[j] for j in i])
        - sm.f1_score([gold[j] for j in i], [pred_a[j] for j in i])
        for i in idx
    ]
    assert out["f1"]["ci_low"] == pytest.approx(np.percentile(deltas, 2.5))
    assert out["f1"]["ci_high"] == pytest.approx(np.percentile(deltas, 97.5))


def padded(rows) -> np.ndarray:
    """Lists of str -> bytes [N, W] padded with b"" (as the signature's `tags`)."""
    width = max(len(r) for r in rows)
    return np.asarray([[t.encode() for t in r] + [b""] * (width - len(r)) for r in rows], object)


def test_pack_equals_seqeval_on_the_predicted_tags(tmp_path, uncased_vocab):
    path = tmp_path / "test.txt"
    path.write_text(CONLL)
    vocabulary = uncased_vocab.read_text(encoding="utf-8").split("\n")[:-1]
    info = ModelInfo("tagger", "token_classification", NER_TAGS, False, vocabulary, True, 16)
    data = ner_pack.read_ner_data(str(path), info)
    sentences = read_conll(path)
    gold = [list(s.tags) for s in sentences]  # IOB2, as training reads them
    assert data.reference["tags"] == gold and len(data.examples) == 6
    assert data.inputs == {"text": [" ".join(s.words) for s in sentences]}
    pred = [list(t) for t in gold]
    pred[1] = ["B-PER", "O"]  # boundary
    pred[2] = ["B-PER", "O", "O", "B-ORG", "I-ORG", "O"]  # type
    pred[3] = ["O"] * len(gold[3])  # five missed
    pred[4] = ["B-LOC", "O"]  # spurious
    result = ep.evaluate_outputs(info, "constructed", data, {"tags": padded(pred)})
    assert result.pop("predicted")["shown"] == [" ".join(t) for t in pred]
    assert result["headline"]["f1"] == pytest.approx(sm.f1_score(gold, pred))
    assert result["headline"]["precision"] == pytest.approx(sm.precision_score(gold, pred))
    assert result["headline"]["recall"] == pytest.approx(sm.recall_score(gold, pred))
    assert 0 < result["headline"]["f1"] < 1
    report = sm.classification_report(gold, pred, output_dict=True, zero_division=0)
    assert set(result["per_type"]) == {"LOC", "ORG", "PER"}
    for name, v in result["per_type"].items():
        assert v["f1"] == pytest.approx(report[name]["f1-score"])
        assert v["support"] == report[name]["support"]
    assert result["entity_errors"] == {
        "type": 1,
        "boundary": 1,
        "type_and_boundary": 0,
        "spurious": 1,
        "missed": 5,
    }
    assert [f["guid"] for f in result["failures"]] == [
        "sentence-3",
        "sentence-1",
        "sentence-2",
        "sentence-4",
    ]
    lengths = {r["words"]: (r["sentences"], r["f1"]) for r in result["by_sentence_length"]}
    short = [i for i, s in enumerate(sentences) if len(s.words) <= 5]
    assert lengths["1-5"] == (
        4,
        pytest.approx(sm.f1_score([gold[i] for i in short], [pred[i] for i in short])),
    )
    assert lengths["21-40"] == (1, 0.0) and lengths["6-10"][0] == 1
    assert "weak_segments" in result and "data_health" in result
    assert "label_issues" not in result  # no per-row class probabilities: not applicable
    result["latency"] = {"measured": False, "reason": "constructed predictions"}
    title, blocks = report_sections.evaluation_report(result)
    report_writer.write_report(tmp_path / "report", title, result, blocks)
    md = (tmp_path / "report" / "report.md").read_text()
    assert "Wrong entities by kind" in md and "By sentence length" in md
    with pytest.raises(ep.DataError, match="does not apply to a CoNLL file"):
        ner_pack.read_ner_data(str(path), info, "source")
    with pytest.raises(ep.DataError, match="sentence 1: the model tagged another number"):
        pred[1] = ["B-PER"]
        ep.evaluate_outputs(info, "constructed", data, {"tags": padded(pred)})


def test_word_probabilities_are_the_taggers_own(tmp_path, uncased_vocab):
    """Per-word tag probabilities of a windowed tiny tagger: their argmax is the task's own tags,
    rows sum to 1, one row per word (the long sentence spans several windows)."""
    from tests.evaluation.tiny_task import tiny_tagger

    task = tiny_tagger(uncased_vocab, seed=2)
    path = tmp_path / "test.txt"
    path.write_text(CONLL)
    sentences = [list(s.words) for s in read_conll(path)]
    probs = ner_pack.word_probabilities(task, sentences, batch_size=2)
    tags = task.predict_word_lists(sentences)
    assert [len(p) for p in probs] == [len(w) for w in sentences]
    assert max(len(w) for w in sentences) > 14  # windowed (max_seq_length 16)
    for p, t in zip(probs, tags):
        np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-6)
        assert [NER_TAGS[i] for i in p.argmax(1)] == t
