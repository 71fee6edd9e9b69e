"""Item 6 of issue 7: pretraining data creation rate (instances/s), by stage.

Runs `keras_bert.data.pretraining_data` (the library behind recipes/create_pretraining_data.py)
on WikiText-2 raw test (`wikitext/wikitext-2-raw/wiki.test.raw` of the shipped data), uncased
BERT vocab: tokenization with 1 and with --workers processes (alternating), then instance creation
(NSP pairs + masking, --dupe_factor passes) and TFRecord writing. Medians over --repetitions.

    python -m benchmarks.bench_pretraining_data [--repetitions=2] [--dupe_factor=2]
"""

import os
import pathlib
import tempfile
import time

from absl import app, flags

from benchmarks import common

FLAGS = flags.FLAGS
flags.DEFINE_integer("repetitions", 2, "Rounds (medians).")
flags.DEFINE_integer("dupe_factor", 2, "Passes over the corpus with fresh masks.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per instance.")
flags.DEFINE_integer("workers", 2, "Tokenizer processes of the parallel contender.")
flags.DEFINE_bool("append", True, "Append the table to benchmarks/RESULTS.md.")


def main(argv):
    del argv
    from keras_bert.data import pretraining_data as pd
    from keras_bert.tokenization import FullTokenizer

    desc = common.machine_description()
    data_dir = pathlib.Path(
        os.environ.get(
            "KERAS_BERT_DATA_DIR", pathlib.Path(__file__).resolve().parents[2] / "shared" / "data"
        )
    )
    corpus = str(data_dir / "wikitext" / "wikitext-2-raw" / "wiki.test.raw")
    vocab_file = str(data_dir / "vocab" / "bert-base-uncased-vocab.txt")
    tokenizer = FullTokenizer(vocab_file, do_lower_case=True)
    vocab_words = list(tokenizer.vocab.keys())

    holder = {}

    def tokenize(workers):
        def run():
            holder["documents"] = pd.tokenize_corpus(
                [corpus], vocab_file, True, "wikitext", workers, show_progress=False
            )

        return run

    tok_times = common.alternate(
        {
            "tokenize, 1 process": tokenize(1),
            f"tokenize, {FLAGS.workers} processes": tokenize(FLAGS.workers),
        },
        FLAGS.repetitions,
        warmup=0,
    )
    documents = holder["documents"]
    num_sentences = sum(len(d) for d in documents)
    num_pieces = sum(len(s) for d in documents for s in d)

    create_t, write_t, n_inst = [], [], 0
    with tempfile.TemporaryDirectory(prefix="bench_ptd_") as tmp:
        for r in range(FLAGS.repetitions):
            start = time.perf_counter()
            instances = pd.create_training_instances(
                documents,
                vocab_words,
                FLAGS.max_seq_length,
                FLAGS.dupe_factor,
                0.1,
                0.15,
                20,
                False,
                12345 + r,
            )
            create_t.append(time.perf_counter() - start)
            n_inst = len(instances)
            start = time.perf_counter()
            pd.write_instances(
                instances,
                tokenizer.vocab,
                pd.shard_paths(os.path.join(tmp, f"r{r}.tfrecord"), 2),
                FLAGS.max_seq_length,
                20,
            )
            write_t.append(time.perf_counter() - start)
            print(
                f"  round {r + 1}: {n_inst} instances, create {create_t[-1]:.1f} s, "
                f"write {write_t[-1]:.1f} s",
                flush=True,
            )

    rows = []
    for name, ts in tok_times.items():
        rows.append(
            (
                name,
                f"{common.median(ts):.1f}",
                f"{len(documents) / common.median(ts):,.0f} "
                f"documents/s, {num_pieces / common.median(ts):,.0f} pieces/s",
            )
        )
    rows.append(
        (
            f"create instances (dupe_factor {FLAGS.dupe_factor})",
            f"{common.median(create_t):.1f}",
            f"{n_inst / common.median(create_t):,.0f} instances/s",
        )
    )
    rows.append(
        (
            "write TFRecords (2 shards)",
            f"{common.median(write_t):.1f}",
            f"{n_inst / common.median(write_t):,.0f} instances/s",
        )
    )
    best_tok = min(common.median(ts) for ts in tok_times.values())
    total = best_tok + common.median(create_t) + common.median(write_t)
    rows.append(
        (
            "end to end (best tokenizer setting)",
            f"{total:.1f}",
            f"{n_inst / total:,.0f} instances/s",
        )
    )
    table = common.markdown_table(["stage", "median s", "rate"], rows)
    body = (
        table + f"\n\n- WikiText-2 raw test: {len(documents)} documents, {num_sentences} "
        f"sentences, {num_pieces} word pieces; {n_inst} instances of max_seq_length "
        f"{FLAGS.max_seq_length}, max_predictions_per_seq 20, masked_lm_prob 0.15; "
        f"{FLAGS.repetitions} rounds, medians."
    )
    print(body)
    if FLAGS.append:
        common.append_results(
            "Pretraining data creation (bench_pretraining_data)",
            body,
            desc,
            load_after=common.load_average(),
        )


if __name__ == "__main__":
    app.run(main)
