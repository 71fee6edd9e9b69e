"""Batch prediction on Apache Beam: an exported model over CSV / TSV / JSONL / TFRecord files.

    python recipes/batch_predict.py --model=models/sst2 --input='data/*.tsv' \
        --text_column=sentence [--text_b_column=...] [--key_column=id] --output_dir=preds/sst2 \
        [--eval_batch_size=64] [--bucket_boundaries=32,64,128,256,512] [--num_shards=1] \
        [--runner=DirectRunner] [--num_workers=1] [--beam_pipeline_options=key=value,...]

--model is a SavedModel version directory or a model base directory (its newest complete version
is taken). Writes predictions-*.jsonl, errors-*.jsonl, prediction_logs-*.tfrecord and
batch_predict.json (config and counts) into --output_dir, published only when complete.
`recipes/evaluate.py --predictions=<output_dir> --data=<labelled file>` scores the result.
See docs/batch_prediction.md.
"""

import sys

from absl import flags

from keras_bert import beam
from keras_bert.batch_prediction import pipeline
from keras_bert.cli import fail_usage, require_reachable_flags, run
from keras_bert.training import arg_flags, args, argument_set
from keras_bert.training.flag_dependencies import check_flag_partners

F = flags
F.DEFINE_string("model", None, "SavedModel version dir, or a model base dir (newest version).")
F.DEFINE_string("input", None, "Comma-separated files / globs: .csv, .tsv, .jsonl, .tfrecord.")
F.DEFINE_string("output_dir", None, "Where the outputs are published (new or empty).")
F.DEFINE_string("text_column", "text", "Text column (JSON key, tf.Example feature).")
F.DEFINE_string("text_b_column", None, "Second text column (pair tasks).")
F.DEFINE_string("key_column", None, "Column that identifies a row in the outputs.")
F.DEFINE_string(
    "bucket_boundaries",
    ",".join(map(str, pipeline.DEFAULT_BUCKET_BOUNDARIES)),
    "Length buckets in characters of text (+ text_b): rows of one bucket are batched together. "
    "'none' batches rows in arrival order.",
)
F.DEFINE_integer("num_shards", 1, "Files per output kind.")
beam.define_flags()
REQUIRED = ("model", "input", "output_dir")
F.mark_flags_as_required(REQUIRED)
# The prediction batch of the fine-tuning recipes (rows per model call); this program's
# --batch_size is still accepted, with a warning.
BatchPredictArgs = argument_set.fields_of(
    "BatchPredictArgs", args.TrainingArgs, {"eval_batch_size": {"deprecated_name": "batch_size"}}
)
arg_flags.define_program_flags(BatchPredictArgs)
FLAGS = F.FLAGS


def bucket_boundaries(text: str) -> tuple:
    if text.strip().lower() in ("", "none", "0"):
        return ()
    try:
        return tuple(int(b) for b in text.split(",") if b.strip())
    except ValueError:
        fail_usage(f"--bucket_boundaries={text} is not comma-separated integers (or 'none')")


def main(argv):
    if len(argv) > 1:
        fail_usage(f"unexpected arguments: {' '.join(argv[1:])}")
    require_reachable_flags(*REQUIRED, required=REQUIRED)
    check_flag_partners("batch_predict")
    settings = arg_flags.read_program_flags(BatchPredictArgs)
    config = pipeline.BatchPredictConfig(
        model=FLAGS.model,
        input=FLAGS.input,
        output_dir=FLAGS.output_dir,
        text_column=FLAGS.text_column,
        text_b_column=FLAGS.text_b_column,
        key_column=FLAGS.key_column,
        eval_batch_size=settings.eval_batch_size,
        bucket_boundaries=bucket_boundaries(FLAGS.bucket_boundaries),
        num_shards=FLAGS.num_shards,
    )
    try:
        options = beam.pipeline_options_from_flags()
        prepared = pipeline.prepare(config)
    except (ValueError, FileNotFoundError) as e:
        fail_usage(str(e))
    result = pipeline.run(config, options, prepared)
    counts = result["counts"]
    output_dir = FLAGS.output_dir.rstrip("/")
    print(
        f"rows read {counts['rows_read']}, predicted {counts['predicted']}, errors "
        f"{counts['errors']} (model {result['model_dir']}; all: "
        f"{output_dir}/{pipeline.SUMMARY_FILE})",
        flush=True,
    )
    if not counts["predicted"]:  # published as it is, but a job that made nothing has failed
        sys.exit(
            f"batch_predict.py: error: no row was predicted: {counts['rows_read']} rows read, "
            f"{counts['errors']} in {output_dir}/errors-*.jsonl with their reasons"
        )


if __name__ == "__main__":
    run(main)
