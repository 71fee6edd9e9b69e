"""`python -m serving.request_log`: a request log (`serving.monitoring.request_logger`) as a warmup
file or as the texts to label for `recipes/evaluate.py`.

    python -m serving.request_log --log=/logs/sst2/requests \
        --warmup=/models/sst2/2/assets.extra/tf_serving_warmup_requests
    python -m serving.request_log --log=/logs/sst2/requests --texts=to_label.csv

--log is a log's filename_prefix (its files `<prefix>-*.tfrecord` are read in name order, which
is the order they were written), one file, or a glob pattern; a local path or any URI
`keras_bert.fileio` handles. A file still being written may end in a partial record: the
records before it are read and the file is named in the summary.

--warmup writes the first --max_warmup_records logged requests (TF Serving replays at most 1000)
as PredictionLog TFRecords without their responses and metadata, the
`assets.extra/tf_serving_warmup_requests` file that our server and stock TF Serving replay before
a version serves.

--texts writes one row per text of the logged requests (a Predict request's string inputs named
by --text_inputs (the first is `text`, the second `text_b`), or those features of a Classify / Regress / MultiInference request's
tf.Examples): `.csv`, `.tsv` or `.jsonl` by the extension, columns `text` (and `text_b` when a
request had one), an empty `label` to fill in, and where it came from (`model`, `version`,
`signature`, `logged_at`, UTC). Repeated texts are written once unless --keep_duplicates.
Requests without text inputs (ids only) are counted and left out. Once labelled:
`python recipes/evaluate.py --data=to_label.csv --model=... --output_dir=...`.
"""

import csv
import datetime
import io
import sys

from absl import flags
from tensorflow_serving.apis import prediction_log_pb2

from serving.dispatch.inference import input_examples
from serving.monitoring.request_logger import SUFFIX
from serving.wire import dtypes, tensors, tfrecords
from keras_bert import cli, fileio

MAX_WARMUP_RECORDS = 1000  # TF Serving's limit (servables/tensorflow/saved_model_warmup_util.cc)
_EXAMPLE_LOGS = ("classify_log", "regress_log", "multi_inference_log")
_FORMATS = {".csv": ",", ".tsv": "\t", ".jsonl": None}

_FLAGS = flags.FLAGS


def log_files(log: str) -> list:
    """The files of `log` (a filename_prefix, a file or a glob), sorted.

    Raises:
        FileNotFoundError: nothing matches.
    """
    if any(c in log for c in "*?["):
        files = fileio.glob(log)
    elif fileio.isfile(log):
        files = [log]
    else:
        files = fileio.glob(f"{log}-*{SUFFIX}")
    if not files:
        raise FileNotFoundError(f"no request log files at {log} (nor {log}-*{SUFFIX})")
    return sorted(files)


def read_logs(files) -> tuple:
    """Every complete PredictionLog record of `files`, in order.

    Returns:
        (list of PredictionLog, list of the files that ended in a partial record).
    """
    logs, truncated = [], []
    for path in files:
        try:
            for record in tfrecords.iter_records(path):
                logs.append(prediction_log_pb2.PredictionLog.FromString(record))
        except tfrecords.RecordError:
            truncated.append(path)
    return logs, truncated


def warmup_records(logs, max_records=MAX_WARMUP_RECORDS) -> list:
    """The first `max_records` logs as warmup records: the request only."""
    records = []
    for log in logs[:max_records]:
        kind = log.WhichOneof("log_type")
        record = prediction_log_pb2.PredictionLog()
        getattr(record, kind).request.CopyFrom(getattr(log, kind).request)
        records.append(record)
    return records


def write_records(records, path) -> None:
    """PredictionLog records as a TFRecord file at `path` (complete when it appears)."""
    tfrecords.write_records((record.SerializeToString() for record in records), path)


def _strings(values) -> list:
    return [v.decode("utf-8", "replace") for v in values]


def _predict_texts(request, text_inputs) -> dict:
    columns = {}
    for name in text_inputs:
        proto = request.inputs.get(name)
        if proto is not None and proto.dtype == dtypes.string.as_datatype_enum:
            columns[name] = _strings(tensors.to_numpy(proto, name).reshape([-1]))
    return columns


def _example_texts(input_proto, text_inputs) -> dict:
    examples = input_examples(input_proto)
    columns = {}
    for name in text_inputs:
        if any(name in ex.features.feature for ex in examples):
            values = [ex.features.feature[name].bytes_list.value for ex in examples]
            columns[name] = [v[0].decode("utf-8", "replace") if v else "" for v in values]
    return columns


def text_rows(logs, text_inputs=tensors.DEFAULT_TEXT_INPUTS) -> tuple:
    """One dict per text of the logged requests (module docstring: the columns).

    Returns:
        (rows, the number of logged requests without a text input).
    """
    rows, without_text = [], 0
    for log in logs:
        kind = log.WhichOneof("log_type")
        request = getattr(log, kind).request
        if kind == "predict_log":
            columns = _predict_texts(request, text_inputs)
        elif kind in _EXAMPLE_LOGS:
            columns = _example_texts(request.input, text_inputs)
        else:
            columns = {}
        if not columns:
            without_text += 1
            continue
        spec, when = log.log_metadata.model_spec, log.log_metadata.timestamp_secs
        source = {
            "model": spec.name,
            "version": spec.version.value,
            "signature": spec.signature_name,
            "logged_at": datetime.datetime.fromtimestamp(when, datetime.timezone.utc).isoformat(),
        }
        names = ["text" if name == text_inputs[0] else "text_b" for name in columns]
        for values in zip(*columns.values()):
            rows.append({**dict(zip(names, values)), "label": "", **source})
    return rows, without_text


def write_texts(rows, path, keep_duplicates=False) -> tuple:
    """Writes `rows` (`text_rows`) as `path`'s format says.

    Returns:
        (rows written, repeated rows left out).
    Raises:
        ValueError: an extension other than .csv, .tsv or .jsonl.
    """
    suffix = path[path.rfind(".") :].lower() if "." in fileio.basename(path) else ""
    if suffix not in _FORMATS:
        raise ValueError(f"--texts {path}: give a .csv, .tsv or .jsonl file")
    seen, kept = set(), []
    for row in rows:
        key = (row["text"], row.get("text_b"))
        if keep_duplicates or key not in seen:
            seen.add(key)
            kept.append(row)
    pair = any("text_b" in row for row in rows)
    columns = ["text", *(["text_b"] if pair else []), "label"]
    columns += ["model", "version", "signature", "logged_at"]
    if _FORMATS[suffix] is None:
        text = fileio.jsonl_text({c: row.get(c, "") for c in columns} for row in kept)
    else:
        buffer = io.StringIO(newline="")
        writer = csv.DictWriter(buffer, columns, delimiter=_FORMATS[suffix], restval="")
        writer.writeheader()
        writer.writerows(kept)
        text = buffer.getvalue()
    fileio.makedirs(fileio.parent(path))
    fileio.write_text(path, text)
    return len(kept), len(rows) - len(kept)


def _fail(message):
    sys.stderr.write(f"serving.request_log: error: {' '.join(str(message).split())}\n")
    sys.exit(2)


def define_flags():
    """The command line's flags (defined only when run as a program: the server, imported in the
    same process by tests, has a --text_inputs of its own)."""
    flags.DEFINE_string("log", None, "A request log's filename_prefix, one log file, or a glob.")
    flags.DEFINE_string("warmup", None, "Write a tf_serving_warmup_requests file here.")
    flags.DEFINE_integer(
        "max_warmup_records", MAX_WARMUP_RECORDS, "Most requests in the warmup file.", lower_bound=1
    )
    flags.DEFINE_string("texts", None, "Write the logged texts here (.csv, .tsv or .jsonl).")
    flags.DEFINE_list(
        "text_inputs", list(tensors.DEFAULT_TEXT_INPUTS), "Inputs / features that hold text."
    )
    flags.DEFINE_boolean(
        "keep_duplicates", False, "Write a repeated text every time it was logged."
    )


def run(
    log,
    warmup=None,
    texts=None,
    max_warmup_records=MAX_WARMUP_RECORDS,
    text_inputs=tensors.DEFAULT_TEXT_INPUTS,
    keep_duplicates=False,
) -> list:
    """What the command does (module docstring); returns its summary lines.

    Raises:
        FileNotFoundError: no log files; ValueError: a bad --texts extension; OSError or
            tf.errors.OpError (`fileio.file_errors()`): an output that cannot be written.
    """
    files = log_files(log)
    logs, truncated = read_logs(files)
    lines = [f"read {len(logs)} logged requests from {len(files)} files"]
    lines += [
        f"  {path} ends in a partial record (still being written?): read up to it"
        for path in truncated
    ]
    if warmup:
        records = warmup_records(logs, max_warmup_records)
        write_records(records, warmup)
        lines.append(f"wrote {len(records)} warmup requests to {warmup}")
    if texts:
        rows, without_text = text_rows(logs, tuple(text_inputs))
        written, repeated = write_texts(rows, texts, keep_duplicates)
        lines.append(
            f"wrote {written} texts to {texts} ({repeated} repeated ones left out, "
            f"{without_text} requests without text inputs): fill in the label column"
        )
    return lines


def main(argv):
    del argv
    if not _FLAGS.log or not (_FLAGS.warmup or _FLAGS.texts):
        _fail("give --log and at least one of --warmup, --texts")
    try:
        lines = run(
            _FLAGS.log,
            _FLAGS.warmup,
            _FLAGS.texts,
            _FLAGS.max_warmup_records,
            _FLAGS.text_inputs,
            _FLAGS.keep_duplicates,
        )
    except (ValueError, *fileio.file_errors()) as e:
        _fail(e)
    print("\n".join(lines))


if __name__ == "__main__":
    define_flags()
    cli.run(main)
