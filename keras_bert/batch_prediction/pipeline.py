"""The batch-prediction Beam pipeline and its output directory (docs/batch_prediction.md).

    files -> read rows (one worker per file) -> Reshuffle -> RunInference (bucketed batches)
          -> predictions | errors (read errors + rows that failed alone) -> sharded files
          -> counts -> batch_predict.json

Every row read ends in exactly one of predictions-*.jsonl and errors-*.jsonl (and each predicted
row once in prediction_logs-*.tfrecord); `batch_predict.json` records the resolved config and the
counts, and the run fails if rows_read != predicted + errors.

Output directory: everything is written into a hidden staging directory beside --output_dir
(`fileio.staging_dir`) and published with `fileio.publish_dir` once the pipeline has finished and
the counts add up (one rename on a local disk or HDFS; elsewhere a copy with the completion marker
last). A reader therefore sees either no --output_dir or a complete one; a failed run leaves at
most the hidden staging directory, removed when it fails in this process.

Shards: `num_shards` files per kind, `<kind>-SSSSS-of-NNNNN.<ext>`, every shard written even when
empty; a row's shard is a hash of (input file, row), and each shard is sorted by (input file,
row), so the files do not depend on the runner, the worker count or the batching. Files are
written through `keras_bert.fileio` (any tf.io.gfile URI, on any worker that has TensorFlow).
"""

from __future__ import annotations

import dataclasses
import zlib

import apache_beam as beam
import tensorflow as tf
from apache_beam.ml.inference.base import RunInference

from keras_bert import beam as beam_pipelines
from keras_bert import fileio
from keras_bert.batch_prediction import records
from keras_bert.batch_prediction.model_handler import (
    ExportSignature,
    PredictionFailure,
    TextSignatureHandler,
    resolve_model_dir,
)
from keras_bert.batch_prediction.rows import Columns, InputRow, check_columns, read_rows
from keras_bert.data.file_patterns import expand_file_patterns

SUMMARY_FILE = records.SUMMARY_FILE
COUNTS_FILE = "_counts.json"  # written by the pipeline into the staging dir; folded into SUMMARY
# Characters of text (+ text_b); with ~4-5 characters per WordPiece token in English these are
# roughly 8, 16, 32, 64 and 128 tokens.
DEFAULT_BUCKET_BOUNDARIES = (32, 64, 128, 256, 512)
KINDS = {"predictions": ".jsonl", "errors": ".jsonl", "prediction_logs": ".tfrecord"}


@dataclasses.dataclass(frozen=True)
class BatchPredictConfig:
    """A batch prediction, as resolved (written to batch_predict.json).

    Attributes:
        model: --model as given (a version dir or a model base dir).
        input: --input as given (comma-separated paths / globs, any URI).
        output_dir: where the outputs are published (must not exist, or be empty).
        text_column, text_b_column, key_column: see `rows.Columns`.
        eval_batch_size: rows per model call (--eval_batch_size).
        bucket_boundaries: tuple of characters, or () for unbucketed batches.
        num_shards: files per output kind.
    """

    model: str
    input: str
    output_dir: str
    text_column: str = "text"
    text_b_column: str | None = None
    key_column: str | None = None
    eval_batch_size: int = 64
    bucket_boundaries: tuple = DEFAULT_BUCKET_BOUNDARIES
    num_shards: int = 1

    @property
    def columns(self) -> Columns:
        return Columns(self.text_column, self.text_b_column, self.key_column)


@dataclasses.dataclass(frozen=True)
class Prepared:
    """What `prepare` resolved: the input files and the model's signature."""

    files: tuple
    export: ExportSignature


def prepare(config: BatchPredictConfig) -> Prepared:
    """Checks everything that can be checked before a worker starts.

    Raises:
        ValueError / FileNotFoundError: one line naming the problem (bad batch size, bucket
            boundaries or shard count; no input file; an unknown file type or a CSV header without
            a named column; no model; a model that does not take text; text_b_column given to a
            single-text model or missing for a pair model; output_dir not empty).
    """
    if config.eval_batch_size < 1:
        raise ValueError(f"--eval_batch_size must be >= 1, got {config.eval_batch_size}")
    if config.num_shards < 1:
        raise ValueError(f"--num_shards must be >= 1, got {config.num_shards}")
    bounds = list(config.bucket_boundaries)
    if bounds and (any(b <= 0 for b in bounds) or bounds != sorted(set(bounds))):
        raise ValueError(
            f"--bucket_boundaries must be increasing positive integers, got {config.bucket_boundaries}"
        )
    export = ExportSignature.read(resolve_model_dir(config.model))
    if export.is_pair and not config.text_b_column:
        raise ValueError(f"model {export.model_name} is a pair task: give --text_b_column")
    if not export.is_pair and config.text_b_column:
        raise ValueError(
            f"model {export.model_name} takes one text; --text_b_column does not apply"
        )
    files = expand_file_patterns(config.input, "--input file")
    for path in files:
        check_columns(path, config.columns)  # also checks the file type
    output_dir = config.output_dir
    if fileio.exists(output_dir) and (not fileio.isdir(output_dir) or fileio.listdir(output_dir)):
        raise ValueError(f"--output_dir {output_dir} exists and is not empty; give a new one")
    return Prepared(tuple(files), export)


def _shard(item, num_shards: int) -> int:
    return zlib.crc32(f"{item.file}\n{item.row}".encode("utf-8")) % num_shards


def shard_path(directory: str, kind: str, shard: int, num_shards: int) -> str:
    return fileio.join(directory, f"{kind}-{shard:05d}-of-{num_shards:05d}{KINDS[kind]}")


class _ReadFile(beam.DoFn):
    def __init__(self, columns: Columns):
        self.columns = columns

    def process(self, indexed_path):
        index, path = indexed_path
        yield from read_rows(index, path, self.columns)


class _WriteShard(beam.DoFn):
    """(shard, [(sort key, payload) or None]) -> the shard file; yields (kind, records written)."""

    def __init__(self, directory: str, kind: str, num_shards: int):
        self.directory, self.kind, self.num_shards = directory, kind, num_shards

    def process(self, element):
        shard, items = element
        items = sorted((item for item in items if item is not None), key=lambda kv: kv[0])
        path = shard_path(self.directory, self.kind, shard, self.num_shards)
        if self.kind == "prediction_logs":
            written = fileio.writing_path(path)
            with tf.io.TFRecordWriter(written) as writer:
                for _, payload in items:
                    writer.write(payload)
            fileio.commit_write(written, path)
        else:
            fileio.write_text(path, "".join(payload + "\n" for _, payload in items))
        yield self.kind, len(items)


def _split(result, key_column, export):
    """A RunInference `PredictionResult` -> tagged (sort key, payload) records."""
    row, inference = result.example, result.inference
    if isinstance(inference, PredictionFailure):
        yield beam.pvalue.TaggedOutput(
            "errors", (row, records.error_json(row, inference.reason, key_column))
        )
        return
    yield row, records.prediction_json(row, inference, key_column)
    yield beam.pvalue.TaggedOutput("logs", (row, records.prediction_log(row, inference, export)))


def _write_counts(counts: dict, directory: str) -> None:
    fileio.write_json(fileio.join(directory, COUNTS_FILE), dict(counts))


def build(pipeline, config: BatchPredictConfig, prepared: Prepared, directory: str) -> None:
    """Adds the batch prediction of `prepared.files` to `pipeline`, writing into `directory`."""
    n = config.num_shards
    items = (
        pipeline
        | "files" >> beam.Create(list(enumerate(prepared.files)))
        | "read" >> beam.ParDo(_ReadFile(config.columns))
    )
    rows = items | "rows" >> beam.Filter(lambda item: isinstance(item, InputRow))
    read_errors = items | "read errors" >> beam.Filter(lambda item: not isinstance(item, InputRow))
    handler = TextSignatureHandler(
        prepared.export, config.eval_batch_size, config.bucket_boundaries or None
    )
    results = (
        rows
        | "spread" >> beam.Reshuffle()
        | "predict" >> RunInference(handler)
        | "split"
        >> beam.FlatMap(_split, config.key_column, prepared.export).with_outputs(
            "errors", "logs", main="predictions"
        )
    )
    errors = read_errors | "error lines" >> beam.Map(
        lambda e, key: (e, records.error_json(e, e.reason, key)), config.key_column
    )
    outputs = {
        "predictions": results.predictions,
        "errors": (errors, results.errors) | "merge errors" >> beam.Flatten(),
        "prediction_logs": results.logs,
    }
    counts = [items | "count read" >> beam.Map(lambda _: ("rows_read", 1))]
    for kind, records_ in outputs.items():
        keyed = records_ | f"shard {kind}" >> beam.Map(
            lambda item_payload, n: (
                _shard(item_payload[0], n),
                (records.sort_key(item_payload[0]), item_payload[1]),
            ),
            n,
        )
        empty = pipeline | f"{kind} shards" >> beam.Create([(i, None) for i in range(n)])
        counts.append(
            (keyed, empty)
            | f"all {kind}" >> beam.Flatten()
            | f"group {kind}" >> beam.GroupByKey()
            | f"write {kind}" >> beam.ParDo(_WriteShard(directory, kind, n))
        )
    _ = (
        counts
        | "counts" >> beam.Flatten()
        | "sum" >> beam.CombinePerKey(sum)
        | "as dict" >> beam.combiners.ToDict()
        | "write counts" >> beam.Map(_write_counts, directory)
    )


def summary(config: BatchPredictConfig, prepared: Prepared, counts: dict, options) -> dict:
    """batch_predict.json: the resolved config, the model, the files, the counts."""
    return {
        "config": {
            **dataclasses.asdict(config),
            "bucket_boundaries": list(config.bucket_boundaries),
        },
        "model_dir": prepared.export.version_dir,
        "model_name": prepared.export.model_name,
        "model_version": prepared.export.version,
        "signature": {
            "inputs": list(prepared.export.inputs),
            "outputs": list(prepared.export.outputs),
        },
        "input_files": list(prepared.files),
        "pipeline_options": options.get_all_options(drop_default=True) if options else {},
        "counts": counts,
        "files": {
            kind: [
                fileio.basename(shard_path("", kind, i, config.num_shards))
                for i in range(config.num_shards)
            ]
            for kind in KINDS
        },
    }


def run(config: BatchPredictConfig, options=None, prepared: Prepared | None = None) -> dict:
    """Runs the batch prediction to completion and publishes --output_dir.

    Args:
        config: the settings.
        options: Beam `PipelineOptions` (None: the DirectRunner in this process).
        prepared: `prepare(config)` when the caller already ran it.

    Returns:
        the batch_predict.json dict.

    Raises:
        ValueError / FileNotFoundError: see `prepare`.
        RuntimeError: the counts do not add up (nothing is published).
    """
    prepared = prepared or prepare(config)
    output_dir = config.output_dir
    staged = fileio.staging_dir(output_dir)
    try:
        with beam_pipelines.create_pipeline(options) as pipeline:
            build(pipeline, config, prepared, staged)
        counts_path = fileio.join(staged, COUNTS_FILE)
        got = fileio.read_json(counts_path)
        fileio.remove(counts_path)
        counts = {k: int(got.get(k, 0)) for k in ("rows_read", "predictions", "errors")}
        counts = {
            "rows_read": counts["rows_read"],
            "predicted": counts["predictions"],
            "errors": counts["errors"],
        }
        logged = int(got.get("prediction_logs", 0))
        if (
            counts["predicted"] + counts["errors"] != counts["rows_read"]
            or logged != counts["predicted"]
        ):
            raise RuntimeError(
                f"batch prediction counts do not add up: {counts}, {logged} prediction logs"
            )
        result = summary(config, prepared, counts, options)
        fileio.write_json(fileio.join(staged, SUMMARY_FILE), result)
        if fileio.isdir(output_dir):  # empty (prepare checked): publish_dir needs it absent
            fileio.rmtree(output_dir)
        fileio.publish_dir(staged, output_dir)
    except BaseException:
        fileio.rmtree(staged)
        raise
    return result
