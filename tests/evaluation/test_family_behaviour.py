"""Invariance tests of an NER, a multiple-choice and a span QA model: the shared perturbations on
fixed sentences and contexts, failure rates of rule-based models counted by hand, and of tiny models
against a count through the task's own predict."""

import numpy as np
import pytest

from keras_bert.data.conll import read_conll
from keras_bert.evaluation import behaviour as bh
from keras_bert.evaluation import evidence_pack as ep
from keras_bert.evaluation.kinds import multiple_choice as mc
from keras_bert.evaluation.kinds import span_question_answering as sqa
from keras_bert.evaluation.kinds import token_classification as tc
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
    assert tc.same_entities(before, before[:5])  # final "." removed
    assert tc.same_entities(before, before + ("O",))
    assert not tc.same_entities(before, ("B-PER", "O", "O", "B-ORG", "I-ORG", "O"))  # type
    assert not tc.same_entities(before, ("B-PER", "O", "O", "B-LOC", "O", "O"))  # boundary
    assert not tc.same_entities(before, ("O",) * 6)
    assert tc.same_entities(("I-PER", "O"), ("B-PER", "O"))  # IOB1 and IOB2 alike
    assert tc.show_entities(before) == "PER 0, LOC 3-4"
    assert tc.show_entities(("O",)) == "no entity"


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
    results = {r["name"]: r for r in tc.ner_invariance(RulePredictor("ner", rule_tags), data)}
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
    results = mc.multiple_choice_invariance(RulePredictor("multiple_choice", chooser), data)
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


def test_span_qa_failure_rates_equal_a_hand_count():
    questions = ["who wrote in 1843 ?", "when was the tower built ?", "Where is it"]
    contexts = ["Ada Lovelace wrote", "the Eiffel tower was built in 1889", "in Paris"]

    def answerer(inputs):  # "" unless the question ends with "?"; then the context's first
        # word for a lower-case question, its last word for another
        texts = [
            "" if not q.endswith("?") else (c.split()[0] if q[0].islower() else c.split()[-1])
            for q, c in zip(inputs["question"], inputs["context"])
        ]
        return {"answer_text": np.asarray([t.encode() for t in texts], object)}

    data = ep.EvalData(
        "x",
        [],
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        {"question": questions, "context": contexts},
    )
    results = sqa.span_qa_invariance(RulePredictor("span_question_answering", answerer), data)
    rates = {r["name"]: (r["tested"], r["failures"]) for r in results}
    # typo keeps the first letter and the "?" (every question has a word of 4 letters): no
    # change; punctuation removes the "?" of rows 0-1 (answer -> "") and gives row 2 a "." (still
    # no answer); casing upper-cases rows 0-1 (first word -> last word) and lower-cases row 2 (no
    # "?": no answer either way). No name swap: it would change what is asked.
    assert rates == {"typo": (3, 0), "punctuation": (3, 2), "casing": (3, 2)}
    assert results[1]["examples"][0] == {
        "row": 0,
        "text": "who wrote in 1843 ?",
        "perturbed": "who wrote in 1843 ",
        "before": "'Ada'",
        "after": "no answer",
    }
    assert results[2]["examples"][1]["after"] == "'1889'"


def test_tiny_tagger_failure_rates_equal_a_count_through_the_task(tmp_path, uncased_vocab):
    """The pack's rates of a tiny tagger equal a row-by-row count with the task's own predict
    (another path than the serving signature the pack runs)."""
    from tests.evaluation.tiny_task import tiny_tagger

    conll = tmp_path / "test.txt"
    conll.write_text(CONLL)
    tagger = TaskPredictor(tiny_tagger(uncased_vocab, seed=3), name="tagger")
    data = tc.read_ner_data(str(conll), tagger.info)
    texts = [" ".join(s.words) for s in read_conll(conll)]
    for r in ep.run_predictor(tagger, data, rows=200):
        changed = [t for t in texts if bh.perturb(r["name"], t) != t]
        before = tagger.task.predict_texts(changed)
        after = tagger.task.predict_texts([bh.perturb(r["name"], t) for t in changed])
        failures = sum(not tc.same_entities(b, a) for b, a in zip(before, after))
        assert (r["tested"], r["failures"]) == (len(changed), failures), r["name"]
    assert ep.run_predictor(tagger, data, rows=0) is None


def test_tiny_reader_failure_rates_equal_a_count_through_the_task(tmp_path, uncased_vocab):
    """The pack's rates of a tiny span QA model equal a row-by-row count with the task's own
    predict_texts (another path than the serving signature the pack runs)."""
    import json

    from tests.evaluation.tiny_task import squad_json, tiny_reader

    path = tmp_path / "dev.json"
    path.write_text(json.dumps(squad_json(version_2=True)))
    reader = TaskPredictor(tiny_reader(uncased_vocab, seed=3), name="reader")
    data = sqa.read_squad_data(str(path), reader.info)
    questions, contexts = data.inputs["question"], data.inputs["context"]
    results = ep.run_predictor(reader, data, rows=200)
    assert [r["name"] for r in results] == ["typo", "punctuation", "casing"]
    for r in results:
        rows = [i for i, q in enumerate(questions) if bh.perturb(r["name"], q) != q]
        cut = [contexts[i] for i in rows]
        before = reader.task.predict_texts([questions[i] for i in rows], cut)
        after = reader.task.predict_texts([bh.perturb(r["name"], questions[i]) for i in rows], cut)
        failures = sum(b["answer_text"] != a["answer_text"] for b, a in zip(before, after))
        assert (r["tested"], r["failures"]) == (len(rows), failures), r["name"]
    assert sum(r["failures"] for r in results) > 0  # the random reader's answers do move


@pytest.mark.parametrize(
    "task_type, gets",
    [
        ("token_classification", "the built-in invariance tests only (--invariance_rows)"),
        ("span_question_answering", "the built-in invariance tests only (--invariance_rows)"),
        ("multiple_choice", "the built-in invariance tests only (--invariance_rows)"),
        ("regression", "no behavioural tests"),
    ],
)
def test_template_tests_are_refused_for_other_families_with_what_they_get(task_type, gets):
    assert ep.template_tests_refusal("classification") is None
    assert ep.template_tests_refusal(task_type) == (
        f"template tests name a classifier's labels; a {task_type} model gets {gets}"
    )
