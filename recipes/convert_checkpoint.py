"""Converts any checkpoint `load_encoder` reads into a keras-bert directory (or another format).

Sources, detected from their files: a pretrained preset (`minilm_l6_h384_uncased`), a Hugging
Face BERT directory, a google-research/bert TF1 checkpoint (directory or `bert_model.ckpt`
prefix), a Model Garden TF2 encoder checkpoint, a TF Hub-style encoder SavedModel, a keras-hub
BertBackbone preset, a keras-bert directory or a `.keras` file. Writes `config.json`,
`encoder.weights.h5`, `vocab.txt`, `keras_bert_checkpoint.json` (see
`keras_bert.checkpoints.save_encoder`) and `conversion.json` (resolved flags, the source variable -> encoder variable ledger and the ignored
variables with their reasons).

    python recipes/convert_checkpoint.py --init_checkpoint=uncased_L-12_H-768_A-12 \
      --output_dir=out/bert_base_uncased

`--output_format=huggingface|keras_hub|google` writes that format instead (see
`keras_bert.checkpoints.save_encoder`); `conversion.json` is written beside it in every case.
"""

from absl import flags

from keras_bert import checkpoints, fileio
from keras_bert.cli import fail_usage, require_reachable_flags, run
from keras_bert.training import arg_flags, args, argument_set
from keras_bert.training.flag_dependencies import check_flag_partners

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Directory to write the keras-bert checkpoint to.")
flags.DEFINE_enum(
    "do_lower_case",
    None,
    ["true", "false"],
    "Casing of the vocab; default: read from the checkpoint (HF tokenizer_config, "
    "'uncased'/'cased' in a google-research directory name).",
)
flags.DEFINE_string(
    "hidden_activation",
    None,
    "Override the GELU form of the source config (gelu | gelu_approximate).",
)
flags.DEFINE_enum(
    "output_format",
    "keras_bert",
    sorted(checkpoints.WRITERS),
    "Format to write: our own (default), Hugging Face, keras-hub preset or "
    "google-research TF1 checkpoint.",
)
REQUIRED = ("output_dir",)
flags.mark_flags_as_required(REQUIRED)
# The model source of the fine-tuning recipes (one help text each).
SourceArgs = argument_set.fields_of(
    "SourceArgs", args.FinetuneArgs, {"init_checkpoint": {"required": True}, "vocab_file": {}}
)
arg_flags.define_program_flags(SourceArgs)


def main(argv):
    del argv
    require_reachable_flags(*REQUIRED, required=REQUIRED)
    check_flag_partners("convert_checkpoint")
    settings = arg_flags.read_program_flags(SourceArgs)
    try:
        encoder = checkpoints.load_encoder(
            settings.init_checkpoint, hidden_activation=FLAGS.hidden_activation
        )
        vocab_file = settings.vocab_file or checkpoints.resolve_vocab_file(settings.init_checkpoint)
        do_lower_case = (
            FLAGS.do_lower_case == "true"
            if FLAGS.do_lower_case is not None
            else checkpoints.resolve_do_lower_case(settings.init_checkpoint)
        )
    except (FileNotFoundError, ValueError) as e:  # no checkpoint, vocab.txt or casing: exit 2
        fail_usage(str(e))
    checkpoints.save_encoder(
        encoder,
        FLAGS.output_dir,
        vocab_file=vocab_file,
        do_lower_case=do_lower_case,
        format=FLAGS.output_format,
    )
    report = {
        "flags": {
            "init_checkpoint": settings.init_checkpoint,
            "vocab_file": vocab_file,
            "do_lower_case": do_lower_case,
            "output_format": FLAGS.output_format,
            "hidden_activation": encoder.bert_config.hidden_activation,
        },
        "config": encoder.bert_config.to_dict(),
    }
    fmt, _ = checkpoints.detect_format(settings.init_checkpoint)
    if fmt in checkpoints.READERS:
        source = checkpoints.read_checkpoint(settings.init_checkpoint)
        report.update(
            format=source.format,
            weights_file=source.weights_file,
            used=source.used(),
            ignored=source.ignored,
        )
    else:
        report["format"] = fmt
    fileio.write_json(fileio.join(FLAGS.output_dir, "conversion.json"), report)
    print(
        f"wrote {FLAGS.output_dir} ({report['format']}, "
        f"{len(report.get('used', {})) or len(encoder.weights)} variables)"
    )


if __name__ == "__main__":
    run(main)
