"""Invariance tests of an NER and a multiple-choice model: the shared perturbations on fixed
sentences and contexts, failure rates of rule-based models counted by hand, and of tiny models
against a count through the task's own predict."""

import numpy as np
import pytest

from keras_bert.data.conll import read_conll
from keras_bert.evaluation import behaviour as bh
from keras_bert.evaluation import evidence_pack as ep
from keras_bert.evaluation.predictors import ModelInfo, TaskPredictor
from tests.evaluation.tiny_task import CONLL

SENTENCES = [
    "John lives in New York .",
    "Peter Blackburn",
    "EU rejects German call to boycott British lamb .",
    "the cat sat",
]


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("typo", SENTENCES[0], "Jhon lives in New York ."),
        ("punctuation", SENTENCES[0], "John lives in New York "),  # the "." word removed
        ("punctuation", SENTENCES[1], "Peter Blackburn."),
        ("name swap", SENTENCES[0], "Kenji lives in New York ."),
        ("name swap", SENTENCES[1], SENTENCES[1]),  # Peter is not in NAMES: not tested
        ("casing", SENTENCES[2], "eu rejects german call to boycott british lamb ."),
        ("typo", "Mary opens an umbrella.", "Mray opens an umbrella."),  # a SWAG context
        ("name swap", "Mary opens an umbrella.", "Anna opens an umbrella."),
    ],
)
def test_the_shared_perturbations_on_sentences_and_contexts(name, text, expected):
    assert bh.perturb(name, text, seed=0) == expected


def test_same_entities_compares_spans_and_types_over_the_common_words():
    before = ("B-PER", "O", "O", "B-LOC", "I-LOC", "O")
    assert bh.same_entities(before, before[:5])  # final "." removed
    assert bh.same_entities(before, before + ("O",))
    assert not bh.same_entities(before, ("B-PER", "O", "O", "B-ORG", "I-ORG", "O"))  # type
    assert not bh.same_entities(before, ("B-PER", "O", "O", "B-LOC", "O", "O"))  # boundary
    assert not bh.same_entities(before, ("O",) * 6)
    assert bh.same_entities(("I-PER", "O"), ("B-PER", "O"))  # IOB1 and IOB2 alike
    assert bh.show_entities(before) == "PER 0, LOC 3-4"
    assert bh.show_entities(("O",)) == "no entity"


class RulePredictor:
    """A stand-in predictor: `answer(inputs) -> outputs` on whole batches."""

    def __init__(self, task_type, answer):
        self.info = ModelInfo("rules", task_type, [], False, [], False, 64)
        self.answer = answer

    def run_inputs(self, inputs, batch_size=32, progress=True):
        return self.answer(inputs), None, None


def rule_tags(inputs):
    """A capitalised word is B-PER when in NAMES or "Peter", else B-LOC; others O."""
    rows = [t.split() for t in inputs["text"]]
    width = max(len(r) for r in rows)
    tags = [
        [("B-PER" if w in (*bh.NAMES, "Peter") else "B-LOC") if w[:1].isupper() else "O" for w in r]
        + [""] * (width - len(r))
        for r in rows
    ]
    return {"tags": np.asarray(tags, object), "num_words": np.asarray([len(r) for r in rows])}


def test_ner_failure_rates_equal_a_hand_count():
    data = ep.EvalData("x", [], None, None, None, None, None, None, None, {"text": SENTENCES})
    results = {r["name"]: r for r in bh.ner_invariance(RulePredictor("ner", rule_tags), data)}
    # typo (rows 0-2; "the cat sat" has no word of 4 letters): "Jhon" is not a name (PER ->
    # LOC), "Blackubrn" stays LOC, "byocott" is lower-case: 1 of 3.
    assert (results["typo"]["tested"], results["typo"]["failures"]) == (3, 1)
    assert results["typo"]["examples"][0]["before"] == "PER 0, LOC 3, LOC 4"
    assert results["typo"]["examples"][0]["after"] == "LOC 0, LOC 3, LOC 4"
    # punctuation (all 4): ". " removed or "." glued to the last word: no capital changes.
    assert (results["punctuation"]["tested"], results["punctuation"]["failures"]) == (4, 0)
    # name swap: only row 0 has a name of NAMES; Kenji is one too.
    assert (results["name swap"]["tested"], results["name swap"]["failures"]) == (1, 0)
    # casing: rows 0-2 lower-cased lose every entity; row 3 upper-cased gains three LOC.
    assert results["casing"]["tested"] == 4 and results["casing"]["failure_rate"] == 1.0


def test_multiple_choice_failure_rates_equal_a_hand_count():
    contexts = ["Mary opens an umbrella.", "A man is sitting on a roof.", "It rains"]
    endings = [["a", "b"], ["c", "d"], ["e", "f"]]

    def chooser(inputs):  # ending 1 when the context ends with ".", else ending 0
        chosen = [float(c.endswith(".")) for c in inputs["context"]]
        assert [len(e) for e in inputs["endings"]] == [2] * len(chosen)
        return {"probabilities": np.asarray([[1 - c, c] for c in chosen])}

    data = ep.EvalData(
        "x", [], None, None, None, None, None, None, None, {"context": contexts, "endings": endings}
    )
    results = bh.multiple_choice_invariance(RulePredictor("multiple_choice", chooser), data)
    rates = {r["name"]: (r["tested"], r["failures"]) for r in results}
    # Only punctuation moves the final "." (all 3 rows fail); typo changes rows 0-2, name swap
    # row 0, casing rows 0-2, none of them the "." .
    assert rates == {"typo": (3, 0), "punctuation": (3, 3), "name swap": (1, 0), "casing": (3, 0)}
    assert results[1]["examples"][2] == {
        "row": 2,
        "text": "It rains",
        "perturbed": "It rains.",
        "before": "ending 0",
        "after": "ending 1",
    }


def test_tiny_tagger_failure_rates_equal_a_count_through_the_task(tmp_path, uncased_vocab):
    """The pack's rates of a tiny tagger equal a row-by-row count with the task's own predict
    (another path than the serving signature the pack runs)."""
    from tests.evaluation.tiny_task import tiny_tagger

    conll = tmp_path / "test.txt"
    conll.write_text(CONLL)
    tagger = TaskPredictor(tiny_tagger(uncased_vocab, seed=3), name="tagger")
    data = ep.READERS["token_classification"](str(conll), tagger.info)
    texts = [" ".join(s.words) for s in read_conll(conll)]
    for r in bh.run_predictor(tagger, data, rows=200):
        changed = [t for t in texts if bh.perturb(r["name"], t) != t]
        before = tagger.task.predict_texts(changed)
        after = tagger.task.predict_texts([bh.perturb(r["name"], t) for t in changed])
        failures = sum(not bh.same_entities(b, a) for b, a in zip(before, after))
        assert (r["tested"], r["failures"]) == (len(changed), failures), r["name"]
    assert bh.run_predictor(tagger, data, rows=0) is None
