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
Other task kinds run the same perturbations through `invariance_of`, which compares any outcome;
each kind's own invariance tests (`kinds.EvidenceKind.invariance`: NER, span QA, multiple choice)
and the choice of which kinds take template tests (classifiers) live in its module under
`kinds/`; `evidence_pack.run_predictor` runs them.
"""

from __future__ import annotations

import itertools
import random
import re

import numpy as np

from keras_bert import fileio

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
