"""A tiny task family for the driver's tests: synthetic ids, a 1-layer BERT, optional scripted
dev scores. `python -m tests.training.tiny_family --output_dir=...` is its recipe (flags generated
from `TinyArgs`, as every recipe's), for the kill-and-resume tests in real subprocesses.

`--dropout_rate` acts in the encoder (hidden and attention) and before the head; 0 by default.

Rows: 8 token ids from a vocabulary of 50 ([CLS]=1 first, [SEP]=2 last, padding 0 after a random
length); label 1 when id 7 appears. The dev loss is the real one; `script` replaces the dev accuracy
of evaluation i by its i-th value (to make ties, a best epoch, a NaN), `nan_seed` makes every
accuracy of the run with that seed NaN.
"""

from __future__ import annotations


import numpy as np

from keras_bert.training.recipe import run_recipe
from keras_bert.models.bert_encoder import BertEncoder
from keras_bert.tasks.text_classifier import TextClassifier
from keras_bert.training.args import TrainingArgs
from keras_bert.training.argument_set import arg, args_dataclass
from keras_bert.training.family import Family
from keras_bert.training.families.classification import dev_loss
from tests.tiny import NO_DROPOUT, tiny_config

SIZES = dict(vocab_size=50, hidden_size=16, intermediate_size=32, max_sequence_length=16)
CONFIG = tiny_config(**SIZES, **NO_DROPOUT)


@args_dataclass
class TinyArgs(TrainingArgs):
    # --dropout_rate is the encoder's (hidden and attention) and the head's; none by default.
    FAMILY_DEFAULTS = {"train_batch_size": 8, "learning_rate": 1e-2, "dropout_rate": 0.0}

    rows: int = arg(48, "Training rows.")
    script: str | None = arg(None, "Comma-separated dev accuracy of each evaluation (tests).")
    nan_seed: int | None = arg(None, "Every dev accuracy of the run with this seed is NaN.")


def synthetic(n: int, seed: int) -> tuple[dict, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, 50, (n, 8)).astype(np.int32)
    lengths = rng.integers(3, 9, n)
    mask = (np.arange(8)[None, :] < lengths[:, None]).astype(np.int32)
    ids[:, 0] = 1
    ids[np.arange(n), lengths - 1] = 2
    ids *= mask
    labels = ((ids == 7).any(1)).astype(np.int32)
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}, labels


class Tiny(Family):
    name = "tiny"
    Args = TinyArgs

    def source(self, args):
        return {}, None

    def read(self, args, preprocessor):
        return {"train": synthetic(args.rows, 0), "dev": synthetic(32, 1)}

    def build_task(self, args, data, preprocessor):
        rate = args.dropout_rate if args is not None else 0.0
        config = tiny_config(**SIZES, dropout_rate=rate, attention_dropout_rate=rate)
        return TextClassifier(BertEncoder.from_config_object(config), 2, dropout_rate=rate)

    def train_arrays(self, task, data):
        return data["train"]

    def evaluator(self, args, data):
        script = [float(v) for v in args.script.split(",")] if args.script else None
        calls = []
        run = data.setdefault("runs_started", 0)  # the driver asks once per run: seed + run
        data["runs_started"] += 1
        nan = args.nan_seed is not None and args.nan_seed == args.seed + run

        def evaluate(task):
            features, labels = data["dev"]
            logits = np.asarray(task(features, training=False), np.float32)
            accuracy = float((logits.argmax(-1) == labels).mean())
            if script:
                accuracy = script[min(len(calls), len(script) - 1)]
            calls.append(accuracy)
            return {
                "accuracy": float("nan") if nan else accuracy,
                "loss": dev_loss(logits, labels, False),
            }

        return evaluate


FAMILY = Tiny()

if __name__ == "__main__":
    run_recipe(FAMILY)
