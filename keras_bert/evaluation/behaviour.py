"""Behavioural tests of a text model (Ribeiro et al. 2020, "Beyond Accuracy: Behavioral Testing
of NLP Models with CheckList", ACL): invariance, minimum functionality and directional tests.

Built-in invariance tests (`PERTURBATIONS`) perturb held-out texts in ways that should not change
the prediction; a row fails when the predicted label changes. Each is a function of the text and
a `random.Random` seeded by (seed, text), so the same text always gets the same perturbation:

- `typo`: two adjacent inner letters of one word of >= 4 letters swapped ("great" -> "graet");
- `punctuation`: trailing . ! ? removed, or a final "." added when there is none;
- `name swap`: a first name from NAMES replaced by another one from NAMES;
- `casing`: lower-cased (upper-cased when the text has no upper-case letter).
A row whose text the perturbation leaves unchanged (no name, no long word) is not tested.

Template tests come from a JSONL file, one test per line (docs/evaluation.md has a worked example):

    {"name": "...", "type": "mft", "template": "I {verb} the {thing}.",
     "fill": {"verb": ["love", "like"], "thing": ["film", "cast"]}, "label": "pos"}
    {"name": "...", "type": "dir", "texts": ["a fine film"], "append": " The ending was awful.",
     "label": "pos", "direction": "down", "tolerance": 0.05}

`texts` lists the inputs, or `template` + `fill` expands to every combination (keys in sorted
order, values in the given order); `text_b` (optional) is the second segment of a pair model.
- `mft` (minimum functionality): each input must be predicted as `label`.
- `dir` (directional): the probability of `label` must move in `direction` ("up" / "down") when
  `prepend` / `append` is added; a row fails when it moves the other way by more than `tolerance`
  (default 0).

Family-independent in form: a test needs a `predict(texts, texts_b) -> probabilities [N, C]`.
Other families (`FAMILY_INVARIANCE`) run the same perturbations through `invariance_of`, which
compares any outcome: NER (`ner_invariance`) perturbs each sentence (words joined by a space) and
a row fails when the predicted entities change (spans and types over the words both taggings
have, `same_entities`); multiple choice (`multiple_choice_invariance`) perturbs the context, keeps
the endings, and a row fails when the chosen ending changes; span QA (`span_qa_invariance`)
perturbs the question, keeps the context, and a row fails when the answer text changes (no name
swap there: it would change what is asked). Template tests are for classifiers.
"""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
from seqeval.metrics.sequence_labeling import get_entities

from keras_bert import fileio
from keras_bert.data.conll import to_iob2

NAMES = (
    "John Mary James Anna Michael Sarah David Emma Robert Laura Maria Ahmed Wei Priya Carlos "
    "Fatima Olga Kenji Amara Lucas"
).split()
EXAMPLE_ROWS = 5
INVARIANCE_ROWS = 200
TEMPLATE_FIELDS = {
    "name",
    "type",
    "texts",
    "template",
    "fill",
    "text_b",
    "label",
    "prepend",
    "append",
    "direction",
    "tolerance",
}


class BehaviourError(ValueError):
    """A template test file that cannot be used (one line naming the problem)."""


def typo(text: str, rng: random.Random) -> str:
    words = [m for m in re.finditer(r"[^\W\d_]{4,}", text)]
    if not words:
        return text
    word = rng.choice(words)
    j = rng.randrange(word.start() + 1, word.end() - 2)  # inner letters only
    return text[:j] + text[j + 1] + text[j] + text[j + 2 :]


def punctuation(text: str, rng: random.Random) -> str:
    stripped = text.rstrip()
    bare = stripped.rstrip(".!?")
    return bare if bare != stripped else stripped + "."


def name_swap(text: str, rng: random.Random) -> str:
    found = [m for m in re.finditer(r"\b[A-Z][a-z]+\b", text) if m.group() in NAMES]
    if not found:
        return text
    m = rng.choice(found)
    other = rng.choice([n for n in NAMES if n != m.group()])
    return text[: m.start()] + other + text[m.end() :]


def casing(text: str, rng: random.Random) -> str:
    return text.lower() if text != text.lower() else text.upper()


PERTURBATIONS = {"typo": typo, "punctuation": punctuation, "name swap": name_swap, "casing": casing}


def perturb(name: str, text: str, seed: int = 0) -> str:
    """PERTURBATIONS[name] of `text`, with a generator seeded by (seed, text)."""
    return PERTURBATIONS[name](text, random.Random(f"{seed}\0{text}"))


def read_template_file(path: str, label_names) -> list[dict]:
    """`read_template_tests` of a template file (`keras_bert.fileio.read_user_text`: UTF-8, a
    byte-order mark dropped).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not UTF-8 (`fileio.UserFileError`); BehaviourError as `read_template_tests`.
    """
    return read_template_tests(fileio.read_user_text(path), label_names, path)


def read_template_tests(text: str, label_names, where: str = "tests") -> list[dict]:
    """The tests of a JSONL template file's text, expanded: [{"name", "type", "texts", "text_b",
    "label" (id), ...}]. Lines end at "\n" only (`keras_bert.fileio.jsonl_lines`).

    Raises:
        BehaviourError: a line that is not a JSON object, an unknown field or type, a label not
            among `label_names`, no inputs, a template field without values, a `dir` test without
            `prepend` / `append` or with a direction other than up / down.
    """
    tests = []
    for number, line in fileio.jsonl_lines(text):
        at = f"{where} line {number}"
        try:
            spec = fileio.parse_json(line, at)
        except fileio.UserFileError as e:
            raise BehaviourError(str(e)) from None
        if not isinstance(spec, dict):
            raise BehaviourError(f"{at}: expected a JSON object")
        unknown = set(spec) - TEMPLATE_FIELDS
        if unknown:
            raise BehaviourError(f"{at}: unknown field(s) {sorted(unknown)}")
        kind = spec.get("type")
        if kind not in ("mft", "dir"):
            raise BehaviourError(f'{at}: "type" must be "mft" or "dir", got {kind!r}')
        if spec.get("label") not in label_names:
            raise BehaviourError(
                f"{at}: label {spec.get('label')!r} is not one of the model's {list(label_names)}"
            )
        texts = _inputs(spec, at)
        test = {
            "name": str(spec.get("name") or f"{kind} line {number}"),
            "type": kind,
            "texts": texts,
            "text_b": spec.get("text_b"),
            "label": list(label_names).index(spec["label"]),
        }
        if kind == "dir":
            if spec.get("direction") not in ("up", "down"):
                raise BehaviourError(f'{at}: "direction" must be "up" or "down"')
            if not spec.get("prepend") and not spec.get("append"):
                raise BehaviourError(f'{at}: a "dir" test needs "prepend" or "append"')
            test.update(
                prepend=spec.get("prepend", ""),
                append=spec.get("append", ""),
                direction=spec["direction"],
                tolerance=_tolerance(spec.get("tolerance", 0.0), at),
            )
        tests.append(test)
    if not tests:
        raise BehaviourError(f"{where}: no tests")
    return tests


def _tolerance(value, at: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BehaviourError(f'{at}: "tolerance" must be a number, got {value!r}')
    return float(value)


def _inputs(spec: dict, at: str) -> list[str]:
    if "texts" in spec:
        texts = spec["texts"]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise BehaviourError(f'{at}: "texts" must be a non-empty list of strings')
        return texts
    template, fill = spec.get("template"), spec.get("fill") or {}
    if not isinstance(template, str):
        raise BehaviourError(f'{at}: give "texts" or "template" (with "fill")')
    if not isinstance(fill, dict):
        raise BehaviourError(f'{at}: "fill" must map each template field to a list of strings')
    keys = sorted(set(re.findall(r"{(\w+)}", template)))
    missing = [k for k in keys if not fill.get(k)]
    if missing:
        raise BehaviourError(f'{at}: template field(s) {missing} have no values in "fill"')
    if not all(
        isinstance(fill[k], list) and all(isinstance(v, str) for v in fill[k]) for k in keys
    ):
        raise BehaviourError(f'{at}: "fill" must map each template field to a list of strings')
    try:
        return [
            template.format(**dict(zip(keys, values)))
            for values in itertools.product(*(fill[k] for k in keys))
        ]
    except (KeyError, IndexError, ValueError) as e:  # braces that are not {field}
        raise BehaviourError(
            f'{at}: "template" {template!r} holds braces that are not a {{field}} ({e})'
        ) from None


def _result(name, kind, tested, failed_rows) -> dict:
    return {
        "name": name,
        "type": kind,
        "tested": int(tested),
        "failures": len(failed_rows),
        "failure_rate": len(failed_rows) / tested if tested else None,
        "examples": failed_rows[:EXAMPLE_ROWS],
    }


def invariance_of(
    predict, texts, seed: int = 0, same=None, show=str, perturbations=tuple(PERTURBATIONS)
) -> list[dict]:
    """Every built-in perturbation on `texts`, for a model of any family.

    Args:
        predict: function(rows, texts) -> one outcome per text (the model's answer for the
            `texts` standing in for the data rows `rows`; the caller adds the rest of each row's
            input, e.g. its text_b or its endings).
        texts: the texts perturbed.
        same: function(before, after) -> bool, whether two outcomes agree (default ==).
        show: function(outcome) -> str, for the failing examples.
        perturbations: the names of the PERTURBATIONS run (default all), in that order.

    Returns:
        per perturbation, {"name", "type": "invariance", "tested", "failures", "failure_rate",
        "examples"}: rows the perturbation changes are tested; a row fails when its outcome does
        not stay the same.
    """
    same = same or (lambda a, b: a == b)
    base = predict(list(range(len(texts))), list(texts))
    results = []
    for name in perturbations:
        changed = [i for i, t in enumerate(texts) if perturb(name, t, seed) != t]
        failed = []
        if changed:
            new_texts = [perturb(name, texts[i], seed) for i in changed]
            after = predict(changed, new_texts)
            failed = [
                {
                    "row": int(i),
                    "text": texts[i],
                    "perturbed": t,
                    "before": show(base[i]),
                    "after": show(a),
                }
                for i, t, a in zip(changed, new_texts, after)
                if not same(base[i], a)
            ]
        results.append(_result(name, "invariance", len(changed), failed))
    return results


def invariance_tests(predict, texts, texts_b, label_names, seed: int = 0) -> list[dict]:
    """Every built-in perturbation on `texts` (text_b kept): rows whose predicted label changes."""

    def labels(rows, new_texts):
        b = None if texts_b is None else [texts_b[i] for i in rows]
        return [label_names[k] for k in np.asarray(predict(new_texts, b)).argmax(1)]

    return invariance_of(labels, texts, seed)


def template_tests(predict, tests, label_names) -> list[dict]:
    """Results of `read_template_tests`' tests."""
    results = []
    for test in tests:
        texts = test["texts"]
        texts_b = None if test["text_b"] is None else [test["text_b"]] * len(texts)
        probs = np.asarray(predict(texts, texts_b))
        label = test["label"]
        if test["type"] == "mft":
            failed = [
                {"text": t, "expected": label_names[label], "predicted": label_names[p]}
                for t, p in zip(texts, probs.argmax(1))
                if p != label
            ]
        else:
            changed = [test["prepend"] + t + test["append"] for t in texts]
            after = np.asarray(predict(changed, texts_b))[:, label]
            move = after - probs[:, label]
            wrong = (
                move < -test["tolerance"] if test["direction"] == "up" else move > test["tolerance"]
            )
            failed = [
                {"text": t, "perturbed": c, "before": float(b), "after": float(a)}
                for t, c, b, a, w in zip(texts, changed, probs[:, label], after, wrong)
                if w
            ]
        results.append(_result(test["name"], test["type"], len(texts), failed))
    return results


def run_behaviour(predict, texts, texts_b, label_names, tests=None, rows=INVARIANCE_ROWS, seed=0):
    """Built-in invariance tests on the first `rows` texts (none when rows is 0) and the
    template `tests`: a list of {"name", "type", "tested", "failures", "failure_rate",
    "examples"}."""
    results = []
    if rows > 0 and texts:
        b = None if texts_b is None else texts_b[:rows]
        results += invariance_tests(predict, texts[:rows], b, label_names, seed)
    return results + template_tests(predict, tests or [], label_names)


def entity_spans(tags) -> list:
    """(type, first word, last word) of each entity of a tag sequence (IOB1 or IOB2)."""
    return get_entities(to_iob2(list(tags)))


def same_entities(before, after) -> bool:
    """Whether two taggings of a sentence and its perturbation hold the same entities (spans and
    types) over the words both have (removing or adding a final "." changes the word count)."""
    n = min(len(before), len(after))
    return entity_spans(before[:n]) == entity_spans(after[:n])


def show_entities(tags) -> str:
    """ "PER 0-1, LOC 4" (type, word span), or "no entity"."""
    spans = [f"{k} {s}" if s == e else f"{k} {s}-{e}" for k, s, e in entity_spans(tags)]
    return ", ".join(spans) or "no entity"


def ner_invariance(predictor, data, rows=INVARIANCE_ROWS, seed=0, batch_size=32) -> list[dict]:
    """`invariance_of` a tagger on the first `rows` sentences: a row fails when the predicted
    entities (spans and types, `same_entities`) change."""

    def tags(_, texts):
        out = predictor.run_inputs({"text": texts}, batch_size, progress=False)[0]
        return [
            tuple(t.decode() if isinstance(t, bytes) else str(t) for t in row[:n])
            for row, n in zip(out["tags"], out["num_words"])
        ]

    return invariance_of(tags, data.inputs["text"][:rows], seed, same_entities, show_entities)


def multiple_choice_invariance(
    predictor, data, rows=INVARIANCE_ROWS, seed=0, batch_size=32
) -> list[dict]:
    """`invariance_of` a multiple-choice model on the first `rows` contexts (the endings kept): a
    row fails when the chosen ending changes."""
    endings = data.inputs["endings"]

    def chosen(rows_, contexts):
        inputs = {"context": contexts, "endings": [endings[i] for i in rows_]}
        out = predictor.run_inputs(inputs, batch_size, progress=False)[0]
        return [int(k) for k in np.asarray(out["probabilities"]).argmax(1)]

    return invariance_of(chosen, data.inputs["context"][:rows], seed, show=lambda k: f"ending {k}")


def span_qa_invariance(predictor, data, rows=INVARIANCE_ROWS, seed=0, batch_size=32) -> list[dict]:
    """`invariance_of` a span QA model on the first `rows` questions (the contexts kept): a row
    fails when the answer text changes (an answer becoming "no answer" included). "name swap" is
    not run: a name changed in the question alone changes what is asked."""
    contexts = data.inputs["context"]

    def answers(rows_, questions):
        inputs = {"question": questions, "context": [contexts[i] for i in rows_]}
        out = predictor.run_inputs(inputs, batch_size, progress=False)[0]
        return [t.decode() if isinstance(t, bytes) else str(t) for t in out["answer_text"]]

    return invariance_of(
        answers,
        data.inputs["question"][:rows],
        seed,
        show=lambda a: repr(a) if a else "no answer",
        perturbations=[n for n in PERTURBATIONS if n != "name swap"],
    )


# task_type -> invariance tests of a predictor on an EvalData (no template tests: they name a
# classifier's labels).
FAMILY_INVARIANCE = {
    "token_classification": ner_invariance,
    "multiple_choice": multiple_choice_invariance,
    "span_question_answering": span_qa_invariance,
}


def template_tests_refusal(task_type: str) -> str | None:
    """Why a model of `task_type` takes no template tests (None: a classifier, which does)."""
    if task_type == "classification":
        return None
    gets = (
        "the built-in invariance tests only (--invariance_rows)"
        if task_type in FAMILY_INVARIANCE
        else "no behavioural tests"
    )
    return f"template tests name a classifier's labels; a {task_type} model gets {gets}"


def run_predictor(predictor, data, tests=None, rows=INVARIANCE_ROWS, seed=0, batch_size=32):
    """`run_behaviour` of a classifier `predictor` (`predictors.Predictor`) on an
    `evidence_pack.EvalData`; the invariance tests of an NER, span QA or multiple-choice model
    (`FAMILY_INVARIANCE`, with rows > 0); None for other models."""
    kind = predictor.info.task_type
    if kind in FAMILY_INVARIANCE:
        return FAMILY_INVARIANCE[kind](predictor, data, rows, seed, batch_size) if rows else None
    if kind != "classification":
        return None

    def predict(texts, texts_b):
        return predictor.run(texts, texts_b, batch_size, progress=False)[0]["probabilities"]

    return run_behaviour(
        predict, data.texts, data.texts_b, predictor.info.label_names, tests, rows, seed
    )


def compare_behaviour(a: list[dict], b: list[dict]) -> list[dict]:
    """Per test: both models' failure rates and which fails ("A", "B", "both", "neither")."""
    rows = []
    for ra, rb in zip(a, b):
        fails = {(True, True): "both", (True, False): "A", (False, True): "B"}
        rows.append(
            {
                "name": ra["name"],
                "type": ra["type"],
                "tested": ra["tested"],
                "failure_rate_a": ra["failure_rate"],
                "failure_rate_b": rb["failure_rate"],
                "fails": fails.get((ra["failures"] > 0, rb["failures"] > 0), "neither"),
            }
        )
    return rows
