"""Batch prediction on Beam: rows/s with length-bucketed batches, without buckets, and
`task.predict` in process, side by side in one run.

The model: the serving benchmarks' classifier (`common.sst2_classifier`: a 2-class
TextClassifier on the real pretrained MiniLM-L6-H384 encoder, a fixed random head, which changes
nothing about speed), max_seq_length 128, exported once to a temporary base. The rows: real SST-2 sentences
($KERAS_BERT_DATA_DIR/glue/sst2/train.tsv, in file order, repeated if --rows asks for more).

Contenders, each timed end to end once per round (medians over --repetitions):
- "beam, buckets": `keras_bert.batch_prediction.pipeline.run` on the DirectRunner in this process
  (one worker), the default bucket boundaries (characters), --batch_size rows per call;
- "beam, no buckets": the same with `bucket_boundaries=()` (rows batched as they arrive);
- "task.predict": `task.predict(texts, batch_size)` in this process, no Beam (rows in file
  order, each batch padded to its longest row).
The Beam times include pipeline start-up, loading the SavedModel, reading the TSV and writing
the outputs; task.predict's only the predictions.

    python -m benchmarks.bench_batch_predict [--rows=10000] [--batch_size=64] [--repetitions=1]
"""

import pathlib
import tempfile

from absl import app, flags

from benchmarks import common

TOPIC = "beam"
FLAGS = flags.FLAGS
flags.DEFINE_integer("rows", 10000, "SST-2 sentences to predict.")
flags.DEFINE_integer("batch_size", 64, "Rows per model call (all contenders).")
flags.DEFINE_integer("repetitions", 1, "Rounds (medians).")
flags.DEFINE_boolean("append", False, common.append_help(TOPIC))


def main(argv):
    del argv
    from keras_bert import beam
    from keras_bert.batch_prediction import pipeline

    desc = common.machine_description(["apache_beam"])
    sentences = [t.strip() for t in common.sst2_sentences("train")[0]]
    texts = [sentences[i % len(sentences)] for i in range(FLAGS.rows)]
    task = common.sst2_classifier(128)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench_batch_predict_"))
    version_dir = task.export(str(tmp / "models"), "sst2")
    data = tmp / "rows.tsv"
    data.write_text("sentence\n" + "".join(t.replace("\t", " ") + "\n" for t in texts))
    options = beam.pipeline_options(beam.pipeline_args("DirectRunner", "", 1, False))
    task.predict(texts[: FLAGS.batch_size], batch_size=FLAGS.batch_size)  # warm up the trace
    runs = {"n": 0}

    def beam_run(boundaries):
        def call():
            runs["n"] += 1
            config = pipeline.BatchPredictConfig(
                model=version_dir,
                input=str(data),
                output_dir=str(tmp / f"out{runs['n']}"),
                text_column="sentence",
                eval_batch_size=FLAGS.batch_size,
                bucket_boundaries=boundaries,
            )
            counts = pipeline.run(config, options)["counts"]
            assert counts["predicted"] == len(texts), counts

        return call

    contenders = {
        "beam, buckets": beam_run(pipeline.DEFAULT_BUCKET_BOUNDARIES),
        "beam, no buckets": beam_run(()),
        "task.predict": lambda: task.predict(texts, batch_size=FLAGS.batch_size),
    }
    seconds = common.alternate(contenders, FLAGS.repetitions, warmup=0, log=False)
    rate = {name: len(texts) / common.median(s) for name, s in seconds.items()}
    rows = [
        [
            name,
            f"{common.median(seconds[name]):.1f}",
            f"{rate[name]:.1f}",
            common.ratio(rate[name], rate["beam, no buckets"]),
            common.ratio(rate[name], rate["task.predict"]),
        ]
        for name in contenders
    ]
    table = common.markdown_table(
        ["contender", "seconds", "rows/s", "vs beam, no buckets", "vs task.predict"], rows
    )
    command = (
        f"python -m benchmarks.bench_batch_predict --rows={FLAGS.rows} "
        f"--batch_size={FLAGS.batch_size} --repetitions={FLAGS.repetitions}"
    )
    body = f"`{command}`\n\n{table}\n"
    common.report(TOPIC, "Batch prediction on Beam", body, desc, FLAGS.append)


if __name__ == "__main__":
    app.run(main)
