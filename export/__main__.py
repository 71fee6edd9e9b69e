"""Export a fine-tuned classifier as a versioned SavedModel for TensorFlow Serving.

    python -m export --model_dir=runs/sst2 --export_base=models --model_name=sst2 \
        [--version=N] [--tokenizer=core|tf_text] [--dtype=float32|bfloat16]

`--model_dir` is a fine-tuning `--output_dir` (holding best_model.keras, config.json and
labels.json, as recipes/run_classifier.py writes them) or a `.keras` file (its directory's
config.json / labels.json are read when present). Flags given explicitly win over those files.
Writes EXPORT_BASE/<model_name>/<version>/ (see docs/export.md) and prints its path.
"""
from __future__ import annotations

from absl import app, flags, logging

flags.DEFINE_string("model_dir", None, "Fine-tuning output_dir, or a .keras model file.")
flags.DEFINE_string("export_base", None, "Base directory; writes <export_base>/<model_name>/<version>.")
flags.DEFINE_string("model_name", None, "Name the model is served under.")
flags.DEFINE_integer("version", None, "Integer version (default: the next free one). Never overwrites.")
flags.DEFINE_enum("tokenizer", "core", ["core", "tf_text"],
                  "In-graph tokenizer: core TF ops (loads with plain TensorFlow) or tensorflow-text.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab (default: config.json's).")
flags.DEFINE_boolean("do_lower_case", None, "Lower-case input (default: config.json's).")
flags.DEFINE_integer("max_seq_length", None, "Tokens per text in serving_default (default: config.json's).")
flags.DEFINE_list("label_names", None, "Label names in id order, exactly num_classes of them; "
                  "overrides the model's stored names as display names (default: labels.json's / "
                  "the model's).")
flags.DEFINE_enum("task_type", None, ["classification", "regression"], "Default: labels.json's / the model's.")
flags.DEFINE_boolean("is_pair", None, "Sentence-pair inputs (text, text_b). Default: labels.json's.")
flags.DEFINE_enum("dtype", None, ["float32", "bfloat16"],
                  "Dtype policy of the exported model (default: the trained model's). bfloat16 stores "
                  "the variables in bfloat16: half the size, faster on CPUs with AVX512_BF16/AMX "
                  "(LayerNorm, softmax and outputs stay float32).")
flags.mark_flags_as_required(["model_dir", "export_base", "model_name"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from export.export_saved_model import resolve_model_dir

    keras_file, meta = resolve_model_dir(FLAGS.model_dir)

    def pick(flag, key):
        value = FLAGS[flag].value
        return value if value is not None else meta.get(key)

    vocab_file, do_lower_case = pick("vocab_file", "vocab_file"), pick("do_lower_case", "do_lower_case")
    max_seq_length = pick("max_seq_length", "max_seq_length")
    missing = [n for n, v in (("vocab_file", vocab_file), ("do_lower_case", do_lower_case),
                              ("max_seq_length", max_seq_length)) if v is None]
    if missing:
        raise app.UsageError(f"no {', '.join(missing)} in {keras_file.parent}/config.json; "
                             f"pass --{' --'.join(missing)}")
    import keras

    import keras_bert  # noqa: F401  (registers BertEncoder and its layers)
    from keras_bert.models import bert_classifier  # noqa: F401  (registers BertClassifier)
    from export.export_saved_model import export_classifier, resolve_label_names  # noqa: E402

    logging.info("loading %s", keras_file)
    model = keras.saving.load_model(keras_file, compile=False)
    task_type = pick("task_type", "task_type") or (
        "regression" if getattr(model, "num_classes", 2) == 1 else "classification")
    try:
        label_names = resolve_label_names(model, pick("label_names", "labels"), task_type)
    except ValueError as e:
        raise app.UsageError(str(e)) from None
    path = export_classifier(
        model, FLAGS.export_base, FLAGS.model_name, label_names=label_names,
        vocab_file=vocab_file, do_lower_case=bool(do_lower_case), max_seq_length=int(max_seq_length),
        task_type=task_type, is_pair=pick("is_pair", "is_pair"),
        version=FLAGS.version, tokenizer=FLAGS.tokenizer, dtype=FLAGS.dtype)
    print(path)


if __name__ == "__main__":
    app.run(main)
