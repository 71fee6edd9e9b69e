"""The evaluation evidence pack (SPEC section 9): one model on the user's held-out file.

`read_data` reads the held-out file the way the model's task kind reads it, `evaluate` runs a
predictor (`predictors.py`) over it and returns everything `report_writer` prints and
metrics.json holds, and `run_predictor` runs the kind's behavioural tests.

Task kinds plug in through `kinds` (one module per `Task.task_type`, each an `EvidenceKind`):
classification and regression (`kinds/classification.py`: CSV / TSV / JSONL), NER
(`kinds/token_classification.py`: CoNLL), span QA (`kinds/span_question_answering.py`: SQuAD
JSON) and multiple choice (`kinds/multiple_choice.py`: SWAG CSV). Nothing here names a task type.
"""

from __future__ import annotations

from keras_bert.evaluation import behaviour, kinds
from keras_bert.evaluation.diagnostics import add_diagnostics
from keras_bert.evaluation.eval_data import (  # noqa: F401  (DataError, EvalData: re-exported)
    DataError,
    EvalData,
    token_counts,
    token_statistics,
)
from keras_bert.evaluation.latency import latency_summary
from keras_bert.evaluation.model_record import model_record


def read_data(
    path, info, text_column="text", text_b_column=None, label_column="label", slice_column=None
) -> EvalData:
    """The held-out file, read and checked against the model (`predictors.ModelInfo`) by its
    task kind (`EvidenceKind.read`; the text and label columns apply to a text table only).

    Raises:
        DataError: the file does not fit the model (naming the problem).
        ValueError: a task type without a registered kind.
    """
    columns = kinds.Columns(text_column, text_b_column, label_column, slice_column)
    return kinds.kind_of(info.task_type).read(path, info, columns)


def train_texts(path, task_type: str, text_column="text", text_b_column=None) -> list[str]:
    """A training file's texts in the format of `task_type`'s training files, joined as
    `EvalData.joined_texts` (for `data_health.leakage`).

    Raises:
        ValueError / FileNotFoundError: the file cannot be read; a task type without a kind.
    """
    columns = kinds.Columns(text_column, text_b_column)
    return kinds.kind_of(task_type).train_texts(path, columns)


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
    kind = kinds.kind_of(predictor.info.task_type)
    outputs, seconds, sizes = predictor.run_inputs(
        data.model_inputs(predictor.info.is_pair), batch_size, progress
    )
    if kind.untimed_outputs is not None:
        outputs |= kind.untimed_outputs(predictor, data, batch_size)
    result = evaluate_outputs(predictor.info, predictor.path, data, outputs)
    result["latency"] = latency_summary(
        seconds, sizes, batch_size, predictor.path, machine_cost_per_hour
    )
    return result


def evaluate_outputs(info, path: str, data: EvalData, outputs: dict) -> dict:
    """`evaluate` of predictions already made (`outputs`: the signature's outputs, rows in the
    order of `data`), without "latency": e.g. a batch prediction's output
    (`recorded_predictions`), where nothing was timed here.

    Raises:
        ValueError: a task type without an evaluator.
    """
    result = kinds.kind_of(info.task_type).evaluate(data, outputs, info)
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


def template_tests_refusal(task_type: str) -> str | None:
    """Why a model of `task_type` takes no template tests (None: its kind takes them)."""
    kind = kinds.find(task_type)
    if kind is not None and kind.template_tests is not None:
        return None
    gets = (
        "the built-in invariance tests only (--invariance_rows)"
        if kind is not None and kind.invariance is not None
        else "no behavioural tests"
    )
    return f"template tests name a classifier's labels; a {task_type} model gets {gets}"


def run_predictor(
    predictor, data, tests=None, rows=behaviour.INVARIANCE_ROWS, seed=0, batch_size=32
):
    """The behavioural tests of `predictor` (`predictors.Predictor`) on `data` (its kind's
    `invariance` on the first `rows` rows; where the kind takes them, the template `tests`
    too, as a list even when empty); None for a kind without behavioural tests, or without
    template tests when rows is 0."""
    kind = kinds.find(predictor.info.task_type)
    if kind is None or kind.invariance is None:
        return None
    if kind.template_tests is None:
        return kind.invariance(predictor, data, rows, seed, batch_size) if rows else None
    results = []
    if rows > 0 and data.texts:
        results += kind.invariance(predictor, data, rows, seed, batch_size)
    return results + kind.template_tests(predictor, tests or [], batch_size)
