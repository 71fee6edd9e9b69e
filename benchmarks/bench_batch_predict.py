"""Batch prediction on Beam: rows/s of real SST-2 sentences with length-bucketed batches, without
buckets, and `task.predict` in process, side by side in one run, each timed end to end (method:
docs/results/beam.md).

    python -m benchmarks.bench_batch_predict [--rows=10000] [--batch_size=64] [--repetitions=1]
"""

import itertools
import pathlib
import tempfile

from absl import app, flags

from benchmarks import common, serving_harness

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
    task = serving_harness.sst2_classifier(128)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench_batch_predict_"))
    version_dir = task.export(str(tmp / "models"), "sst2")
    data = tmp / "rows.tsv"
    data.write_text("sentence\n" + "".join(t.replace("\t", " ") + "\n" for t in texts))
    options = beam.pipeline_options(beam.pipeline_args("DirectRunner", "", 1, False))
    task.predict(texts[: FLAGS.batch_size], batch_size=FLAGS.batch_size)  # warm up the trace
    runs = itertools.count(1)

    def beam_run(boundaries):
        def call():
            config = pipeline.BatchPredictConfig(
                model=version_dir,
                input=str(data),
                output_dir=str(tmp / f"out{next(runs)}"),
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
        [name, f"{common.median(s):.1f}", f"{rate[name]:.1f}"]
        + [common.ratio(rate[name], rate[base]) for base in ("beam, no buckets", "task.predict")]
        for name, s in seconds.items()
    ]
    headers = ["contender", "seconds", "rows/s", "vs beam, no buckets", "vs task.predict"]
    table = common.markdown_table(headers, rows)
    command = (
        f"python -m benchmarks.bench_batch_predict --rows={FLAGS.rows} "
        f"--batch_size={FLAGS.batch_size} --repetitions={FLAGS.repetitions}"
    )
    body = f"`{command}`\n\n{table}\n"
    common.report(TOPIC, "Batch prediction on Beam", body, desc, FLAGS.append)


if __name__ == "__main__":
    app.run(main)
