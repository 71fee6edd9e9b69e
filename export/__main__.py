"""Export a fine-tuned task as a versioned SavedModel for TensorFlow Serving.

    python -m export --model_dir=runs/sst2 --export_dir=models --model_name=sst2 \
        [--version=N] [--tokenizer=core|tf_text] [--export_dtype=float32|bfloat16] \
        [--export_tflite | --export_quantize=int8]

`--model_dir` is a fine-tuning `--output_dir` (its best_model.keras) or a `.keras` task file. The
task carries everything the export needs (labels, pairing, vocabulary, casing, sequence length),
so the three flags above are all that is required. Writes EXPORT_DIR/<model_name>/<version>/ (see
docs/export.md) and prints its path. `--export_tflite` adds `model.tflite` (the `encoded` signature
for the LiteRT runtime: the fastest batch-1 path on CPUs), `--export_quantize=int8` makes that file
int8 (dynamic-range quantized weights); `serving.server --prefer_tflite_model` serves it. The
export settings are the fine-tuning recipes' (`keras_bert.training.args`); the older spellings
--export_base, --dtype, --tflite and --quantize still work, with a warning.
`--require_blessing=REPORT_DIR` refuses (exit 2) unless that evaluation report is BLESSED by a
release gate for this very --model_dir (same fingerprint; docs/evaluation.md, "Release gate").
"""

from __future__ import annotations

import dataclasses

from absl import flags
from keras_bert.cli import fail_usage, failing_without_room, require_reachable_flags, run
from keras_bert.training import arg_flags, args
from keras_bert.training.flag_dependencies import check_flag_partners

from export.export_saved_model import ExportArgs, Overrides, export_saved_task
from keras_bert.evaluation.release_gate import check_blessing

flags.DEFINE_string("model_dir", None, "Fine-tuning output_dir, or a .keras task file.")
flags.DEFINE_string("model_name", None, "Name the model is served under.")
flags.DEFINE_integer(
    "version", None, "Integer version (default: the next free one). Never overwrites."
)
flags.DEFINE_enum(
    "tokenizer",
    "core",
    ["core", "tf_text"],
    "In-graph tokenizer: core TF ops (loads with plain TensorFlow) or tensorflow-text.",
)
flags.DEFINE_integer(
    "max_seq_length",
    None,
    "Override: tokens per text in serving_default "
    "(default: the task's; checked against the encoder's position table).",
)
flags.DEFINE_list(
    "label_names",
    None,
    "Override: display names in id order, exactly one per class (default: the task's).",
)
flags.DEFINE_float(
    "null_score_diff_threshold",
    None,
    'Override, SQuAD v2.0 tasks: answer "" when null score - best span score exceeds this '
    "(default: the task's, chosen at training by --null_threshold_dev_fraction or given).",
)
flags.DEFINE_boolean("do_lower_case", None, "Check only: must equal the task's.")
flags.DEFINE_boolean("is_pair", None, "Check only: must equal the task's.")
flags.DEFINE_enum(
    "task_type", None, ["classification", "regression"], "Check only: must equal the task's."
)
flags.DEFINE_string(
    "require_blessing",
    None,
    "An evaluation report dir (recipes/evaluate.py --gate): export only if it is BLESSED, its "
    "metrics.json unchanged since, and its model fingerprint is --model_dir's.",
)
flags.mark_flags_as_required(["model_dir", "model_name"])
arg_flags.define_program_flags(ExportArgs)
FLAGS = flags.FLAGS


def main(argv):
    del argv
    require_reachable_flags("model_dir", "require_blessing", required=("model_dir",))
    check_flag_partners("export")
    settings = arg_flags.read_program_flags(ExportArgs)
    # Each Overrides field is the flag of its name (None: not given).
    overrides = Overrides(**{f.name: FLAGS[f.name].value for f in dataclasses.fields(Overrides)})
    try:
        litert = args.litert_setting(settings)
        if FLAGS.require_blessing:
            check_blessing(FLAGS.require_blessing, FLAGS.model_dir)
        with failing_without_room():  # a full disk: one line, exit 1, no version published
            path = export_saved_task(
                FLAGS.model_dir,
                settings.export_dir,
                FLAGS.model_name,
                version=FLAGS.version,
                tokenizer=FLAGS.tokenizer,
                dtype=settings.export_dtype,
                overrides=overrides,
                litert=litert,
            )
    except (ValueError, FileNotFoundError, FileExistsError, TypeError) as e:
        fail_usage(str(e))
    print(path)


if __name__ == "__main__":
    run(main)
