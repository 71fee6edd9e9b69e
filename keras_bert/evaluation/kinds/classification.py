"""The evidence pack of a `TextClassifier` on a CSV / TSV / JSONL file (SPEC section 9): two
task kinds, "classification" (num_classes > 1) and "regression" (num_classes == 1), as
`TextClassifier.task_type` decides.

`read_eval_data` reads the file (`keras_bert.data.text_files`) and maps its labels through the
model's own label names (`keras_bert.data.labels`: names or ids, never a mix; a regressor's
labels are floats). Classification: precision / recall / F1 per class, confusion matrix,
calibration (`classification_report`), error rates per slice, misclassified examples (the most
confident first), behavioural tests (built-in invariance and template tests, `behaviour`).
Regression: Pearson, Spearman, mean squared and absolute error; mean absolute error per slice;
the largest errors first.
"""

from __future__ import annotations

import functools

import numpy as np

from keras_bert.data import text_files
from keras_bert.data.labels import LabelError, label_ids
from keras_bert.evaluation import behaviour, data_health
from keras_bert.evaluation import classification_report as cr
from keras_bert.evaluation import failure_catalogue as fc
from keras_bert.evaluation.eval_data import DataError, EvalData, token_statistics
from keras_bert.evaluation.kinds.evidence_kind import EvidenceKind, register
from keras_bert.evaluation.report_writer import (
    Figure,
    Num,
    Table,
    confusion_figure,
    fmt,
    reliability_figure,
)

MACRO_LEGEND = (
    "support: gold examples of the class; macro avg: the mean over the classes that occur in the "
    "gold labels or the predictions (scikit-learn's rule), so a class in neither (support 0, "
    "never predicted) is listed but not averaged; weighted avg: the mean weighted by support."
)


def read_eval_data(
    path, info, text_column="text", text_b_column=None, label_column="label", slice_column=None
) -> EvalData:
    """The held-out file, checked against the model (`predictors.ModelInfo`).

    Raises:
        DataError: missing file / column (naming the columns present), empty file, a pair model
            without `text_b_column`, or labels that break `keras_bert.data.labels`' rule (a mix
            of names and ids, an unknown name, an id out of range), naming the data row.
    """
    regression = info.task_type == "regression"
    if info.is_pair and not text_b_column:
        raise DataError(f"model {info.name} is a pair task: give --text_b_column")
    if not info.is_pair and text_b_column:
        raise DataError(
            f"model {info.name} takes one text; --text_b_column={text_b_column} does not apply"
        )
    try:
        examples = text_files.read_text_file(
            path, text_column, text_b_column, label_column, regression=regression
        )
        slices = None
        if slice_column:
            slices = [e.text_a for e in text_files.read_text_file(path, slice_column, None, None)]
    except (ValueError, FileNotFoundError) as e:
        raise DataError(str(e)) from None
    if regression:
        gold, gold_names = np.asarray([e.label for e in examples], np.float64), None
    else:
        try:
            gold = label_ids([e.label for e in examples], info.label_names, str(path))
        except LabelError as e:
            raise DataError(str(e)) from None
        gold_names = [info.label_names[i] for i in gold]
    texts_b = None if text_b_column is None else [e.text_b for e in examples]
    lengths, truncated, unknown = token_statistics(
        info.vocabulary,
        info.do_lower_case,
        info.max_seq_length,
        [e.text_a for e in examples],
        texts_b,
    )
    return EvalData(
        str(path), examples, gold, gold_names, slices, slice_column, lengths, truncated, unknown
    )


def _slices(data: EvalData, gold_names) -> dict:
    return fc.slice_columns(
        data.token_lengths, data.truncated, gold_names, data.slice_values, data.slice_column
    )


def evaluate_classification(data: EvalData, outputs: dict, info) -> dict:
    """Classifier outputs (`probabilities` [N, C]) -> metrics, slices and failure catalogue."""
    probabilities = np.asarray(outputs["probabilities"], np.float64)
    result = cr.classification_metrics(data.gold, probabilities, info.label_names)
    predicted = probabilities.argmax(axis=1)
    predicted_names = [info.label_names[i] for i in predicted]
    columns = _slices(data, data.gold_names)
    result["slices"] = fc.slice_table(columns, predicted != data.gold)
    extra = {"tokens": data.token_lengths.tolist(), "truncated": data.truncated.tolist()}
    if data.slice_values is not None:
        extra["slice"] = data.slice_values
    result["failures"] = fc.catalogue(
        data.examples, data.gold_names, predicted_names, probabilities.max(axis=1), extra
    )
    result["predicted"] = predicted
    result["correct"] = predicted == data.gold  # consumed by diagnostics.add_diagnostics
    result["probabilities"] = probabilities
    return result


def evaluate_regression(data: EvalData, outputs: dict, info) -> dict:
    """Regressor outputs (`scores` [N]) -> metrics, slices (mean absolute error), worst errors."""
    scores = np.asarray(outputs["scores"], np.float64).reshape(-1)
    result = cr.regression_metrics(data.gold, scores)
    result["slices"] = fc.slice_table(
        _slices(data, None), np.abs(scores - data.gold), regression=True
    )
    extra = {"tokens": data.token_lengths.tolist(), "truncated": data.truncated.tolist()}
    if data.slice_values is not None:
        extra["slice"] = data.slice_values
    result["failures"] = fc.regression_catalogue(data.examples, data.gold, scores, extra)
    result["predicted"] = scores
    return result


def per_class_blocks(m: dict) -> list:
    if "per_class" not in m:
        return []
    fields = ("precision", "recall", "f1", "support")
    rows = [
        [name] + [Num(f"per_class.{name}.{f}", v[f]) for f in fields]
        for name, v in m["per_class"].items()
    ]
    rows += [
        [avg.replace("_", " ")] + [Num(f"{avg}.{f}", m[avg][f]) for f in fields]
        for avg in ("macro_avg", "weighted_avg")
    ]
    names = m["model"]["label_names"]
    matrix = m["confusion_matrix"]
    cm_rows = [
        [f"gold {g}"] + [Num(f"confusion_matrix.{i}.{j}", c) for j, c in enumerate(row)]
        for i, (g, row) in enumerate(zip(names, matrix))
    ]
    return [
        ("h2", "Per-class precision, recall, F1"),
        Table(["class", *fields], rows, legend=MACRO_LEGEND),
        ("h2", "Confusion matrix"),
        "Rows: gold label; columns: predicted label.",
        Table(["", *[f"pred {n}" for n in names]], cm_rows),
        Figure(
            "confusion_matrix.png",
            confusion_figure(matrix, names, m["model"]["name"]),
            "confusion matrix",
        ),
    ]


def calibration_blocks(m: dict) -> list:
    if "calibration" not in m:
        return []
    cal = m["calibration"]
    rows = [
        [
            f"{b['lower']:.1f}-{b['upper']:.1f}",
            Num(f"calibration.bins.{i}.count", b["count"]),
            Num(f"calibration.bins.{i}.confidence", b["confidence"]),
            Num(f"calibration.bins.{i}.accuracy", b["accuracy"]),
        ]
        for i, b in enumerate(cal["bins"])
        if b["count"]
    ]
    return [
        ("h2", "Calibration"),
        f"Expected calibration error (Guo et al. 2017, {cal['num_bins']} equal-width bins of the "
        f"top probability): {fmt(cal['ece'])}.",
        Table(["confidence bin", "examples", "mean confidence", "accuracy"], rows),
        Figure(
            "reliability.png", reliability_figure({m["model"]["name"]: cal}), "reliability diagram"
        ),
    ]


def table_failure_columns(m: dict, regression: bool) -> tuple:
    """The failure table's columns (`EvidenceKind.failure_columns`): text_b when any failure
    has one; a regressor's gold and prediction are numbers, its score the absolute error."""
    score = "abs_error" if regression else "confidence"
    pair = any(f["text_b"] is not None for f in m["failures"])
    return (
        ("row", "row", True),
        ("text", "text", False),
        *([("text_b", "text_b", lambda text_b: text_b or "")] if pair else []),
        ("gold", "gold", regression),
        ("predicted", "predicted", regression),
        (score.replace("_", " "), score, True),
        ("tokens", "tokens", False),
        ("truncated", "truncated", fmt),
    )


def read_table(path, info, columns) -> EvalData:
    """`read_eval_data` with the user's `kinds.Columns`."""
    return read_eval_data(path, info, columns.text, columns.text_b, columns.label, columns.slice)


def train_texts(path, columns) -> list[str]:
    """A training file's texts in the held-out file's columns (`data_health.table_texts`)."""
    return data_health.table_texts(path, columns.text, columns.text_b)


def probabilities_of(predictor, batch_size: int):
    """function(texts, texts_b) -> a classifier `predictor`'s probabilities [N, C]."""

    def predict(texts, texts_b):
        return predictor.run(texts, texts_b, batch_size, progress=False)[0]["probabilities"]

    return predict


def invariance(predictor, data: EvalData, rows, seed, batch_size) -> list[dict]:
    """`behaviour.invariance_tests` of a classifier on the first `rows` texts (text_b kept)."""
    texts_b = None if data.texts_b is None else data.texts_b[:rows]
    return behaviour.invariance_tests(
        probabilities_of(predictor, batch_size),
        data.texts[:rows],
        texts_b,
        predictor.info.label_names,
        seed,
    )


def template_tests(predictor, tests, batch_size) -> list[dict]:
    """`behaviour.template_tests` of a classifier."""
    return behaviour.template_tests(
        probabilities_of(predictor, batch_size), tests, predictor.info.label_names
    )


CLASSIFICATION = register(
    EvidenceKind(
        "classification",
        read=read_table,
        evaluate=evaluate_classification,
        train_texts=train_texts,
        sections=(per_class_blocks, calibration_blocks),
        failure_columns=functools.partial(table_failure_columns, regression=False),
        failure_title="{n} misclassified examples, the most confident first",
        invariance=invariance,
        template_tests=template_tests,
    )
)
REGRESSION = register(
    EvidenceKind(
        "regression",
        read=read_table,
        evaluate=evaluate_regression,
        train_texts=train_texts,
        failure_columns=functools.partial(table_failure_columns, regression=True),
        failure_title="largest absolute errors first",
        regression=True,
    )
)
