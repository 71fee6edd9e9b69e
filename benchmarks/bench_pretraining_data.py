"""Pretraining data wall time and documents/s: recipes/create_pretraining_data.py on Beam's
DirectRunner (N workers and in process) against the retired multiprocessing recipe, whole command
lines on the same WikiText corpus, alternating, medians (method: docs/results/beam.md).

    python -m benchmarks.bench_pretraining_data [--copies=8] [--repetitions=3]
"""

import os
import pathlib
import subprocess
import sys
import tempfile

from absl import app, flags

from benchmarks import common

REPO = common.REPO
TOPIC = "beam"
FLAGS = flags.FLAGS
flags.DEFINE_integer("repetitions", 3, "Rounds (medians).")
flags.DEFINE_integer("dupe_factor", 2, "Passes over the corpus with fresh masks.")
flags.DEFINE_integer("workers", 2, "Worker processes of both parallel contenders.")
flags.DEFINE_integer(
    "copies",
    8,
    "The corpus: the shipped WikiText-2 files (raw test and valid tokens), this many times, "
    "each copy's documents made distinct by one added sentence naming the copy.",
)
flags.DEFINE_string(
    "retired_commit",
    "385f283",
    "The last commit whose create_pretraining_data tokenized with Python multiprocessing.",
)
flags.DEFINE_bool("append", True, common.append_help(TOPIC))


def _recipe_command(root: pathlib.Path, out: pathlib.Path, workers: int, corpus, vocab_file):
    """A call running `root`'s create_pretraining_data.py on `corpus` into `out`."""
    env = dict(os.environ, PYTHONPATH=str(root), TF_CPP_MIN_LOG_LEVEL="2")
    args = [
        f"--input_file={corpus}",
        "--input_format=wikitext",
        f"--output_file={out / 'data.tfrecord'}",
        "--num_shards=2",
        f"--vocab_file={vocab_file}",
        f"--dupe_factor={FLAGS.dupe_factor}",
        f"--num_workers={workers}",
        "--noprogress",
    ]

    def run():
        proc = subprocess.run(
            [sys.executable, str(root / "recipes" / "create_pretraining_data.py"), *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        if proc.returncode:
            raise RuntimeError(f"{root}: exit {proc.returncode}\n{proc.stderr[-3000:]}")

    return run


def _corpus(sources, copies: int) -> str:
    """The WikiText files `copies` times, " Copy c . " after each title of copy c."""
    from keras_bert import fileio  # loads TensorFlow: after the thread settings

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
    import json

    desc = common.machine_description(["apache_beam"])
    data_dir = common.data_dir().resolve()
    sources = [
        data_dir / "wikitext" / "wikitext-2-raw" / "wiki.test.raw",
        data_dir / "wikitext" / "wikitext-2" / "wiki.valid.tokens",
    ]
    vocab_file = data_dir / "vocab" / "bert-base-uncased-vocab.txt"
    with tempfile.TemporaryDirectory(prefix="bench_ptd_") as tmp:
        tmp = pathlib.Path(tmp)
        corpus = tmp / "corpus.raw"
        corpus.write_text(_corpus(sources, FLAGS.copies), encoding="utf-8")
        retired = tmp / "retired"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(retired), FLAGS.retired_commit],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        w, out = FLAGS.workers, tmp / "out"
        try:
            runs = {  # name -> (checkout, output folder, workers)
                f"retired multiprocessing, {w} workers": (retired, "retired", w),
                f"beam DirectRunner, {w} workers": (REPO, "beam", w),
                "beam DirectRunner, in process": (REPO, "beam1", 1),
            }
            contenders = {
                name: _recipe_command(root, out / dir_name, n, corpus, vocab_file)
                for name, (root, dir_name, n) in runs.items()
            }
            times = common.alternate(contenders, FLAGS.repetitions, warmup=0)
            summaries = {
                name: json.loads((out / name / "data.tfrecord.summary.json").read_text())
                for name in ("retired", "beam", "beam1")
            }
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(retired)], cwd=REPO, check=False
            )
    documents = summaries["beam"]["summary"]["documents"]
    corpus_mb = sum(p.stat().st_size for p in sources) * FLAGS.copies / 1e6
    retired_median = common.median(times[f"retired multiprocessing, {w} workers"])
    rows = []
    for name, ts in times.items():
        m = common.median(ts)
        rows.append((name, f"{m:.1f}", f"{documents / m:,.1f}", common.ratio(retired_median, m)))
    table = common.markdown_table(
        ["contender", "median s", "documents/s", "vs retired (documents/s ratio)"], rows
    )
    body = (
        table + f"\n\n- WikiText-2 raw test + valid, {FLAGS.copies} copies: {documents} "
        f"documents, {corpus_mb:.1f} MB; instances: "
        f"{summaries['beam']['summary']['instances']} (Beam) and "
        f"{summaries['retired']['summary']['instances']} (retired; another random stream, so "
        f"a slightly different count); dupe_factor {FLAGS.dupe_factor}, max_seq_length 128, "
        f"uncased BERT vocabulary, 2 shards. Whole command lines, start-up included; "
        f"{FLAGS.repetitions} rounds alternating, medians. The retired path is commit "
        f"{FLAGS.retired_commit}."
    )
    common.report(
        TOPIC, "Pretraining data on Beam (bench_pretraining_data)", body, desc, FLAGS.append
    )


if __name__ == "__main__":
    app.run(main)
