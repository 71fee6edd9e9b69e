"""A batch prediction's output (recipes/batch_predict.py) as the predictions of an evidence pack:
`evaluate.py --predictions=<dir> --data=<labelled file>` (docs/batch_prediction.md).

The labelled rows are joined to the predictions by the key column the batch prediction recorded
(`batch_predict.json`: config.key_column), the key values compared as text (`"7"` and `7` are
one key, as `text_files` reads a JSONL number); without a key column, by row order: data row i
takes the prediction of row i of the batch prediction's single input file. Every labelled row
must find exactly one prediction: a row that went to errors-*.jsonl, a key that is not there or
is there twice, is a `DataError` naming the row, so nothing is scored on a subset silently.

What the model is (label names, vocabulary for token counts, max_seq_length) is read from the
assets of the version directory the batch prediction used (`model_dir` in batch_predict.json); the
model itself is not loaded and nothing is timed.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from keras_bert import fileio
from keras_bert.batch_prediction.records import INPUT_ROW, SUMMARY_FILE
from keras_bert.data import text_files
from keras_bert.evaluation.evidence_pack import DataError
from keras_bert.evaluation.predictors import ModelInfo, read_export_info


@dataclasses.dataclass
class RecordedPredictions:
    """A complete batch-prediction output directory.

    Attributes:
        directory: str, as given.
        summary: dict, its batch_predict.json.
        info: `ModelInfo` of the model that made the predictions.
        records: list of dict, every line of predictions-*.jsonl.
        errors: list of dict, every line of errors-*.jsonl.
    """

    directory: str
    summary: dict
    info: ModelInfo
    records: list
    errors: list

    @property
    def key_column(self) -> str | None:
        return self.summary["config"].get("key_column")

    @property
    def path(self) -> str:
        """How the predictions were made (shown as the report's model path)."""
        return f"batch predictions {self.directory}"


def _jsonl(directory: str, names: list) -> list:
    return [record for name in names for record in fileio.read_jsonl(fileio.join(directory, name))]


def read(directory: str) -> RecordedPredictions:
    """Reads a batch prediction's output directory.

    Raises:
        FileNotFoundError: not a complete batch-prediction output (no batch_predict.json or no
            completion marker), or its model directory is gone.
    """
    summary_path = fileio.join(directory, SUMMARY_FILE)
    if not fileio.isfile(summary_path) or not fileio.is_complete(directory):
        raise FileNotFoundError(
            f"--predictions {directory}: not a complete batch prediction output "
            f"(recipes/batch_predict.py writes {SUMMARY_FILE} and publishes the directory whole)"
        )
    summary = fileio.read_json(summary_path)
    info = read_export_info(summary["model_dir"])
    return RecordedPredictions(
        directory,
        summary,
        info,
        _jsonl(directory, summary["files"]["predictions"]),
        _jsonl(directory, summary["files"]["errors"]),
    )


def _key_text(value) -> str:
    return "" if value is None else str(value)


def aligned_outputs(recorded: RecordedPredictions, data_path: str, num_rows: int) -> dict:
    """The recorded outputs in the order of the labelled file's rows.

    Args:
        recorded: from `read`.
        data_path: the labelled file (`--data`), for its key column.
        num_rows: its number of rows (`EvalData.examples`).

    Returns:
        output name -> numpy array [num_rows, ...].

    Raises:
        DataError: a row without exactly one prediction (naming it), or a row-order join of a
            batch prediction that read several files.
    """
    key_column = recorded.key_column
    if key_column:
        try:
            keys = [e.text_a for e in text_files.read_text_file(data_path, key_column, None, None)]
        except (ValueError, FileNotFoundError) as e:
            raise DataError(f"{e} (the batch prediction's key column)") from None
        field, what = key_column, f"key column {key_column!r}"
        found = [_key_text(r.get(key_column)) for r in recorded.records]
        failed = {_key_text(e.get(key_column)): e["reason"] for e in recorded.errors}
    else:
        files = recorded.summary["input_files"]
        if len(files) != 1:
            raise DataError(
                f"--predictions {recorded.directory} has no key column and read {len(files)} "
                "files: rows can be joined by order only for one file (rerun batch_predict.py "
                "with --key_column)"
            )
        keys = [str(i) for i in range(num_rows)]
        field, what = INPUT_ROW, "row"
        found = [_key_text(r.get(INPUT_ROW)) for r in recorded.records]
        failed = {_key_text(e.get(INPUT_ROW)): e["reason"] for e in recorded.errors}
    by_key: dict = {}
    for key, record in zip(found, recorded.records):
        if key in by_key:
            raise DataError(f"--predictions {recorded.directory}: {what} {key!r} appears twice")
        by_key[key] = record
    picked = []
    for row, key in enumerate(keys):
        if key not in by_key:
            why = (
                f"it is in errors-*.jsonl: {failed[key]}"
                if key in failed
                else "the batch prediction did not read it"
            )
            raise DataError(
                f"{data_path}: data row {row} ({field} {key!r}) has no prediction in "
                f"{recorded.directory}: {why}"
            )
        picked.append(by_key[key])
    names = recorded.summary["signature"]["outputs"]
    return {name: stacked([r[name] for r in picked], name) for name in names}


def stacked(values: list, name: str) -> np.ndarray:
    """One output's per-row values as one array [N, ...]. A tagger's `tags` and `words` were
    padded per batch (to the batch's longest sentence), so rows from different batches differ in
    length: they are padded to the longest as the signature pads, "" for text and 0 for numbers.

    Raises:
        DataError: rows of different ranks (not one output of one signature).
    """
    arrays = [np.asarray(v) for v in values]
    shapes = {a.shape for a in arrays}
    if len(shapes) <= 1:
        return np.asarray(arrays)
    if len({len(s) for s in shapes}) > 1:
        raise DataError(f"output {name!r}: rows of different ranks {sorted(shapes)}")
    dtype = np.result_type(*arrays)
    fill = "" if dtype.kind in "US" else 0
    out = np.full((len(arrays), *np.max(list(shapes), axis=0)), fill, dtype=dtype)
    for i, a in enumerate(arrays):
        out[(i, *(slice(0, n) for n in a.shape))] = a
    return out
