"""Fine-tune BERT on SWAG multiple choice (BERT section 4.4).

    python recipes/run_swag.py --train_file=swag/train.csv --dev_file=swag/val.csv \
        --init_checkpoint=minilm_l6_h384_uncased --max_seq_length=128 --train_batch_size=16 \
        --learning_rate=2e-5 --num_train_epochs=3 --output_dir=runs/swag [--export_dir=models]

The CSVs are the official rowanz/swagaf files (`keras_bert.data.swag` describes the layout).
Every flag: --help. The family: keras_bert.training.families.swag; the driver and the files it
writes: keras_bert.training.trainer; docs/ner_swag_features.md.
"""

from keras_bert.training.recipe import run_recipe
from keras_bert.training.families.swag import FAMILY

if __name__ == "__main__":
    run_recipe(FAMILY)
