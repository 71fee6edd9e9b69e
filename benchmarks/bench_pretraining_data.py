"""Pretraining data wall time and documents/s: recipes/create_pretraining_data.py on Beam's
DirectRunner with N workers and in process, whole command lines on the same WikiText corpus,
alternating, medians (method: docs/results/beam.md).

    python -m benchmarks.bench_pretraining_data [--copies=8] [--repetitions=3] [--workers=2]
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile

from absl import app, flags

from benchmarks import common

TOPIC = "beam"
FLAGS = flags.FLAGS
flags.DEFINE_integer("repetitions", 3, "Rounds (medians).")
flags.DEFINE_integer("dupe_factor", 2, "Passes over the corpus with fresh masks.")
flags.DEFINE_integer("workers", 2, "Worker processes of the parallel contender.")
flags.DEFINE_integer(
    "copies",
    8,
    "The corpus: the shipped WikiText-2 files (raw test and valid tokens), this many times, "
    "each copy's documents made distinct by one added sentence naming the copy.",
)
flags.DEFINE_bool("append", True, common.append_help(TOPIC))


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
    from keras_bert import fileio  # loads TensorFlow

    out = []
    for c in range(copies):
        for source in sources:
            for line in fileio.text_lines(fileio.read_user_text(str(source))):
                out.append(line)
                if line.startswith(" = ") and not line.startswith(" = = "):
                    out.append(f" Copy {c} . ")
    return "\n".join(out) + "\n"


def main(argv):
    del argv
    desc = common.machine_description(["apache_beam"])
    data_dir = common.data_dir().resolve()
    sources = [
        data_dir / "wikitext" / "wikitext-2-raw" / "wiki.test.raw",
        data_dir / "wikitext" / "wikitext-2" / "wiki.valid.tokens",
    ]
    vocab_file = data_dir / "vocab" / "bert-base-uncased-vocab.txt"
    runs = {f"beam DirectRunner, {FLAGS.workers} workers": FLAGS.workers}
    runs["beam DirectRunner, in process"] = 1
    with tempfile.TemporaryDirectory(prefix="bench_ptd_") as tmp:
        tmp = pathlib.Path(tmp)
        corpus = tmp / "corpus.raw"
        corpus.write_text(corpus_text(sources, FLAGS.copies), encoding="utf-8")
        contenders = {
            name: recipe_run(tmp / f"out{n}", n, corpus, vocab_file) for name, n in runs.items()
        }
        times = common.alternate(contenders, FLAGS.repetitions, warmup=0)
        summary = json.loads((tmp / "out1" / "data.tfrecord.summary.json").read_text())["summary"]
    documents = summary["documents"]
    corpus_mb = sum(p.stat().st_size for p in sources) * FLAGS.copies / 1e6
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
        f"{FLAGS.repetitions} rounds alternating, medians."
    ]
    title = "Pretraining data on Beam (bench_pretraining_data)"
    common.report(TOPIC, title, table, desc, FLAGS.append, notes=notes)


if __name__ == "__main__":
    app.run(main)
