"""The evaluation evidence pack (SPEC section 9): one model on the user's held-out file.

`read_eval_data` reads a CSV / TSV / JSONL file (`keras_bert.data.text_files`) and maps its labels
through the model's own label names (`keras_bert.data.labels`: names or ids, never a mix); `evaluate` runs a predictor (`predictors.py`) over it and
returns everything `report_writer` prints and metrics.json holds.

Task families plug in through `EVALUATORS`: task_type -> function(data, outputs, info) returning
a dict with "headline" (metric name -> float), optional report sections ("per_class",
"confusion_matrix", "calibration", ...), "slices" (`failure_catalogue.slice_table` rows),
"failures" (rows, worst first), "predicted" (per-example predictions, for `--compare`; removed
from metrics.json) and optionally "correct" / "probabilities" (per row, consumed by
`diagnostics.add_diagnostics`: weak segments, label issues). Classification and regression are
defined here; NER (`ner_pack`), span QA (`span_qa_pack`) and multiple choice
(`multiple_choice_pack`) in their modules, each with the reader of its training format
(`READERS`). Their "predicted" is a dict: per-example "counts" [N, K] and "metrics_of" (the
paired bootstrap of `comparison.count_bootstrap`), "shown" / "gold_shown" / "correct" (where two
models disagree).
"""

from __future__ import annotations

import numpy as np

from keras_bert.data import text_files
from keras_bert.data.labels import LabelError, label_ids
from keras_bert.evaluation import classification_report as cr
from keras_bert.evaluation import failure_catalogue as fc
from keras_bert.evaluation import multiple_choice_pack, ner_pack, span_qa_pack
from keras_bert.evaluation.diagnostics import add_diagnostics
from keras_bert.evaluation.eval_data import (  # noqa: F401  (DataError, EvalData: re-exported)
    DataError,
    EvalData,
    token_counts,
    token_statistics,
)
from keras_bert.evaluation.latency import latency_summary
from keras_bert.evaluation.model_record import model_record


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


EVALUATORS = {
    "classification": evaluate_classification,
    "regression": evaluate_regression,
    "token_classification": ner_pack.evaluate_ner,
    "span_question_answering": span_qa_pack.evaluate_span_qa,
    "multiple_choice": multiple_choice_pack.evaluate_multiple_choice,
}
# task_type -> function(path, info, slice_column) -> EvalData, for the families whose held-out
# file is not a text table (the training readers' formats: CoNLL, SQuAD JSON, SWAG CSV).
READERS = {
    "token_classification": ner_pack.read_ner_data,
    "span_question_answering": span_qa_pack.read_squad_data,
    "multiple_choice": multiple_choice_pack.read_swag_data,
}
# task_type -> function(path) -> list of str: a training file's texts in that format, joined as
# `EvalData.joined_texts` (train / held-out leakage).
TRAIN_TEXTS = {
    "token_classification": ner_pack.train_texts,
    "span_question_answering": span_qa_pack.train_texts,
    "multiple_choice": multiple_choice_pack.train_texts,
}


def evaluate(
    predictor,
    data: EvalData,
    batch_size: int = 32,
    machine_cost_per_hour: float | None = None,
    progress: bool = True,
) -> dict:
    """One model on one held-out set.

    Returns:
        dict: "model" (`model_record.model_record`: name, path, task_type, label_names,
        max_seq_length, is_pair, metric_scale, settings), "data" (file,
        examples, truncated count), the evaluator's fields, "latency" (`latency_summary`) and
        "predicted" (numpy [N], not JSON: pop it before writing metrics.json).

    Raises:
        ValueError: a task type without an evaluator.
    """
    check_evaluator(predictor.info)
    outputs, seconds, sizes = predictor.run_inputs(
        data.model_inputs(predictor.info.is_pair), batch_size, progress
    )
    if predictor.info.task_type == "token_classification" and hasattr(predictor, "task"):
        # Untimed: tag probabilities for label issues (ner_pack.word_probabilities).
        outputs["word_probabilities"] = ner_pack.word_probabilities(
            predictor.task, data.reference["words"], batch_size
        )
    result = evaluate_outputs(predictor.info, predictor.path, data, outputs)
    result["latency"] = latency_summary(
        seconds, sizes, batch_size, predictor.path, machine_cost_per_hour
    )
    return result


def check_evaluator(info) -> None:
    """Raises ValueError for a task type without an evaluator."""
    if info.task_type not in EVALUATORS:
        raise ValueError(
            f"no evaluator for task type {info.task_type!r}; known: {sorted(EVALUATORS)}"
        )


def evaluate_outputs(info, path: str, data: EvalData, outputs: dict) -> dict:
    """`evaluate` of predictions already made (`outputs`: the signature's outputs, rows in the
    order of `data`), without "latency": e.g. a batch prediction's output
    (`recorded_predictions`), where nothing was timed here.

    Raises:
        ValueError: a task type without an evaluator.
    """
    check_evaluator(info)
    result = EVALUATORS[info.task_type](data, outputs, info)
    add_diagnostics(result, data, info.label_names)
    return {
        "model": model_record(info, path),
        "data": {
            "file": data.path,
            "examples": len(data.examples),
            "truncated": int(data.truncated.sum()),
            "slice_column": data.slice_column,
        },
        **result,
    }
