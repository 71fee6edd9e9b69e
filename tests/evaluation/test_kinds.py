"""The task-kind registry: a made-up task kind, written in one file's worth of code (below), is
read, scored and reported by the pack through `kinds.kind_of` alone; an unknown task type is the
pack's one-line error."""

import types

import numpy as np
import pytest

from keras_bert import fileio
from keras_bert.data.glue import InputExample
from keras_bert.evaluation import evidence_pack as ep
from keras_bert.evaluation import failure_catalogue as fc
from keras_bert.evaluation import kinds, report_sections, report_writer
from keras_bert.evaluation.kinds import evidence_kind
from keras_bert.evaluation.predictors import ModelInfo

# --- a toy task kind: is each word a palindrome? A held-out line is "word<TAB>yes|no". ---


def read_words(path, info, columns):
    rows = [line.split("\t") for line in fileio.text_lines(fileio.read_user_text(path))]
    lengths = np.full(len(rows), 3, np.int64)  # [CLS] word [SEP]
    return ep.EvalData(
        path,
        [InputExample(f"word-{i}", word) for i, (word, _) in enumerate(rows)],
        np.asarray([said == "yes" for _, said in rows]),
        None,
        None,
        None,
        lengths,
        np.zeros(len(rows), bool),
        inputs={"word": [word for word, _ in rows]},
    )


def score_words(data, outputs, info):
    said = np.asarray(outputs["palindrome"], bool)
    wrong = said != data.gold
    columns = fc.slice_columns(data.token_lengths, data.truncated, None)
    failures = [
        {"row": int(i), "text": data.texts[i], "said": "yes" if said[i] else "no"}
        for i in np.flatnonzero(wrong)
    ]
    return {
        "headline": {"accuracy": float(1 - wrong.mean())},
        "slices": fc.slice_table(columns, wrong),
        "failures": failures,
        "predicted": said,
    }


def toy_blocks(m):
    return [("h2", "Palindromes"), f"{m['headline']['accuracy']:.2f} of the words judged right."]


TOY = evidence_kind.EvidenceKind(
    "palindrome_detection",
    read=read_words,
    evaluate=score_words,
    train_texts=lambda path, columns: read_words(path, None, columns).texts,
    sections=(toy_blocks,),
    failure_columns=lambda m: (
        ("row", "row", True),
        ("word", "text", False),
        ("said", "said", False),
    ),
    failure_title="words judged wrong: {n}",
)

# --- end of the toy kind ---

INFO = ModelInfo("toy", "palindrome_detection", [], False, [], True, 16)
KNOWN = [
    "classification",
    "multiple_choice",
    "regression",
    "span_question_answering",
    "token_classification",
]


@pytest.fixture
def toy(monkeypatch):
    """TOY registered for one test (the registry is restored after it)."""
    monkeypatch.setattr(evidence_kind, "_KINDS", dict(evidence_kind._KINDS))
    return kinds.register(TOY)


def test_the_builtin_kinds_are_registered_by_their_task_types():
    assert [kinds.kind_of(t).task_type for t in KNOWN] == KNOWN


def test_a_registered_kind_is_read_scored_and_reported_through_the_registry(toy, tmp_path):
    path = tmp_path / "words.tsv"
    path.write_text("level\tyes\nabc\tno\nnoon\tyes\nxyz\tno\n")
    assert kinds.kind_of("palindrome_detection") is toy
    data = ep.read_data(str(path), INFO)
    assert data.inputs == {"word": ["level", "abc", "noon", "xyz"]}
    m = ep.evaluate_outputs(INFO, "toy.model", data, {"palindrome": [True, True, True, False]})
    assert m["headline"] == {"accuracy": 0.75}
    assert m["failures"] == [{"row": 1, "text": "abc", "said": "yes"}]
    m["latency"] = {"measured": False, "reason": "a toy"}
    markdown = report_writer.to_markdown(*report_sections.evaluation_report(m))
    assert "## Palindromes\n\n0.75 of the words judged right.\n" in markdown
    assert (
        "### Failures\n\nwords judged wrong: 1.\n\n| row | word | said |\n|---|---|---|\n| 1 | abc | yes |\n"
        in markdown
    )
    assert ep.template_tests_refusal("palindrome_detection") == (
        "template tests name a classifier's labels; a palindrome_detection model gets no "
        "behavioural tests"
    )
    assert ep.run_predictor(types.SimpleNamespace(info=INFO), data) is None
    assert ep.train_texts(str(path), "palindrome_detection") == ["level", "abc", "noon", "xyz"]


def test_an_unknown_task_type_is_one_line_naming_the_known_kinds(tmp_path):
    message = f"no evaluator for task type 'palindrome_detection'; known: {KNOWN}"
    with pytest.raises(ValueError) as e:
        kinds.kind_of("palindrome_detection")
    assert str(e.value) == message
    with pytest.raises(ValueError) as e:
        ep.read_data(str(tmp_path / "words.tsv"), INFO)
    assert str(e.value) == message
