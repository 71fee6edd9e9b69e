"""BERT pretraining (masked LM + next sentence) on TFRecords from create_pretraining_data.py.

Writes to --output_dir: `config.json` (flags + BertConfig), `checkpoints/` (resumable: rerun the
same command after a crash or SIGKILL and it continues from the last checkpoint), `logs/`
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
import os
import time

from absl import app, flags

FLAGS = flags.FLAGS
_PREDEFINED = set(FLAGS)
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
    import keras
    from keras_bert import BertConfig, BertEncoder
    from keras_bert.checkpoints.keras_format import save_encoder
    from keras_bert.checkpoints.loader import load_encoder
    from keras_bert.data.pretraining_pipeline import make_pretraining_dataset, verify_shards
    from keras_bert.models import BertPretrainer
    from keras_bert.tokenization import load_vocab
    from keras_bert.training import create_optimizer, get_strategy, set_mixed_precision, standard_callbacks
    from keras_bert.training.fit import resumable_fit

    start = time.time()
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    keras.utils.set_random_seed(FLAGS.random_seed)
    precision = set_mixed_precision(FLAGS.mixed_precision)
    strategy = get_strategy(FLAGS.strategy, FLAGS.tpu)
    vocab = load_vocab(FLAGS.vocab_file)
    use_nsp = not (FLAGS.no_nsp or FLAGS.ltr)
    with strategy.scope():
        if FLAGS.init_checkpoint:
            encoder = load_encoder(FLAGS.init_checkpoint, causal=FLAGS.ltr)
        else:
            cfg = (BertConfig.from_json_file(FLAGS.bert_config_file) if FLAGS.bert_config_file
                   else BertConfig.from_preset(FLAGS.preset))
            cfg = dataclasses.replace(cfg, vocab_size=len(vocab))
            encoder = BertEncoder(**dataclasses.asdict(cfg), causal=FLAGS.ltr)
        cfg = encoder.bert_config
        if cfg.vocab_size != len(vocab):
            raise ValueError(f"the encoder has vocab_size={cfg.vocab_size} but {FLAGS.vocab_file} has {len(vocab)} tokens")
        model = BertPretrainer(encoder, use_nsp=use_nsp)
        model.build()
        model.compile(optimizer=create_optimizer(
            FLAGS.learning_rate, FLAGS.num_train_steps, FLAGS.num_warmup_steps, FLAGS.optimizer,
            loss_scale=precision == "mixed_float16"), jit_compile=FLAGS.jit_compile)
    with open(os.path.join(FLAGS.output_dir, "config.json"), "w") as f:
        json.dump({"flags": {k: FLAGS[k].value for k in FLAGS if k in _OWN},
                   "bert_config": dataclasses.asdict(cfg), "use_nsp": use_nsp, "causal": FLAGS.ltr}, f, indent=2)

    num_records = sum(verify_shards(_expand(FLAGS.input_file)))  # a damaged shard fails here, by name

    def make_train_dataset(epoch, skip):
        ds = make_pretraining_dataset(
            FLAGS.input_file, FLAGS.train_batch_size, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
            is_training=True, seed=FLAGS.random_seed + epoch, dynamic_masking=FLAGS.dynamic_masking,
            vocab_size=len(vocab), mask_token_id=vocab["[MASK]"], cls_token_id=vocab["[CLS]"],
            sep_token_id=vocab["[SEP]"], masked_lm_prob=FLAGS.masked_lm_prob, use_nsp=use_nsp, verify=False)
        return ds.skip(skip).take(FLAGS.save_checkpoints_steps - skip)

    checkpoint, callbacks = standard_callbacks(FLAGS.output_dir, tensorboard_update_freq=FLAGS.save_checkpoints_steps)
    history_path = os.path.join(FLAGS.output_dir, "history.jsonl")
    callbacks.append(keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: _append(
        history_path, {"step": checkpoint.step, "seconds": round(time.time() - start, 1),
                       **{k: float(v) for k, v in logs.items() if k != "learning_rate"}})))
    resumed_from = checkpoint.restore(model)
    epochs = -(-FLAGS.num_train_steps // FLAGS.save_checkpoints_steps)
    steps = resumable_fit(model, make_train_dataset, FLAGS.save_checkpoints_steps, epochs, checkpoint,
                          callbacks, verbose=2, total_steps=FLAGS.num_train_steps)
    encoder_dir = save_encoder(model.encoder, os.path.join(FLAGS.output_dir, "encoder"), FLAGS.vocab_file,
                               FLAGS.do_lower_case)
    with open(history_path) as f:
        history = [json.loads(line) for line in f]
    metrics = {"steps": steps, "resumed_from_step": resumed_from, "records": num_records,
               "examples_seen": steps * FLAGS.train_batch_size, "seconds_this_run": round(time.time() - start, 1),
               "final": history[-1] if history else {}, "history": history, "encoder_dir": encoder_dir}
    with open(os.path.join(FLAGS.output_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    print(json.dumps(metrics["final"]))


_OWN = set(FLAGS) - _PREDEFINED  # this recipe's flags


def _expand(patterns):
    import tensorflow as tf
    return sorted({f for p in patterns.split(",") if p.strip() for f in tf.io.gfile.glob(p.strip())})


def _append(path, record):
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    app.run(main)
