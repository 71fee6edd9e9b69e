"""Per-token features from chosen encoder layers, as JSON lines (google-research/bert's
`extract_features.py` interface; BERT section 5.3, the feature-based approach).

    python recipes/extract_features.py --input_file=input.txt --output_file=features.jsonl \
        --init_checkpoint=minilm_l6_h384_uncased --layers=-1,-2,-3,-4 --max_seq_length=128

One example per input line ("A ||| B" for a pair); one JSON object per line out (the layout is in
keras_bert/features.py). See docs/ner_swag_features.md.
"""

from absl import app, flags

from keras_bert import features, fileio
from keras_bert.config import check_max_seq_length
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert.training import model_setup
from keras_bert.cli import fail_usage, require_reachable_flags
from keras_bert.training.flag_dependencies import check_flag_partners

F = flags
F.DEFINE_string("input_file", None, "UTF-8 text, one example per line ('A ||| B' for pairs).")
F.DEFINE_string("output_file", None, "JSON lines output.")
F.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated layer indexes (-1 = last).")
F.DEFINE_string("init_checkpoint", None, "Preset name (minilm_l6_h384_uncased) or checkpoint path.")
F.DEFINE_string("vocab_file", None, "WordPiece vocab (default: the checkpoint's).")
F.DEFINE_boolean("do_lower_case", None, "Lower-case input (default: the checkpoint's).")
F.DEFINE_integer(
    "max_seq_length", 128, "Tokens per example incl. [CLS]/[SEP]; longer is truncated."
)
F.DEFINE_integer("batch_size", 8, "Examples per encoder call.")
F.mark_flags_as_required(["input_file", "output_file", "init_checkpoint"])
FLAGS = F.FLAGS


class _Source:
    """The fields model_setup reads: a pretrained checkpoint only (features need real weights)."""

    def __init__(self):
        self.init_checkpoint, self.vocab_file = FLAGS.init_checkpoint, FLAGS.vocab_file
        self.do_lower_case, self.bert_config_file, self.preset = FLAGS.do_lower_case, None, None


def main(argv):
    del argv
    check_flag_partners("extract_features")
    if FLAGS.batch_size < 1:
        fail_usage(f"--batch_size must be >= 1, got {FLAGS.batch_size}")
    require_reachable_flags("input_file", "output_file", "init_checkpoint", "vocab_file")
    if not fileio.isfile(FLAGS.input_file):
        fail_usage(f"--input_file={FLAGS.input_file} is not a file")
    source = _Source()
    try:
        # Every line is an example (linex_index), lines ending at "\n" as the reference's readline.
        texts = fileio.text_lines(fileio.read_user_text(FLAGS.input_file))
        vocab_file, do_lower_case = model_setup.resolve_vocab(source)
        preprocessor = BertPreprocessor(
            vocab_file, do_lower_case=do_lower_case, max_seq_length=FLAGS.max_seq_length
        )
        encoder = model_setup.build_encoder(source, len(preprocessor.vocabulary))
        check_max_seq_length(FLAGS.max_seq_length, encoder.bert_config.max_sequence_length)
        layers = features.parse_layers(FLAGS.layers, encoder.bert_config.num_layers)
    except (ValueError, FileNotFoundError) as e:  # bad flags or checkpoint: exit code 2
        fail_usage(str(e))
    # Streamed under a temporary name, visible under --output_file only when complete.
    written = fileio.writing_path(FLAGS.output_file)
    with fileio.open_file(written, "w") as out:
        for index, (tokens, values) in enumerate(
            features.extract_features(encoder, preprocessor, texts, layers, FLAGS.batch_size)
        ):
            out.write(fileio.jsonl_line(features.feature_json(index, tokens, values)) + "\n")
    fileio.commit_write(written, FLAGS.output_file)
    print(f"wrote {len(texts)} examples to {FLAGS.output_file}")


if __name__ == "__main__":
    app.run(main)
