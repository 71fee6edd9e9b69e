"""Behavioural tests: each perturbation on fixed inputs, template files, and test results with a
keyword model whose failures are known."""

import json

import numpy as np
import pytest

from keras_bert.evaluation import behaviour as bh

LABELS = ["neg", "pos"]


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("typo", "a great film", "a graet film"),
        ("typo", "John loved it, Mary did not.", "John loevd it, Mary did not."),
        ("typo", "Fine!!", "Fnie!!"),
        ("typo", "ok no", "ok no"),  # no word of 4 letters: unchanged, not tested
        ("punctuation", "a great film", "a great film."),
        ("punctuation", "Fine!!", "Fine"),
        ("punctuation", "John loved it, Mary did not.", "John loved it, Mary did not"),
        ("name swap", "John loved it, Mary did not.", "John loved it, Ahmed did not."),
        ("name swap", "a great film", "a great film"),
        ("casing", "John loved it", "john loved it"),
        ("casing", "a great film", "A GREAT FILM"),
    ],
)
def test_perturbations_on_fixed_inputs(name, text, expected):
    assert bh.perturb(name, text, seed=0) == expected
    assert bh.perturb(name, text, seed=0) == expected  # the same every time


def test_another_seed_draws_another_perturbation():
    text = "wonderful acting and a beautiful soundtrack"
    draws = {bh.perturb("typo", text, seed) for seed in range(10)}
    assert len(draws) > 3 and text not in draws


def keyword_model(texts, texts_b=None):
    """pos when 'great' or 'good' is in the text, unless 'not' is; upper-case input flips it; the
    probability of pos falls by 0.1 per 'but'."""
    out = []
    for t in texts:
        low = t.lower()
        pos = any(w in low for w in ("great", "good")) and "not" not in low
        if t.isupper():
            pos = not pos
        p = (0.9 if pos else 0.2) - 0.1 * t.count("but")
        out.append([1 - p, p])
    return np.asarray(out)


def test_invariance_failures_are_the_rows_whose_label_changes():
    texts = ["a great film", "boring", "a good cast", "John was great"]
    results = {r["name"]: r for r in bh.invariance_tests(keyword_model, texts, None, LABELS)}
    # typo: "graet" (row 0) and "John was graet" (row 3) lose the keyword; "boirng" stays neg;
    # "good" swaps "o" with "o": unchanged, so row 2 is not tested.
    typo = results["typo"]
    assert (typo["tested"], typo["failures"]) == (3, 2)
    assert [e["row"] for e in typo["examples"]] == [0, 3]
    assert typo["examples"][0] == {
        "row": 0,
        "text": "a great film",
        "perturbed": "a graet film",
        "before": "pos",
        "after": "neg",
    }
    casing = results["casing"]  # rows 0-2 are upper-cased (the model flips), row 3 lower-cased
    assert (casing["tested"], casing["failures"], casing["failure_rate"]) == (4, 3, 0.75)
    assert (results["punctuation"]["tested"], results["punctuation"]["failures"]) == (4, 0)
    assert (results["name swap"]["tested"], results["name swap"]["failures"]) == (1, 0)


TEMPLATES = [
    {
        "name": "positive adjectives",
        "type": "mft",
        "template": "a {adj} {thing}",
        "fill": {"thing": ["film", "cast"], "adj": ["great", "good", "fine"]},
        "label": "pos",
    },
    {"name": "negation", "type": "mft", "texts": ["not great", "not good"], "label": "neg"},
    {
        "name": "a 'but' lowers pos",
        "type": "dir",
        "texts": ["a great film", "dull"],
        "append": " but long",
        "label": "pos",
        "direction": "down",
    },
    {
        "name": "a 'but' raises pos",
        "type": "dir",
        "texts": ["a great film", "dull"],
        "append": " but long",
        "label": "pos",
        "direction": "up",
        "tolerance": 0.05,
    },
]


def test_template_tests():
    text = "\n".join(json.dumps(t) for t in TEMPLATES) + "\n\n"
    tests = bh.read_template_tests(text, LABELS)
    assert tests[0]["texts"] == [
        "a great film",
        "a great cast",
        "a good film",
        "a good cast",
        "a fine film",
        "a fine cast",
    ]
    results = bh.template_tests(keyword_model, tests, LABELS)
    assert [(r["name"], r["tested"], r["failures"]) for r in results] == [
        ("positive adjectives", 6, 2),  # "fine" is not a keyword
        ("negation", 2, 0),
        ("a 'but' lowers pos", 2, 0),
        ("a 'but' raises pos", 2, 2),  # pos falls by 0.1 > tolerance 0.05
    ]
    assert results[0]["examples"][0] == {
        "text": "a fine film",
        "expected": "pos",
        "predicted": "neg",
    }
    ex = results[3]["examples"][0]
    assert (ex["perturbed"], ex["before"], ex["after"]) == (
        "a great film but long",
        pytest.approx(0.9),
        pytest.approx(0.8),
    )


@pytest.mark.parametrize(
    "line, message",
    [
        ("[1]", "tests.jsonl line 1: expected a JSON object"),
        ('{"type": "inv", "label": "pos", "texts": ["x"]}', '"type" must be "mft" or "dir"'),
        ('{"type": "mft", "label": "good", "texts": ["x"]}', "label 'good' is not one of"),
        ('{"type": "mft", "label": "pos"}', 'give "texts" or "template"'),
        ('{"type": "mft", "label": "pos", "template": "a {x}"}', "field(s) ['x'] have no values"),
        ('{"type": "dir", "label": "pos", "texts": ["x"], "direction": "up"}', "needs"),
        ('{"type": "mft", "label": "pos", "texts": ["x"], "colour": 1}', "unknown field(s)"),
        # Found by tests/test_fileio_readers.py's fuzzing: format errors, not one line naming it.
        (
            '{"type": "mft", "label": "pos", "template": "a {x} }", "fill": {"x": ["y"]}}',
            "\"template\" 'a {x} }' holds braces that are not a {field} (Single '}' encountered",
        ),
        (
            '{"type": "mft", "label": "pos", "template": "a {x\ufeff}", "fill": {}}',
            "holds braces that are not a {field} ('x\\ufeff')",
        ),
        ('{"type": "mft", "label": "pos", "template": "a {x}", "fill": ["x"]}', '"fill" must map'),
        (
            '{"type": "mft", "label": "pos", "template": "a {x}", "fill": {"x": "ab"}}',
            '"fill" must',
        ),
        (
            '{"type": "dir", "label": "pos", "texts": ["x"], "direction": "up", "append": "!", '
            '"tolerance": "0.1"}',
            "\"tolerance\" must be a number, got '0.1'",
        ),
        ("[" * 5000 + "]" * 5000, "not JSON: arrays or objects nested deeper than 100 levels"),
    ],
)
def test_bad_template_lines(line, message):
    with pytest.raises(bh.BehaviourError) as e:
        bh.read_template_tests(line, LABELS, "tests.jsonl")
    assert message in str(e.value) and str(e.value).startswith("tests.jsonl line 1: ")


def test_compare_says_which_model_fails():
    a = [bh._result("t1", "mft", 4, [{}]), bh._result("t2", "mft", 4, [])]
    b = [bh._result("t1", "mft", 4, []), bh._result("t2", "mft", 4, [{}, {}])]
    rows = bh.compare_behaviour(a, b)
    assert [(r["name"], r["failure_rate_a"], r["failure_rate_b"], r["fails"]) for r in rows] == [
        ("t1", 0.25, 0.0, "A"),
        ("t2", 0.0, 0.5, "B"),
    ]
