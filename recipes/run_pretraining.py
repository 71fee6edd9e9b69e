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

import json
import sys

from absl import app

from keras_bert.cli import fail_usage
from keras_bert.training import args as args_lib
from keras_bert.training import pretraining

args_lib.define_flags(pretraining.PretrainConfig, module_name=sys.argv[0])


def main(argv):
    if len(argv) > 1:
        fail_usage(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        metrics = pretraining.run_pretraining(args_lib.from_flags(pretraining.PretrainConfig))
    except (ValueError, FileNotFoundError) as e:  # bad flags or inputs: one line, no traceback
        fail_usage(str(e))
    print(json.dumps(metrics["final"]))


if __name__ == "__main__":
    app.run(main)
