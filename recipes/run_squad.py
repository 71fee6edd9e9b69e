"""Fine-tune BERT on SQuAD v1.1 / v2.0 span question answering, predict, score, export.

    python recipes/run_squad.py --init_checkpoint=minilm_l6_h384_uncased \
        --train_file=$KERAS_BERT_DATA_DIR/squad/dev-v1.1.json \
        --predict_file=$KERAS_BERT_DATA_DIR/squad/dev-v1.1.json --holdout_fraction=0.5 \
        --num_train_epochs=1 --output_dir=runs/squad [--version_2_with_negative]

Writes predictions.json, nbest_predictions.json, null_odds.json and the official EM / F1 in
metrics.json. Every flag: --help. The family: keras_bert.training.families.squad; the driver and
the files it writes: keras_bert.training.trainer; docs/squad.md.
"""

from keras_bert.training.recipe import run_recipe
from keras_bert.training.families.squad import FAMILY

if __name__ == "__main__":
    run_recipe(FAMILY)
