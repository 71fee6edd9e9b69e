"""Input files of a batch prediction as rows: `InputRow` (ready for the model) or `RowError` (why
not), never an exception for one bad row.

Formats (by extension, as `keras_bert.data.text_files`): `.csv` (header row, RFC 4180 quoting),
`.tsv` / `.tab` (tab separated, header row), `.jsonl` / `.json` (one JSON object per line, blank
lines skipped), `.tfrecord` / `.tfrecords` (serialized `tf.train.Example`, bytes features for the
texts; the key may be bytes, int64 or float). A file is read whole by one worker through
`keras_bert.fileio` (any `tf.io.gfile` URI), by its rule for user files: UTF-8, a leading
byte-order mark dropped, JSON lines split at "\n" only ("\r\n" accepted; never at U+2028 and the
other breaks of `str.splitlines()`), CSV fields of any length; bytes that are not UTF-8 refuse
only a row whose text or key holds them, never the file.

Rows are numbered from 0 within their file, counting data rows only (the CSV header and blank
JSONL lines are not rows), the numbering `text_files.read_text_file` gives the same file, so a
prediction can be joined back to a labelled file by row order.

A row becomes a `RowError` when a text column (or the key column) is missing or null, a text is
empty or whitespace, a text or key is not UTF-8 (or holds a lone surrogate), a JSON line is not
JSON (a line whose bytes are not UTF-8 outside its strings: "line is not UTF-8") or not an
object, a CSV row has more fields than its header, or a TFRecord record is not a
`tf.train.Example`. A `RowError` keeps every field that could be read: the key whenever the key
column holds one, whatever else is wrong with the row, and the raw row. A TFRecord file corrupt
past some record, or a CSV file the csv module gives up on, gives one `RowError` for the rest of
the file (its rows cannot be counted).
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any, Iterator

import tensorflow as tf

from keras_bert import fileio

CSV_SUFFIXES = (".csv", ".tsv", ".tab")
JSONL_SUFFIXES = (".jsonl", ".json")
TFRECORD_SUFFIXES = (".tfrecord", ".tfrecords")


@dataclasses.dataclass(frozen=True)
class Columns:
    """Which columns (JSON keys, tf.Example features) hold what.

    Attributes:
        text: the first (or only) text.
        text_b: the second text of a pair task, or None.
        key: a column identifying the row in the outputs, or None.
    """

    text: str
    text_b: str | None = None
    key: str | None = None

    def texts(self) -> list[str]:
        return [self.text] + ([self.text_b] if self.text_b else [])


@dataclasses.dataclass(frozen=True)
class InputRow:
    """One row ready for the model.

    Attributes:
        file_index: int, position of `file` among the expanded inputs (orders the outputs).
        file: str, the input file as expanded from --input.
        row: int, 0-based data row within `file`.
        key: the key column's value (str, int or float) or None without a key column.
        text, text_b: str (text_b None for single-text models).
        raw: the row as read (a dict for CSV / JSONL, base64 of the record for TFRecord), kept for
            the errors file should the prediction fail.
    """

    file_index: int
    file: str
    row: int
    key: Any
    text: str
    text_b: str | None
    raw: Any

    @property
    def length(self) -> int:
        """Characters of text (+ text_b): the length batches are bucketed by."""
        return len(self.text) + len(self.text_b or "")


@dataclasses.dataclass(frozen=True)
class RowError:
    """A row that cannot be predicted, and why (one line).

    Attributes: as `InputRow` (key None only when it could not be read: no key column, a line
    that is not a JSON object, a record that is not a tf.train.Example; row None for "the rest
    of a corrupt file"), plus `reason`: str.
    """

    file_index: int
    file: str
    row: int | None
    key: Any
    raw: Any
    reason: str


def file_format(path: str) -> str:
    """ "csv", "tsv", "jsonl" or "tfrecord" from the file name.

    Raises:
        ValueError: another extension, naming the file and the ones supported.
    """
    name = fileio.basename(path).lower()
    suffix = name[name.rfind(".") :] if "." in name else ""
    if suffix == ".csv":
        return "csv"
    if suffix in CSV_SUFFIXES:
        return "tsv"
    if suffix in JSONL_SUFFIXES:
        return "jsonl"
    if suffix in TFRECORD_SUFFIXES:
        return "tfrecord"
    supported = ", ".join(CSV_SUFFIXES + JSONL_SUFFIXES + TFRECORD_SUFFIXES)
    raise ValueError(f"{path}: unknown file type {suffix!r}; use {supported}")


def csv_header(path: str) -> list[str]:
    """The header row of a CSV / TSV file (for a usage check before the pipeline runs), read as
    `read_rows` reads it; undecodable bytes shown as `\\xNN`.

    Raises:
        fileio.UserFileError (a ValueError): a header the csv module refuses, naming the file.
    """
    delimiter = "," if file_format(path) == "csv" else "\t"
    return [_shown(name) for name in fileio.csv_header(path, delimiter)]


def check_columns(path: str, columns: Columns) -> None:
    """Fails when a CSV / TSV file's header lacks a named column (a mistyped flag, not a bad row).

    Raises:
        ValueError: "<file>: no column 'x'; columns present: [...]".
    """
    if file_format(path) not in ("csv", "tsv"):
        return
    header = csv_header(path)
    missing = [c for c in columns.texts() + [columns.key] if c and c not in header]
    if missing:
        raise ValueError(f"{path}: no column(s) {missing}; columns present: {header}")


def read_rows(file_index: int, path: str, columns: Columns) -> Iterator[InputRow | RowError]:
    """Every data row of one file, in file order, as `InputRow` or `RowError`."""
    kind = file_format(path)
    if kind in ("csv", "tsv"):
        yield from _csv_rows(file_index, path, columns, "," if kind == "csv" else "\t")
    elif kind == "jsonl":
        yield from _jsonl_rows(file_index, path, columns)
    else:
        yield from _tfrecord_rows(file_index, path, columns)


def _key(values: dict, columns: Columns) -> tuple[Any, str | None]:
    """(the key column's value, None); (None, why) when it cannot be read; (None, None) without a
    key column."""
    if not columns.key:
        return None, None
    key = values.get(columns.key)
    if key is None:
        return None, f"missing key column {columns.key!r}"
    if isinstance(key, bytes):
        try:
            key = key.decode("utf-8")
        except UnicodeDecodeError:
            return None, f"key column {columns.key!r} is not UTF-8"
    if isinstance(key, str) and _not_utf8(key):
        return None, f"key column {columns.key!r} is not UTF-8"
    return key, None


def _row(file_index, path, row, values: dict, columns: Columns, raw) -> InputRow | RowError:
    """Checks a row's values (str, or bytes where the format gives bytes) against `columns`."""
    key, problem = _key(values, columns)

    def error(reason):
        return RowError(file_index, path, row, key, raw, reason)

    if problem:
        return error(problem)
    texts = []
    for column in columns.texts():
        value = values.get(column)
        if value is None:
            return error(f"missing text column {column!r}")
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                return error(f"text column {column!r} is not UTF-8")
        if not isinstance(value, str):
            return error(f"text column {column!r} holds {type(value).__name__}, not text")
        if _not_utf8(value):
            return error(f"text column {column!r} is not UTF-8")
        if not value.strip():
            return error(f"empty text in column {column!r}")
        texts.append(value)
    return InputRow(file_index, path, row, key, texts[0], texts[1] if len(texts) > 1 else None, raw)


def _not_utf8(text: str) -> bool:
    """Whether `text` holds a surrogate: an undecodable byte left by `surrogateescape` decoding
    (U+DC80..U+DCFF), or a lone surrogate from a JSON escape (`"\\ud800"`), which UTF-8 cannot
    encode."""
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def _shown(text: str) -> str:
    """A string with undecodable bytes as `\\xNN` (other lone surrogates as `\\udXXX`), fit for
    UTF-8 JSON."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate outside U+DC80..U+DCFF
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _shown_value(value):
    """A parsed JSON value with `_shown` applied to every string in it (keys included)."""
    if isinstance(value, str):
        return _shown(value)
    if isinstance(value, dict):
        return {_shown(k): _shown_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown_value(v) for v in value]
    return value


def _read_text(path) -> str:
    """The file by `keras_bert.fileio`'s rule for user files (a byte-order mark dropped), each
    undecodable byte kept as U+DC80..U+DCFF so that only the rows holding one are refused."""
    return fileio.decode_user_text(fileio.read_bytes(path), path, "surrogateescape")


def _csv_rows(file_index, path, columns, delimiter):
    header, records = fileio.csv_records(_read_text(path), path, delimiter)
    row = 0
    try:
        for _, values in records:
            raw = {
                _shown(k): _shown(v) if isinstance(v, str) else v
                for k, v in values.items()
                if k is not None
            }
            if None in values:  # fields past the header
                raw["(extra fields)"] = [_shown(v) for v in values[None]]
                reason = f"{len(header) + len(values[None])} fields; the header has {len(header)}"
                yield RowError(file_index, path, row, _key(values, columns)[0], raw, reason)
            else:
                yield _row(file_index, path, row, values, columns, raw)
            row += 1
    except fileio.UserFileError as e:  # the csv module gave up: the rest cannot be counted
        yield RowError(file_index, path, None, None, None, f"after {row} rows: {e}")


def _jsonl_rows(file_index, path, columns):
    for row, (number, line) in enumerate(fileio.jsonl_lines(_read_text(path))):
        shown = _shown(line)
        try:
            values = fileio.parse_json(line, f"{path}:{number}")
        except fileio.UserFileError as e:
            reason = "line is not UTF-8" if _not_utf8(line) else e.problem
            yield RowError(file_index, path, row, None, shown, reason)
            continue
        if not isinstance(values, dict):
            reason = f"not a JSON object but {type(values).__name__}"
            yield RowError(file_index, path, row, None, shown, reason)
            continue
        yield _row(file_index, path, row, values, columns, _shown_value(values))


def _feature_value(feature: tf.train.Feature):
    kind = feature.WhichOneof("kind")
    values = list(getattr(feature, kind).value) if kind else []
    return values[0] if len(values) == 1 else None


def _tfrecord_rows(file_index, path, columns):
    row = 0
    records = iter(tf.data.TFRecordDataset(path).as_numpy_iterator())
    while True:
        try:
            record = next(records)
        except StopIteration:
            return
        except tf.errors.DataLossError as e:
            reason = f"corrupt TFRecord file after {row} records: {' '.join(e.message.split())}"
            yield RowError(file_index, path, None, None, None, reason)
            return
        raw = base64.b64encode(record).decode("ascii")
        try:
            example = tf.train.Example.FromString(record)
        except Exception:  # protobuf's DecodeError, whose module path varies by backend
            yield RowError(file_index, path, row, None, raw, "record is not a tf.train.Example")
        else:
            values = {
                name: _feature_value(feature) for name, feature in example.features.feature.items()
            }
            yield _row(file_index, path, row, values, columns, raw)
        row += 1
