"""Tokenizer throughput (SST-2 dev sentences/s at batch 1 and batch 256): tensorflow-text's
FastBertTokenizer, alone and behind our text cleaning, against our core-op tokenizer and the
Python reference, each in graph mode (method: docs/results/tokenizers.md).

    python -m benchmarks.bench_tokenizers [--repetitions=7] [--noappend]
"""

from absl import flags

from benchmarks import common
from keras_bert import cli

TOPIC = "tokenizers"
FLAGS = flags.FLAGS
flags.DEFINE_integer("repetitions", 7, "Alternating rounds per batch size.")
flags.DEFINE_integer("batch_size", 256, "Large batch size.")
flags.DEFINE_integer("batch1_calls", 64, "Batch-1 calls (sentences) per timed unit.")
flags.DEFINE_string("data_dir", None, "Data dir (default $KERAS_BERT_DATA_DIR or ../shared/data).")
flags.DEFINE_bool("append", True, common.append_help(TOPIC))
flags.DEFINE_string("note", "", "Free text added under the table (e.g. before/after a change).")
common.bounds(repetitions=1, batch_size=1, batch1_calls=1)
common.existing("data_dir")


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
    vocab = sorted(ref.vocab, key=ref.vocab.get)  # tokens in id order
    fast = tensorflow_text.FastBertTokenizer(
        vocab, token_out_type=tf.int64, lower_case_nfd_strip_accents=True
    )
    spec = [tf.TensorSpec([None], tf.string)]
    graph_fns = {
        "tf_text": tf.function(fast.tokenize, input_signature=spec),
        "tf_text+clean": tf.function(
            BertPreprocessor(vocab_file, tokenizer="tf_text").tokenize, input_signature=spec
        ),
        "core": tf.function(CoreBertTokenizer(vocab_file).tokenize, input_signature=spec),
    }
    big, singles = (sentences * 2)[: FLAGS.batch_size], sentences[: FLAGS.batch1_calls]
    results = {}
    for label, texts, batches in (
        (f"batch {FLAGS.batch_size}", big, [tf.constant(big)]),
        ("batch 1", singles, [tf.constant([s]) for s in singles]),
    ):
        contenders = {
            k: lambda f=f, bs=batches: [f(x).flat_values.numpy() for x in bs]
            for k, f in graph_fns.items()
        }
        contenders["python"] = lambda texts=texts: [ref.tokenize_to_ids(s) for s in texts]
        print(f"{label}:")
        results[label] = common.rates(contenders, len(texts), FLAGS.repetitions)

    names = ["tf_text", "tf_text+clean", "core", "python"]
    rows = [
        [label] + [r[n] for n in names] + [common.ratio(r["core"], r["tf_text"])]
        for label, r in results.items()
    ]
    table = common.markdown_table(["SST-2 dev sentences/s"] + names + ["core / tf_text"], rows)
    body = (
        f"Uncased vocab; {FLAGS.repetitions} alternating rounds, medians; batch 1 = "
        f"{len(singles)} single-sentence calls per unit; graph mode (tf.function).\n\n"
        + table
        + ("\n\n" + FLAGS.note if FLAGS.note else "")
    )
    common.report(TOPIC, "Tokenizer throughput (bench_tokenizers)", body, desc, FLAGS.append)


if __name__ == "__main__":
    cli.run(main)
