"""One task kind of the evidence pack (`EvidenceKind`) and the registry that finds it by the
`task_type` a model records (`Task.task_type`: "classification", "token_classification", ...).

A kind module builds its `EvidenceKind` and calls `register` on import; `kinds/__init__.py`
imports the built-in ones. Everything of the pack that differs between task kinds is a field
here; `evidence_pack`, `report_sections` and the recipe look the kind up (`kind_of`) and hold no
table of task types.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

# The sentence that opens a failure table (`report_sections.failure_blocks`), {n}: the failures.
WORST_FIRST = "{n} examples with an error, the worst first"


@dataclasses.dataclass(frozen=True)
class Columns:
    """The held-out (or training) text table's columns, as the user named them (flags of
    `recipes/evaluate.py`). A format with a layout of its own (CoNLL, SQuAD JSON, SWAG CSV)
    ignores `text`, `text_b` and `label`."""

    text: str = "text"
    text_b: str | None = None
    label: str = "label"
    slice: str | None = None


@dataclasses.dataclass(frozen=True)
class EvidenceKind:
    """What the evidence pack needs of one task kind.

    Attributes:
        task_type: str, the `Task.task_type` of its models (the registry key).
        read: function(path, info, columns) -> `eval_data.EvalData`: the held-out file checked
            against the model (`predictors.ModelInfo`), `columns` a `Columns`. Raises
            `eval_data.DataError` naming the problem.
        evaluate: function(data, outputs, info) -> dict: the signature's outputs (rows in the
            order of `data`) -> "headline" (metric name -> float), the kind's own sections' keys,
            "slices" (`failure_catalogue.slice_table` rows), "failures" (rows, worst first),
            "predicted" (for `--compare`: numpy [N], or a dict of per-example "counts" [N, K] and
            "metrics_of", see `failure_catalogue.outcome`) and optionally "correct" /
            "probabilities" / "token_probabilities" (for `diagnostics.add_diagnostics`).
        train_texts: function(path, columns) -> list of str: a training file's texts, joined as
            `EvalData.joined_texts` (train / held-out leakage).
        sections: functions(metrics) -> `report_writer` blocks: the kind's report sections,
            between the headline and the shared sections.
        failure_columns: function(metrics) -> the failure table's columns, (header, failure
            field, cell): cell True: a `Num` keyed failures.<i>.<field>; False: the value as it
            is; a function: the value -> the cell (`report_sections.failure_table`).
        failure_title: the sentence opening the failure table, {n} the number of failures.
        regression: whether slices measure a score's mean absolute error (`fc.slice_table`'s
            regression) instead of counting wrong rows.
        invariance: function(predictor, data, rows, seed, batch_size) -> list of results: the
            built-in invariance tests on the first `rows` rows (`behaviour.invariance_of`);
            None: the kind gets no behavioural tests.
        template_tests: function(predictor, tests, batch_size) -> list of results: the kind
            runs `behaviour.read_template_tests`' tests; None: template tests name a
            classifier's labels and do not apply.
        untimed_outputs: function(predictor, data, batch_size) -> dict added to the timed
            outputs before `evaluate` (e.g. NER's per-word tag probabilities); None: nothing.
    """

    task_type: str
    read: Callable
    evaluate: Callable
    train_texts: Callable
    sections: tuple = ()
    failure_columns: Callable = lambda m: ()
    failure_title: str = WORST_FIRST
    regression: bool = False
    invariance: Callable | None = None
    template_tests: Callable | None = None
    untimed_outputs: Callable | None = None


_KINDS: dict[str, EvidenceKind] = {}


def register(kind: EvidenceKind) -> EvidenceKind:
    """Adds `kind` to the registry under its task_type (a later one replaces an earlier one)."""
    _KINDS[kind.task_type] = kind
    return kind


def find(task_type: str) -> EvidenceKind | None:
    """The registered kind of `task_type`, or None."""
    return _KINDS.get(task_type)


def kind_of(task_type: str) -> EvidenceKind:
    """The registered kind of `task_type`.

    Raises:
        ValueError: no kind registered for it (one line naming the known ones).
    """
    kind = find(task_type)
    if kind is None:
        raise ValueError(f"no evaluator for task type {task_type!r}; known: {sorted(_KINDS)}")
    return kind


def own_format(reader: Callable) -> Callable:
    """`EvidenceKind.read` of a `reader(path, info, slice_column)` of a format with a layout of
    its own: the text and label columns do not apply."""
    return lambda path, info, columns: reader(path, info, columns.slice)
