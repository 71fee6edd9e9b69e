"""Beam, each measurement a section of docs/results/beam.md (method there): `pretraining_data`,
recipes/create_pretraining_data.py command lines on Beam's DirectRunner with N workers and in
process, on the same WikiText corpus (wall time, documents/s); `batch_predict`, rows/s of real
SST-2 sentences on Beam with length-bucketed batches, without buckets, and `task.predict` in
process. Contenders alternate, each timed end to end; medians.

    python -m benchmarks.bench_beam [--measurements=pretraining_data,batch_predict] [--copies=8]
        [--workers=2] [--rows=10000] [--batch_size=64] [--repetitions=N]
"""

import itertools
import json
import os
import pathlib
import subprocess
import sys
import tempfile

from absl import flags

from benchmarks import common, serving_harness
from keras_bert import cli, fileio

TOPIC = "beam"
FLAGS = flags.FLAGS
REPETITIONS = {"pretraining_data": 3, "batch_predict": 1}  # the measurements and their rounds
flags.DEFINE_list(
    "measurements",
    list(REPETITIONS),
    f"Which of {list(REPETITIONS)} to run; they run in that order, whatever the order given.",
)
flags.register_validator("measurements", lambda v: set(v) <= set(REPETITIONS), "unknown name")
flags.DEFINE_integer(
    "repetitions", None, "Rounds (medians); default 3 for pretraining_data, 1 for batch_predict."
)
flags.DEFINE_integer("dupe_factor", 2, "pretraining_data: passes over the corpus, fresh masks.")
flags.DEFINE_integer("workers", 2, "pretraining_data: worker processes of the parallel contender.")
flags.DEFINE_integer(
    "copies", 8, "pretraining_data: the corpus, WikiText-2 raw test + valid tokens this many times."
)
flags.DEFINE_integer("rows", 10000, "batch_predict: SST-2 sentences to predict.")
flags.DEFINE_integer("batch_size", 64, "batch_predict: rows per model call (all contenders).")
flags.DEFINE_bool("append", True, common.append_help(TOPIC))
common.bounds(repetitions=1, dupe_factor=1, workers=1, copies=1, rows=1, batch_size=1)


def recipe_run(out: pathlib.Path, workers: int, corpus, vocab_file):
    """A call running create_pretraining_data.py on `corpus` into `out` with `workers` workers."""
    command = [sys.executable, "recipes/create_pretraining_data.py", "--input_format=wikitext"]
    command += [f"--input_file={corpus}", f"--output_file={out / 'data.tfrecord'}"]
    command += [f"--vocab_file={vocab_file}", f"--dupe_factor={FLAGS.dupe_factor}"]
    command += [f"--num_workers={workers}", "--num_shards=2", "--noprogress"]
    env = dict(os.environ, PYTHONPATH=str(common.REPO), TF_CPP_MIN_LOG_LEVEL="2")

    def run():
        proc = subprocess.run(
            command, cwd=common.REPO, env=env, capture_output=True, text=True, timeout=3600
        )
        if proc.returncode:
            raise RuntimeError(f"exit {proc.returncode}\n{proc.stderr[-3000:]}")

    return run


def corpus_text(sources, copies: int) -> str:
    """The WikiText files `copies` times, " Copy c . " after each title of copy c."""
    out = []
    for c in range(copies):
        for source in sources:
            for line in fileio.text_lines(fileio.read_user_text(str(source))):
                out.append(line)
                if line.startswith(" = ") and not line.startswith(" = = "):
                    out.append(f" Copy {c} . ")
    return "\n".join(out) + "\n"


def pretraining_data(tmp: pathlib.Path, repetitions: int):
    """(title, table, notes): the recipe's documents/s with N workers and in process."""
    data = common.data_dir()
    wikitext = [("wikitext-2-raw", "wiki.test.raw"), ("wikitext-2", "wiki.valid.tokens")]
    sources = [data / "wikitext" / folder / name for folder, name in wikitext]
    vocab_file = data / "vocab" / "bert-base-uncased-vocab.txt"
    runs = {f"beam DirectRunner, {FLAGS.workers} workers": FLAGS.workers}
    runs["beam DirectRunner, in process"] = 1
    corpus = tmp / "corpus.raw"
    corpus.write_text(corpus_text(sources, FLAGS.copies), encoding="utf-8")
    contenders = {
        name: recipe_run(tmp / f"out{n}", n, corpus, vocab_file) for name, n in runs.items()
    }
    times = common.alternate(contenders, repetitions, warmup=0)
    summary = json.loads((tmp / "out1" / "data.tfrecord.summary.json").read_text())["summary"]
    documents = summary["documents"]
    corpus_mb = sum(fileio.size(p) for p in sources) * FLAGS.copies / 1e6
    medians = {name: common.median(ts) for name, ts in times.items()}
    in_process = medians["beam DirectRunner, in process"]
    rows = [
        (name, f"{m:.1f}", f"{documents / m:,.1f}", common.ratio(in_process, m))
        for name, m in medians.items()
    ]
    table = common.markdown_table(
        ["contender", "median s", "documents/s", "vs in process (documents/s ratio)"], rows
    )
    notes = [
        f"WikiText-2 raw test + valid, {FLAGS.copies} copies: {documents} documents, "
        f"{corpus_mb:.1f} MB; instances: {summary['instances']}; dupe_factor "
        f"{FLAGS.dupe_factor}, max_seq_length 128, uncased BERT vocabulary, 2 shards; "
        f"{repetitions} rounds alternating, medians."
    ]
    return "Pretraining data on Beam (bench_pretraining_data)", table, notes


def batch_predict(tmp: pathlib.Path, repetitions: int):
    """(title, body, no notes): rows/s on Beam with and without buckets, and of task.predict."""
    from keras_bert import beam
    from keras_bert.batch_prediction import pipeline

    sentences = [t.strip() for t in common.sst2_sentences("train")[0]]
    texts = [sentences[i % len(sentences)] for i in range(FLAGS.rows)]
    task = serving_harness.sst2_classifier(128)
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
    seconds = common.alternate(contenders, repetitions, warmup=0, log=False)
    rate = {name: len(texts) / common.median(s) for name, s in seconds.items()}
    rows = [
        [name, f"{common.median(s):.1f}", f"{rate[name]:.1f}"]
        + [common.ratio(rate[name], rate[base]) for base in ("beam, no buckets", "task.predict")]
        for name, s in seconds.items()
    ]
    headers = ["contender", "seconds", "rows/s", "vs beam, no buckets", "vs task.predict"]
    command = (
        f"python -m benchmarks.bench_beam --measurements=batch_predict --rows={FLAGS.rows} "
        f"--batch_size={FLAGS.batch_size} --repetitions={repetitions}"
    )
    table = common.markdown_table(headers, rows)
    return "Batch prediction on Beam", f"`{command}`\n\n{table}\n", ()


def main(argv):
    del argv
    desc = common.machine_description(["apache_beam"])
    measure = {"pretraining_data": pretraining_data, "batch_predict": batch_predict}
    with tempfile.TemporaryDirectory(prefix="bench_beam_") as tmp:
        for name in (m for m in REPETITIONS if m in FLAGS.measurements):
            work = pathlib.Path(tempfile.mkdtemp(dir=tmp))  # fresh for each measurement
            title, body, notes = measure[name](work, FLAGS.repetitions or REPETITIONS[name])
            common.report(TOPIC, title, body, desc, FLAGS.append, notes=notes)


if __name__ == "__main__":
    cli.run(main)
