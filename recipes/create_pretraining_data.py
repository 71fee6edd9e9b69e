"""Creates BERT pretraining TFRecords (masked LM + next sentence) from a text corpus.

Flags and semantics of google-research/bert `create_pretraining_data.py`; the algorithm and its
documented deviations live in `keras_bert.data.pretraining_data`. Writes the records and
`<first --output_file>.summary.json` (resolved flags + instances, tokens, masked fraction, 80/10/10
split, NSP positive rate, seconds).

    python recipes/create_pretraining_data.py --input_file=wiki.test.raw --input_format=wikitext \
      --output_file=out/wiki.tfrecord --num_shards=4 --vocab_file=vocab.txt --do_lower_case \
      --max_seq_length=128 --max_predictions_per_seq=20 --masked_lm_prob=0.15 --dupe_factor=5
"""

import os
import time

from absl import app, flags

from keras_bert.data import pretraining_data as pd
from keras_bert.data.file_patterns import expand_file_patterns
from keras_bert.tokenization import FullTokenizer
from keras_bert import fileio
from keras_bert.cli import fail_usage, require_reachable_flags

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Input text file(s): comma-separated paths or globs.")
flags.DEFINE_enum(
    "input_format",
    "text",
    ["text", "wikitext"],
    "text: one sentence per line, blank line between documents. wikitext: ' = Title = ' "
    "lines start documents, paragraphs are split into sentences.",
)
flags.DEFINE_string("output_file", None, "Output TFRecord file(s), comma-separated.")
flags.DEFINE_integer("num_shards", 1, "Split a single --output_file into this many shards.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (uncased models).")
flags.DEFINE_bool("do_whole_word_mask", False, "Mask all the ## pieces of a word together.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length (tokens incl. specials).")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed; same seed and inputs = identical bytes.")
flags.DEFINE_integer("dupe_factor", 10, "Passes over the data, each with different masks.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of candidate tokens to predict.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter target sequence length.")
flags.DEFINE_integer("num_workers", min(4, os.cpu_count() or 1), "Tokenizer processes.")
flags.DEFINE_bool("progress", True, "Show progress bars.")
flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])


def main(argv):
    del argv

    start = time.time()
    require_reachable_flags("input_file", "output_file", "vocab_file")
    try:
        input_files = expand_file_patterns(FLAGS.input_file)
    except FileNotFoundError as e:  # a usage error: one line, exit code 2
        fail_usage(str(e))
    tokenizer = FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
    if FLAGS.max_seq_length < 5:
        fail_usage(
            f"--max_seq_length={FLAGS.max_seq_length} must be >= 5 for pretraining "
            "instances (two non-empty segments and three special tokens)"
        )
    documents = pd.tokenize_corpus(
        input_files,
        FLAGS.vocab_file,
        FLAGS.do_lower_case,
        FLAGS.input_format,
        FLAGS.num_workers,
        FLAGS.progress,
    )
    instances = pd.create_training_instances(
        documents,
        list(tokenizer.vocab.keys()),
        FLAGS.max_seq_length,
        FLAGS.dupe_factor,
        FLAGS.short_seq_prob,
        FLAGS.masked_lm_prob,
        FLAGS.max_predictions_per_seq,
        FLAGS.do_whole_word_mask,
        FLAGS.random_seed,
        FLAGS.progress,
    )
    output_files = pd.shard_paths(FLAGS.output_file, FLAGS.num_shards)
    counts = pd.write_instances(
        instances,
        tokenizer.vocab,
        output_files,
        FLAGS.max_seq_length,
        FLAGS.max_predictions_per_seq,
    )
    summary = pd.summarize_instances(instances, num_documents=len(documents))
    summary["shards"] = dict(zip((fileio.basename(p) for p in output_files), counts))
    config = {
        name: FLAGS[name].value
        for name in (
            "input_file",
            "input_format",
            "output_file",
            "num_shards",
            "vocab_file",
            "do_lower_case",
            "do_whole_word_mask",
            "max_seq_length",
            "max_predictions_per_seq",
            "random_seed",
            "dupe_factor",
            "masked_lm_prob",
            "short_seq_prob",
        )
    }
    # Seconds are kept out of the summary so that a rerun writes identical bytes.
    # Named after --output_file, not a shard, so that the shard glob "<output_file>-*" skips it.
    pd.write_summary(
        {"config": config, "summary": summary},
        FLAGS.output_file.split(",")[0].strip() + ".summary.json",
    )
    print(
        f"wrote {summary['instances']} instances to {len(output_files)} file(s) in "
        f"{time.time() - start:.1f} s; masked fraction {summary['masked_fraction']:.4f}, "
        f"split {summary['mask_split']}, NSP positive rate {summary['nsp_positive_rate']:.4f}"
    )


if __name__ == "__main__":
    app.run(main)
