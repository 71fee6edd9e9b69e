"""Fine-tune BERT on a GLUE task or your own (pair) classification / regression data.

    python recipes/run_classifier.py --task_name=sst2 --data_dir=$KERAS_BERT_DATA_DIR/glue \
        --init_checkpoint=minilm_l6_h384_uncased --max_seq_length=64 --train_batch_size=32 \
        --num_train_epochs=1 --output_dir=runs/sst2 [--export_dir=models]

Own data: --task_name=text_classification (text_pair_classification, text_regression) with
--train_file and --dev_file. Every flag: --help. The family: keras_bert.training.families.
classification; the driver and the files it writes: keras_bert.training.trainer;
docs/finetuning.md.
"""

from keras_bert.training.recipe import run_recipe
from keras_bert.training.families.classification import FAMILY

if __name__ == "__main__":
    run_recipe(FAMILY)
