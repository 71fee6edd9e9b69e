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

from keras_bert.training.recipe import argument_set_main, run_argument_set
from keras_bert.training.pretraining import PretrainConfig, run_pretraining


def print_final(config, metrics):
    print(json.dumps(metrics["final"]))


def main_of(flag_values=None):
    """The recipe's `main(argv)` on the parsed `flag_values` (default: absl's global FLAGS): bad
    flags or inputs (whatever `run_pretraining` raises as ValueError / FileNotFoundError) end it
    with one line and exit code 2, no traceback."""
    return argument_set_main(PretrainConfig, run_pretraining, print_final, flag_values)


if __name__ == "__main__":
    run_argument_set(PretrainConfig, main_of())
