"""Fine-tune a `ToyScorer`: `python -m tests.toy_kind.recipe --train_file=... --dev_file=...
--output_dir=... [--export_dir=...]`; every flag: --help (generated from `ToyArgs`)."""

from keras_bert.training.recipe import run_recipe
from tests.toy_kind.family import FAMILY

if __name__ == "__main__":
    run_recipe(FAMILY)
