"""Per-token features from chosen encoder layers, as JSON lines (google-research/bert's
`extract_features.py` interface; BERT section 5.3, the feature-based approach).

    python recipes/extract_features.py --input_file=input.txt --output_file=features.jsonl \
        --init_checkpoint=minilm_l6_h384_uncased --layers=-1,-2,-3,-4 --max_seq_length=128 \
        [--eval_batch_size=8]

One example per input line ("A ||| B" for a pair); one JSON object per line out (the layout is in
keras_bert/features.py). The model source, --max_seq_length and --eval_batch_size are the
fine-tuning recipes' flags (`keras_bert.training.args`); --batch_size, this program's older
spelling of --eval_batch_size, still works with a warning. See docs/ner_swag_features.md.
"""

from absl import flags

from keras_bert import features, fileio
from keras_bert.config import check_max_seq_length
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert.training import arg_flags, args, argument_set, model_setup
from keras_bert.cli import fail_usage, require_reachable_flags, run
from keras_bert.training.flag_dependencies import check_flag_partners

F = flags
F.DEFINE_string("input_file", None, "UTF-8 text, one example per line ('A ||| B' for pairs).")
F.DEFINE_string("output_file", None, "JSON lines output.")
F.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated layer indexes (-1 = last).")
REQUIRED = ("input_file", "output_file")
F.mark_flags_as_required(REQUIRED)
# The model source, sequence length and batch of the fine-tuning recipes (a pretrained checkpoint
# only: features need real weights); this program's --batch_size is still accepted, with a warning.
FeatureArgs = argument_set.fields_of(
    "FeatureArgs",
    args.FinetuneArgs,
    {
        "init_checkpoint": {"required": True},
        "vocab_file": {},
        "do_lower_case": {},
        "max_seq_length": {},
        "eval_batch_size": {"default": 8, "deprecated_name": "batch_size"},
    },
)
arg_flags.define_program_flags(FeatureArgs)
FLAGS = F.FLAGS


def main(argv):
    del argv
    require_reachable_flags(*REQUIRED, required=REQUIRED)
    check_flag_partners("extract_features")
    settings = arg_flags.read_program_flags(FeatureArgs)
    if not fileio.isfile(FLAGS.input_file):
        fail_usage(f"--input_file={FLAGS.input_file} is not a file")
    try:
        # Every line is an example (linex_index), lines ending at "\n" as the reference's readline.
        texts = fileio.text_lines(fileio.read_user_text(FLAGS.input_file))
        vocab_file, do_lower_case = model_setup.resolve_vocab(settings)
        preprocessor = BertPreprocessor(
            vocab_file, do_lower_case=do_lower_case, max_seq_length=settings.max_seq_length
        )
        encoder = model_setup.build_encoder(settings, len(preprocessor.vocabulary))
        check_max_seq_length(settings.max_seq_length, encoder.bert_config.max_sequence_length)
        layers = features.parse_layers(FLAGS.layers, encoder.bert_config.num_layers)
    except (ValueError, FileNotFoundError) as e:  # bad flags or checkpoint: exit code 2
        fail_usage(str(e))
    # Streamed under a temporary name, visible under --output_file only when complete.
    written = fileio.writing_path(FLAGS.output_file)
    with fileio.open_file(written, "w") as out:
        for index, (tokens, values) in enumerate(
            features.extract_features(
                encoder, preprocessor, texts, layers, settings.eval_batch_size
            )
        ):
            out.write(fileio.jsonl_line(features.feature_json(index, tokens, values)) + "\n")
    fileio.commit_write(written, FLAGS.output_file)
    print(f"wrote {len(texts)} examples to {FLAGS.output_file}")


if __name__ == "__main__":
    run(main)
