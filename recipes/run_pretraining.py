"""BERT pretraining (masked LM + next sentence) on TFRecords from create_pretraining_data.py.

A thin recipe over `keras_bert.training.pretraining.run_pretraining` (flags = PretrainConfig fields).

Writes to --output_dir: `config.json` (flags + BertConfig), `checkpoints/` (resumable: rerun the
same command after a crash or SIGKILL and it continues from the last checkpoint; a rerun with other
settings is refused, naming them: pretraining.HARMLESS_SETTINGS lists what may change), `logs/`
(TensorBoard: loss, mlm_loss, mlm_accuracy, nsp_loss, nsp_accuracy), `history.jsonl` (one line
of metrics per --save_checkpoints_steps), `metrics.json`, and `encoder/` (keras-bert checkpoint
directory: config.json, encoder.weights.h5, vocab.txt; pass it to run_classifier.py
--init_checkpoint or keras_bert.from_pretrained). Ablations (BERT table 5): --no_nsp, --ltr
(left-to-right attention, implies no NSP).

    python -m recipes.run_pretraining --input_file='out/wiki.tfrecord-*' --vocab_file=out/vocab.txt \
      --output_dir=runs/tiny --preset=bert_tiny --num_train_steps=2000 --train_batch_size=32
"""
import dataclasses
import json

from absl import app, flags

from keras_bert.training import pretraining
from keras_bert.cli import fail_usage

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Pretraining TFRecords: comma-separated paths or globs.")
flags.DEFINE_string("output_dir", None, "Where checkpoints, logs, metrics and the encoder go.")
flags.DEFINE_string("vocab_file", None, "vocab.txt the records were made with (sizes the model, gives [MASK] ids).")
flags.DEFINE_bool("do_lower_case", True, "Stored with the encoder for fine-tuning.")
flags.DEFINE_string("preset", "bert_tiny", "BertConfig preset when no --bert_config_file.")
flags.DEFINE_string("bert_config_file", None, "BertConfig JSON (our or google-research names).")
flags.DEFINE_string("init_checkpoint", None, "Continue from this encoder (any format load_encoder reads).")
flags.DEFINE_integer("max_seq_length", 128, "Must match the records.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Must match the records.")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size.")
flags.DEFINE_integer("num_train_steps", 1000, "Optimizer steps.")
flags.DEFINE_integer("num_warmup_steps", 100, "Linear warmup steps.")
flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate.")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
flags.DEFINE_integer("save_checkpoints_steps", 100, "Steps between checkpoints / history lines.")
flags.DEFINE_enum("strategy", "default", ["default", "mirrored", "multi_worker_mirrored", "tpu"], "tf.distribute strategy.")
flags.DEFINE_string("tpu", None, "TPU address for --strategy=tpu.")
flags.DEFINE_enum("mixed_precision", "float32", ["float32", "mixed_float16", "mixed_bfloat16"], "Keras dtype policy.")
flags.DEFINE_bool("jit_compile", False, "XLA-compile the train step.")
flags.DEFINE_bool("no_nsp", False, "Ablation: MLM only, no next-sentence head or loss.")
flags.DEFINE_bool("ltr", False, "Ablation: left-to-right (causal) attention, no NSP.")
flags.DEFINE_bool("dynamic_masking", False, "Redraw MLM masks every epoch in the input pipeline.")
flags.DEFINE_float("masked_lm_prob", 0.15, "For --dynamic_masking.")
flags.DEFINE_integer("random_seed", 12345, "Seed for initialisation and input order.")
flags.mark_flags_as_required(["input_file", "output_dir", "vocab_file"])


def main(argv):
    del argv
    values = {f.name: FLAGS[f.name].value for f in dataclasses.fields(pretraining.PretrainConfig)}
    try:
        metrics = pretraining.run_pretraining(pretraining.PretrainConfig(**values))
    except (ValueError, FileNotFoundError) as e:  # bad flags or inputs: one line, no traceback
        fail_usage(str(e))
    print(json.dumps(metrics["final"]))


if __name__ == "__main__":
    app.run(main)
