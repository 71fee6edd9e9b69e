"""Distil a fine-tuned classifier into a smaller student (Hinton et al. 2015; DistilBERT).

    python recipes/distill.py --teacher=runs/sst2 --task_name=sst2 \
        --data_dir=$KERAS_BERT_DATA_DIR/glue --student_layers=3 --temperature=2 --alpha=0.5 \
        --num_train_epochs=3 --output_dir=runs/sst2_student [--export_dir=models]

--teacher: a fine-tuning --output_dir (best_model.keras) or a saved task. The student takes the
teacher's layers 0, k, 2k, ... (--student_layers, or --layer_map=0,2,4) and its embeddings, pooler
and head, or starts from --student_preset. It trains on the one fine-tuning driver, so a rerun
resumes and every training flag applies (--help). See keras_bert.training.families.distillation
and docs/evaluation.md.
"""

from keras_bert.training.recipe import run_recipe
from keras_bert.training.families.distillation import FAMILY

if __name__ == "__main__":
    run_recipe(FAMILY)
