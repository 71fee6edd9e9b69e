"""Creates BERT pretraining TFRecords (masked LM + next sentence) from a text corpus.

Flags and semantics of google-research/bert `create_pretraining_data.py`; the algorithm and its
documented deviations live in `keras_bert.data.pretraining_data`. Runs as an Apache Beam pipeline
(`keras_bert.data.pretraining_beam`): on this machine with the DirectRunner (`--num_workers`
processes), on Dataflow, Flink or Spark with `--runner` and `--beam_pipeline_options`
(docs/beam.md). The records do not depend on the runner, the worker count or the input order.
Writes the records and `<first --output_file>.summary.json` (resolved flags + documents,
instances, tokens, masked fraction, 80/10/10 split, NSP positive rate, records per shard), last.
--vocab_file, --do_lower_case, --max_seq_length, --max_predictions_per_seq and --seed are the
pretraining run's flags (`keras_bert.training.pretraining.PretrainConfig`: one help text and
default each); google-research's --random_seed still works, with a warning.

    python recipes/create_pretraining_data.py --input_file=wiki.test.raw --input_format=wikitext \
      --output_file=out/wiki.tfrecord --num_shards=4 --vocab_file=vocab.txt --do_lower_case \
      --max_seq_length=128 --max_predictions_per_seq=20 --masked_lm_prob=0.15 --dupe_factor=5
"""

import dataclasses
import os
import time

from absl import flags

from keras_bert import beam as beam_flags
from keras_bert import fileio
from keras_bert.cli import define_corpus_flags, fail_usage, require_reachable_flags, run
from keras_bert.training import arg_flags, argument_set
from keras_bert.training.flag_dependencies import check_flag_partners
from keras_bert.training.pretraining import PretrainConfig
from keras_bert.data import pretraining_data as pd
from keras_bert.data.file_patterns import expand_file_patterns

FLAGS = flags.FLAGS
define_corpus_flags()
flags.DEFINE_string("output_file", None, "Output TFRecord file(s), comma-separated.")
flags.DEFINE_integer("num_shards", 1, "Split a single --output_file into this many shards.")
flags.DEFINE_bool("do_whole_word_mask", False, "Mask all the ## pieces of a word together.")
flags.DEFINE_integer("dupe_factor", 10, "Passes over the data, each with different masks.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of candidate tokens to predict.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter target sequence length.")
flags.DEFINE_integer(
    "num_document_groups",
    1,
    "Random next segments come from documents of the same group (documents are grouped by a "
    "hash of their content). 1 = the whole corpus, google-research/bert's rule; more groups "
    "spread instance creation over workers (each group is held by one worker).",
)
flags.DEFINE_bool(
    "progress",
    True,
    "Log progress (documents tokenized, instances per group); Beam's own logs stay at warnings.",
)
beam_flags.define_flags(default_num_workers=min(4, os.cpu_count() or 1))
REQUIRED = ("input_file", "output_file")
flags.mark_flags_as_required(REQUIRED)
# The settings the records share with the pretraining run that reads them (its flags, one help
# text and default each); --random_seed, this program's older spelling of --seed, still works.
PretrainingDataArgs = argument_set.fields_of(
    "PretrainingDataArgs",
    PretrainConfig,
    {
        "vocab_file": {},
        "do_lower_case": {},
        "max_seq_length": {},
        "max_predictions_per_seq": {},
        "seed": {},
    },
)
arg_flags.define_program_flags(PretrainingDataArgs)

# The hand-written flags the summary records (with every PretrainingDataArgs field).
CONFIG_FLAGS = (
    "input_file",
    "input_format",
    "output_file",
    "num_shards",
    "do_whole_word_mask",
    "dupe_factor",
    "masked_lm_prob",
    "short_seq_prob",
    "num_document_groups",
)
# A PretrainingDataSettings field read from a flag of another name.
SETTING_FLAGS = {"random_seed": "seed"}


def main(argv):
    del argv
    require_reachable_flags(*REQUIRED, required=REQUIRED)
    check_flag_partners("create_pretraining_data")
    import logging

    from keras_bert.data import pretraining_beam

    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    logging.getLogger(pretraining_beam.__name__).setLevel(
        logging.INFO if FLAGS.progress else logging.WARNING
    )

    start = time.time()
    data_args = arg_flags.read_program_flags(PretrainingDataArgs)
    # The resolved flags: the records' settings, recorded in the summary.
    config = {name: FLAGS[name].value for name in CONFIG_FLAGS} | data_args.settings()
    try:
        input_files = expand_file_patterns(FLAGS.input_file)
        output_files = pd.shard_paths(FLAGS.output_file, FLAGS.num_shards)
        options = beam_flags.pipeline_options_from_flags()
        settings = pretraining_beam.PretrainingDataSettings(  # the flags of the same names
            **{
                f.name: config[SETTING_FLAGS.get(f.name, f.name)]
                for f in dataclasses.fields(pretraining_beam.PretrainingDataSettings)
            }
        )
        settings.check()
    except (FileNotFoundError, ValueError) as e:  # a usage error: one line, exit code 2
        fail_usage(str(e))
    # Named after --output_file, not a shard, so that the shard glob "<output_file>-*" skips it.
    summary_path = FLAGS.output_file.split(",")[0].strip() + ".summary.json"
    # The runner's own settings (--runner, --num_workers, ...) change no byte: not in the config.
    try:
        summary = pretraining_beam.run(
            input_files, output_files, settings, summary_path, config, options
        )
    except fileio.UserFileError as e:  # an input that is not UTF-8: one line, exit code 2
        fail_usage(str(e))
    print(
        f"wrote {summary['instances']} instances from {summary['documents']} documents to "
        f"{len(output_files)} file(s) in {time.time() - start:.1f} s ({FLAGS.runner}); masked "
        f"fraction {summary['masked_fraction']:.4f}, split {summary['mask_split']}, NSP positive "
        f"rate {summary['nsp_positive_rate']:.4f}"
    )


if __name__ == "__main__":
    run(main)
