"""The evidence pack of a `MultipleChoice` task on a SWAG CSV file (SPEC section 9).

Data: the file `keras_bert.data.swag.read_swag` reads for training (header with `sent1`, `sent2`,
`ending0..3`, `label`). Each example goes to the model's `serving_default` as its context
(`sent1`) and its choices (`SwagExample.second_segments`: `sent2`, a space, the ending), exactly
as training packs them. Metrics: accuracy (the chosen ending is the labelled one) overall and per
slice: length in tokens (of the longest choice, `[CLS] context [SEP] choice [SEP]`), truncated
(any choice longer than `max_seq_length`), the right ending's position ("gold label") and
`--slice_column` (a column of the CSV, e.g. SWAG's `gold-source`). The failure catalogue lists
the wrong choices, the most confident first.

Behaviour: the built-in invariance tests (`multiple_choice_invariance`) perturb the context and
keep the endings; a row fails when the chosen ending changes. No template tests: they name a
classifier's labels.
"""

from __future__ import annotations

import numpy as np

from keras_bert.data import text_files
from keras_bert.data.glue import InputExample
from keras_bert.data.swag import read_swag
from keras_bert.evaluation import failure_catalogue as fc
from keras_bert.evaluation.behaviour import INVARIANCE_ROWS, invariance_of
from keras_bert.evaluation.eval_data import DataError, EvalData, token_statistics
from keras_bert.evaluation.kinds.evidence_kind import EvidenceKind, own_format, register
from keras_bert.evaluation.report_writer import Num, Table

# The failure table (`report_sections.failure_table`): (header, failure field, is a number).
FAILURE_COLUMNS = (
    ("row", "row", True),
    ("context", "text", False),
    ("right choice", "gold", False),
    ("chosen", "predicted", False),
    ("confidence", "confidence", True),
    ("P(right)", "gold_probability", True),
)


def read_swag_data(path, info, slice_column=None) -> EvalData:
    """A SWAG CSV file as `EvalData` (`reference`: "examples", "choices" [N][C] str).

    Raises:
        DataError: no such file, missing columns, a bad or missing label, no example, a model
            with another number of choices, or a missing slice column.
    """
    try:
        examples = read_swag(path, require_labels=True)
        slices = None
        if slice_column:
            slices = [e.text_a for e in text_files.read_text_file(path, slice_column, None, None)]
    except (ValueError, FileNotFoundError) as e:
        raise DataError(str(e)) from None
    if not examples:
        raise DataError(f"{path}: no example")
    choices = [e.second_segments() for e in examples]
    wanted = int(info.settings.get("num_choices", len(choices[0])))
    if len(choices[0]) != wanted:
        raise DataError(f"{path}: {len(choices[0])} endings per row, the model takes {wanted}")
    contexts = [e.context for e in examples]
    per_choice = [
        token_statistics(
            info.vocabulary,
            info.do_lower_case,
            info.max_seq_length,
            contexts,
            [c[k] for c in choices],
        )
        for k in range(wanted)
    ]
    lengths = np.stack([p[0] for p in per_choice], 1)  # [N, C]
    longest = lengths.argmax(1)
    rows = np.arange(len(examples))
    unknown = np.stack([p[2] for p in per_choice], 1)[rows, longest]
    gold = np.asarray([e.label for e in examples], np.int64)
    return EvalData(
        str(path),
        [
            InputExample(e.example_id, e.context, choices[i][longest[i]])
            for i, e in enumerate(examples)
        ],
        gold,
        [str(g) for g in gold],
        slices,
        slice_column,
        lengths[rows, longest],
        (lengths > info.max_seq_length).any(1),
        unknown,
        inputs={"context": contexts, "endings": choices},
        reference={"examples": examples, "choices": choices},
    )


def train_texts(path) -> list[str]:
    """A SWAG training file's rows as `EvalData.joined_texts` joins them (for leakage): the
    context, a space, the longest choice."""
    return [f"{e.context} {max(e.second_segments(), key=len)}" for e in read_swag(path)]


def accuracy_of(sums: np.ndarray) -> dict:
    """Accuracy from summed counts [..., 2] (right, examples)."""
    return {"accuracy": sums[..., 0] / sums[..., 1]}


def evaluate_multiple_choice(data: EvalData, outputs: dict, info) -> dict:
    """Multiple-choice outputs (`probabilities` [N, C]) -> accuracy, slices, failures."""
    del info
    probabilities = np.asarray(outputs["probabilities"], np.float64)
    predicted = probabilities.argmax(1)
    correct = predicted == data.gold
    choices = data.reference["choices"]
    columns = fc.slice_columns(
        data.token_lengths, data.truncated, data.gold_names, data.slice_values, data.slice_column
    )
    failures = [
        {
            "row": int(i),
            "guid": data.examples[i].guid,
            "text": data.examples[i].text_a,
            "text_b": None,
            "gold": f"{data.gold[i]}: {choices[i][data.gold[i]]}",
            "predicted": f"{predicted[i]}: {choices[i][predicted[i]]}",
            "confidence": float(probabilities[i, predicted[i]]),
            "gold_probability": float(probabilities[i, data.gold[i]]),
            "tokens": int(data.token_lengths[i]),
            "truncated": bool(data.truncated[i]),
        }
        for i in np.flatnonzero(~correct)
    ]
    failures.sort(key=lambda r: -r["confidence"])
    return {
        "headline": {
            "accuracy": float(correct.mean()),
            "mean_gold_probability": float(
                probabilities[np.arange(len(correct)), data.gold].mean()
            ),
        },
    } | fc.outcome(
        columns,
        correct,
        failures,
        correct[:, None],
        accuracy_of,
        [f"{p}: {c[p]}" for p, c in zip(predicted, choices)],
        [f"{g}: {c[g]}" for g, c in zip(data.gold, choices)],
    )


def multiple_choice_blocks(m: dict) -> list:
    """The error rate per right-ending position (the "gold label" slices), as a reminder of
    position bias; everything else is in the shared sections."""
    rows = [
        [
            s["value"],
            Num(f"slices.{i}.count", s["count"]),
            Num(f"slices.{i}.error_rate", s["error_rate"]),
        ]
        for i, s in enumerate(m["slices"])
        if s["family"] == "gold label"
    ]
    return [
        ("h2", "By position of the right choice"),
        "A model that prefers a position errs less where the right choice sits there.",
        Table(["right choice", "examples", "error rate"], rows),
    ]


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


MULTIPLE_CHOICE = register(
    EvidenceKind(
        "multiple_choice",
        read=own_format(read_swag_data),
        evaluate=evaluate_multiple_choice,
        train_texts=lambda path, columns: train_texts(path),
        sections=(multiple_choice_blocks,),
        failure_columns=lambda m: FAILURE_COLUMNS,
        invariance=multiple_choice_invariance,
    )
)
