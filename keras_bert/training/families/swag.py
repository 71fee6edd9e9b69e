"""SWAG family: multiple choice (BERT section 4.4).

Reads the official rowanz/swagaf train / dev CSVs (`keras_bert.data.swag`) and builds a
`MultipleChoice` task: each example is a context with four endings, each ending packed as
`[CLS] context [SEP] start + ending [SEP]` and scored; the loss is the cross-entropy of the
softmax over the four. Dev accuracy picks the best evaluation.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from keras_bert.config import check_max_seq_length
from keras_bert.data import swag
from keras_bert.tasks.multiple_choice import MultipleChoice
from keras_bert.training import model_setup
from keras_bert.training.args import FinetuneArgs
from keras_bert.training.argument_set import arg, args_dataclass
from keras_bert.training.family import Family


@args_dataclass
class SwagArgs(FinetuneArgs):
    """`FinetuneArgs` plus the SWAG files (sizes in examples of four choices)."""

    FLAG_TABLE = "swag"

    FAMILY_DEFAULTS = {"train_batch_size": 16, "eval_batch_size": 32}

    train_file: str = arg(help="SWAG train.csv (official layout).", required=True)
    dev_file: str = arg(help="SWAG val.csv (official layout).", required=True)


@dataclasses.dataclass
class SwagData:
    train: list
    dev: list


def encode_examples(
    task: MultipleChoice, examples, batch_size: int = 256
) -> tuple[dict, np.ndarray]:
    """SWAG examples -> (int32 model inputs [N, 4, max_seq_length], int32 labels [N])."""
    parts = [
        task.encode_choices(
            [e.context for e in examples[i : i + batch_size]],
            [e.second_segments() for e in examples[i : i + batch_size]],
        )
        for i in range(0, len(examples), batch_size)
    ]
    features = {k: np.concatenate([p[k].numpy() for p in parts]) for k in parts[0]}
    return features, np.array([e.label for e in examples], np.int32)


def accuracy(task: MultipleChoice, examples, batch_size: int) -> dict:
    """{"accuracy": share of examples whose most probable choice is the label, "loss": mean
    cross-entropy of the choice probabilities and the labels}."""
    probabilities = task.predict(
        ([e.context for e in examples], [e.second_segments() for e in examples]),
        batch_size=batch_size,
    )
    labels = np.array([e.label for e in examples])
    picked = probabilities[np.arange(len(labels)), labels]
    return {
        "accuracy": float((probabilities.argmax(-1) == labels).mean()),
        "loss": float(-np.mean(np.log(np.maximum(picked, 1e-12)))),
    }


class Swag(Family):
    name = "swag"
    Args = SwagArgs
    model_name = "swag"

    def read(self, args, preprocessor) -> SwagData:
        return SwagData(
            swag.read_swag(args.train_file)[: args.max_train_examples or None],
            swag.read_swag(args.dev_file)[: args.max_eval_examples or None],
        )

    def build_task(self, args, data, preprocessor) -> MultipleChoice:
        encoder = model_setup.build_encoder(args, len(preprocessor.vocabulary))
        check_max_seq_length(
            args.max_seq_length, encoder.bert_config.max_sequence_length, is_pair=True
        )
        return MultipleChoice(
            encoder,
            num_choices=swag.NUM_CHOICES,
            dropout_rate=args.dropout_rate,
            preprocessor=preprocessor,
        )

    def default_learning_rate(self, task) -> float:
        return 2e-5

    def train_arrays(self, task, data):
        return encode_examples(task, data.train)

    def evaluator(self, args, data):
        return lambda task: accuracy(task, data.dev, args.eval_batch_size)

    def finish(self, args, data, task, out) -> dict:
        return {
            "dev": accuracy(task, data.dev, args.eval_batch_size),
            "train_examples": len(data.train),
        }

    def headline(self, summary: dict) -> dict:
        return {
            "dev accuracy": summary["dev"].get("accuracy"),
            "steps": summary["runs"][summary["best_run"]]["steps"],
        }

    def export_config(self, summary: dict) -> dict:
        return {"dev": summary["dev"]}


FAMILY = Swag()
