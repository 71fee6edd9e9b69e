"""Fine-tune BERT for CoNLL-2003 named entity recognition (BERT section 4.3 / 5.3).

    python recipes/run_ner.py --data_dir=$KERAS_BERT_DATA_DIR/conll2003 \
        --init_checkpoint=minilm_l6_h384_uncased --max_seq_length=128 --train_batch_size=32 \
        --learning_rate=5e-5 --num_train_epochs=3 --output_dir=runs/conll [--export_dir=models]

`--feature_mode=concat_last_four` (or embeddings, last, second_to_last, sum_last_four, sum_all)
freezes the encoder and trains a BiLSTM on that feature instead (the paper's table 7). Every
flag: --help. The family: keras_bert.training.families.ner; the driver and the files it writes:
keras_bert.training.trainer; docs/ner_swag_features.md.
"""

from keras_bert.training.recipe import run_recipe
from keras_bert.training.families.ner import FAMILY

if __name__ == "__main__":
    run_recipe(FAMILY)
