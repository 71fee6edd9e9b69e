"""Tokenizer throughput: tensorflow-text FastBertTokenizer vs our core-op tokenizer vs the
Python reference, on the same SST-2 dev sentences.

Contenders, each in its own `tf.function` with a `[None]` string signature (graph mode, as in
tf.data and serving), in one process, alternating repetitions, medians (benchmarks/common.py):
- tf_text: `tensorflow_text.FastBertTokenizer(lower_case_nfd_strip_accents=True)` alone;
- tf_text+clean: our `BertPreprocessor(tokenizer="tf_text").tokenize` (reference text cleaning
  with core ops, then FastBertTokenizer);
- core: `CoreBertTokenizer.tokenize` (core TF ops only, reference-exact ids);
- python: `FullTokenizer.tokenize_to_ids` in a Python loop.
Batch 1 (one call per sentence, `--batch1_calls` sentences per timed unit) and batch 256.
Reports sentences/s and ratios against tf_text; appends to docs/results/tokenizers.md.

    python -m benchmarks.bench_tokenizers [--repetitions=7] [--noappend]
"""

from absl import app, flags

from benchmarks import common

TOPIC = "tokenizers"
FLAGS = flags.FLAGS
flags.DEFINE_integer("repetitions", 7, "Alternating rounds per batch size.")
flags.DEFINE_integer("batch_size", 256, "Large batch size.")
flags.DEFINE_integer("batch1_calls", 64, "Batch-1 calls (sentences) per timed unit.")
flags.DEFINE_string("data_dir", None, "Data dir (default $KERAS_BERT_DATA_DIR or ../shared/data).")
flags.DEFINE_bool("append", True, common.append_help(TOPIC))
flags.DEFINE_string("note", "", "Free text added under the table (e.g. before/after a change).")


def main(argv):
    del argv
    common.set_threads_from_env()
    import tensorflow as tf
    import tensorflow_text

    from keras_bert.tokenization import BertPreprocessor, CoreBertTokenizer, FullTokenizer

    vocab_file = str(common.data_dir(FLAGS.data_dir) / "vocab" / "bert-base-uncased-vocab.txt")
    desc = common.machine_description()
    sentences = common.sst2_sentences("dev", data=FLAGS.data_dir)[0]
    ref = FullTokenizer(vocab_file)
    vocab = [None] * len(ref.vocab)
    for t, i in ref.vocab.items():
        vocab[i] = t
    spec = [tf.TensorSpec([None], tf.string)]
    fast = tensorflow_text.FastBertTokenizer(
        vocab, token_out_type=tf.int64, lower_case_nfd_strip_accents=True
    )
    core = CoreBertTokenizer(vocab_file)
    prep = BertPreprocessor(vocab_file, tokenizer="tf_text")
    graph_fns = {
        "tf_text": tf.function(lambda x: fast.tokenize(x), input_signature=spec),
        "tf_text+clean": tf.function(prep.tokenize, input_signature=spec),
        "core": tf.function(core.tokenize, input_signature=spec),
    }

    def graph_call(fn, batch):
        return lambda: fn(batch).flat_values.numpy()

    big = tf.constant((sentences * 2)[: FLAGS.batch_size])
    big_py = (sentences * 2)[: FLAGS.batch_size]
    singles = [tf.constant([s]) for s in sentences[: FLAGS.batch1_calls]]
    results = {}
    for label, n_sent, contenders in (
        (
            f"batch {FLAGS.batch_size}",
            FLAGS.batch_size,
            {
                **{k: graph_call(f, big) for k, f in graph_fns.items()},
                "python": lambda: [ref.tokenize_to_ids(s) for s in big_py],
            },
        ),
        (
            "batch 1",
            len(singles),
            {
                **{
                    k: (lambda f=f: [f(x).flat_values.numpy() for x in singles])
                    for k, f in graph_fns.items()
                },
                "python": lambda: [ref.tokenize_to_ids(s) for s in sentences[: len(singles)]],
            },
        ),
    ):
        print(f"{label}:")
        times = common.alternate(contenders, FLAGS.repetitions, warmup=2)
        results[label] = {k: n_sent / common.median(v) for k, v in times.items()}

    names = ["tf_text", "tf_text+clean", "core", "python"]
    rows = []
    for label, r in results.items():
        rows.append([label] + [r[n] for n in names] + [common.ratio(r["core"], r["tf_text"])])
    table = common.markdown_table(["SST-2 dev sentences/s"] + names + ["core / tf_text"], rows)
    print(table)
    if FLAGS.append:
        body = (
            f"Uncased vocab; {FLAGS.repetitions} alternating rounds, medians; batch 1 = "
            f"{len(singles)} single-sentence calls per unit; graph mode (tf.function).\n\n"
            + table
            + ("\n\n" + FLAGS.note if FLAGS.note else "")
        )
        common.append_results(TOPIC, "Tokenizer throughput (bench_tokenizers)", body, desc)


if __name__ == "__main__":
    app.run(main)
