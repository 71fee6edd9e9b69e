"""The toy kind's training family: JSON Lines train / dev files (`reader`), a `ToyScorer` over
the flags' encoder, mean squared error; the share of dev texts scored within 0.2 of their gold
score ("hit_rate") picks the best evaluation."""

from __future__ import annotations

import dataclasses

import numpy as np

from keras_bert.training import model_setup
from keras_bert.training.args import FinetuneArgs
from keras_bert.training.argument_set import arg, args_dataclass
from keras_bert.training.family import Family
from tests.toy_kind.reader import read_scores
from tests.toy_kind.task import ToyScorer

TOLERANCE = 0.2  # a hit: |score - gold| <= TOLERANCE


@args_dataclass
class ToyArgs(FinetuneArgs):
    """`FinetuneArgs` plus the toy kind's files."""

    train_file: str = arg(help="Training rows (JSON Lines: text, score).", required=True)
    dev_file: str = arg(help="Dev rows (JSON Lines: text, score).", required=True)


@dataclasses.dataclass
class ToyData:
    train: tuple  # (texts, scores)
    dev: tuple


def scores_of(task: ToyScorer, texts, gold, batch_size: int) -> dict:
    """{"hit_rate", "mae", "loss" (mean squared error)} of `task` on (texts, gold)."""
    error = task.predict(texts, batch_size=batch_size).astype(np.float64) - np.asarray(gold)
    return {
        "hit_rate": float(np.mean(np.abs(error) <= TOLERANCE)),
        "mae": float(np.mean(np.abs(error))),
        "loss": float(np.mean(error**2)),
    }


class ToyScoring(Family):
    name = "toy_scoring"
    Args = ToyArgs
    model_name = "toy_scoring"
    monitor = "hit_rate"

    def read(self, args, preprocessor) -> ToyData:
        return ToyData(read_scores(args.train_file), read_scores(args.dev_file))

    def build_task(self, args, data, preprocessor) -> ToyScorer:
        encoder = model_setup.build_encoder(args, len(preprocessor.vocabulary))
        return ToyScorer(encoder, preprocessor=preprocessor)

    def train_arrays(self, task, data):
        texts, scores = data.train
        features = task.encode_texts(texts)
        return {k: v.numpy() for k, v in features.items()}, np.float32(scores)

    def evaluator(self, args, data):
        return lambda task: scores_of(task, *data.dev, args.eval_batch_size)


FAMILY = ToyScoring()
