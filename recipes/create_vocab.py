"""Learns a WordPiece vocab.txt from a text corpus (tensorflow-text's bert_vocab_from_dataset).

Reserved tokens come first: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 (+ --extra_reserved_tokens).
The file loads in `keras_bert.tokenization.FullTokenizer` and tensorflow-text's BertTokenizer.
Writes `<vocab_file>.config.json` beside it (flags, size, seconds).

    python recipes/create_vocab.py --input_file=wiki.test.raw --input_format=wikitext \
      --vocab_file=out/vocab.txt --vocab_size=8000 --do_lower_case
"""

import time

from absl import flags

from keras_bert.data import pretraining_data as pd
from keras_bert.data.file_patterns import expand_file_patterns
from keras_bert.data import vocab_builder
from keras_bert import fileio
from keras_bert.cli import define_corpus_flags, fail_usage, require_reachable_flags, run
from keras_bert.training.flag_dependencies import check_flag_partners

FLAGS = flags.FLAGS
define_corpus_flags()
flags.DEFINE_string("vocab_file", None, "Output vocab.txt.")
flags.DEFINE_integer(
    "vocab_size", 8000, "Target vocabulary size (the learner may return up to 5% fewer)."
)
flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents before learning.")
flags.DEFINE_integer("min_count", 2, "Lowest word count the learner's threshold search may use.")
flags.DEFINE_list("extra_reserved_tokens", [], "More reserved tokens after the five standard ones.")
REQUIRED = ("input_file", "vocab_file")
flags.mark_flags_as_required(REQUIRED)


def main(argv):
    del argv
    require_reachable_flags(*REQUIRED, required=REQUIRED)
    check_flag_partners("create_vocab")
    start = time.time()
    try:
        files = expand_file_patterns(FLAGS.input_file)
        lines = [
            sentence
            for path in files
            for doc in pd.read_raw_documents(path, FLAGS.input_format)
            for sentence in doc
        ]
    except (FileNotFoundError, ValueError) as e:  # a usage error: one line, exit code 2
        fail_usage(str(e))
    reserved = list(vocab_builder.RESERVED_TOKENS) + FLAGS.extra_reserved_tokens
    vocab = vocab_builder.learn_wordpiece_vocab(
        lines, FLAGS.vocab_size, FLAGS.do_lower_case, reserved, min_count=FLAGS.min_count
    )
    vocab_builder.write_vocab_file(vocab, FLAGS.vocab_file)
    record = {
        "config": {
            k: FLAGS[k].value
            for k in (
                "input_file",
                "input_format",
                "vocab_file",
                "vocab_size",
                "do_lower_case",
                "min_count",
                "extra_reserved_tokens",
            )
        },
        "vocab_size_written": len(vocab),
        "lines": len(lines),
        "seconds": round(time.time() - start, 2),
    }
    fileio.write_json(FLAGS.vocab_file + ".config.json", record)
    print(f"wrote {len(vocab)} tokens to {FLAGS.vocab_file} in {record['seconds']} s")


if __name__ == "__main__":
    run(main)
