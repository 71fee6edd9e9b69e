"""SWAG fine-tuning (BERT section 4.4): `run_swag(SwagConfig(...))`.

Read train / dev CSVs (`keras_bert.data.swag`) -> build a `MultipleChoice` task (pretrained or
random encoder) -> train with the BERT optimizer, SIGKILL-safe checkpoints, TensorBoard and dev
accuracy per epoch (or more often), keeping the best (`array_training.fit_with_evaluation`, the
same loop as NER). Loss: cross-entropy of the softmax over the four choices.

Files in `output_dir`: `config.json`, `metrics.json` (dev accuracy per evaluation, best, and the
dev accuracy of the best weights), `checkpoints/`, `logs/`, `best.weights.h5`,
`metrics_state.json`, `best_model.keras`.
"""
from __future__ import annotations

import dataclasses
import logging
import pathlib
import time

import keras
import numpy as np

from keras_bert.config import check_max_seq_length
from keras_bert.data import swag
from keras_bert.tasks.multiple_choice import MultipleChoice
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert.training import callbacks as callbacks_lib
from keras_bert.training.finetune_config import check_resume_settings
from keras_bert.training.model_setup import build_encoder, resolve_vocab
from keras_bert.training.array_training import fit_with_evaluation
from keras_bert.training.optimizer import set_mixed_precision
from keras_bert.training.strategy import get_strategy

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class SwagConfig:
    """Settings of a SWAG run; field names are `recipes/run_swag.py`'s flags (sizes in examples,
    pieces incl. [CLS]/[SEP] and batches)."""

    train_file: str
    dev_file: str
    output_dir: str
    init_checkpoint: str | None = None
    bert_config_file: str | None = None
    preset: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    max_seq_length: int = 128
    train_batch_size: int = 16
    eval_batch_size: int = 32
    learning_rate: float = 2e-5
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    dropout_rate: float = 0.1
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    max_train_seconds: float | None = None
    group_by_length: bool = True
    seed: int = 42
    save_checkpoints_steps: int | None = 1000
    evaluations_per_epoch: int = 1
    early_stopping_patience: int | None = None
    mixed_precision: str = "float32"
    strategy: str = "default"
    verbose: str | int = "auto"

    def __post_init__(self):
        """Raises ValueError naming the flag: e.g. "--learning_rate must be > 0, got 0.0"."""
        checks = [("num_train_epochs", self.num_train_epochs > 0, "> 0"),
                  ("train_batch_size", self.train_batch_size >= 1, ">= 1"),
                  ("eval_batch_size", self.eval_batch_size >= 1, ">= 1"),
                  ("learning_rate", self.learning_rate > 0, "> 0"),
                  ("warmup_proportion", 0 <= self.warmup_proportion <= 1, "in [0, 1]"),
                  ("max_seq_length", self.max_seq_length >= 3, ">= 3 ([CLS] A [SEP] B [SEP])"),
                  ("evaluations_per_epoch", self.evaluations_per_epoch >= 1, ">= 1")]
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"--{name} must be {rule}, got {getattr(self, name)!r}")
        if self.init_checkpoint and (self.preset or self.bert_config_file):
            raise ValueError("--init_checkpoint and --preset / --bert_config_file both given: "
                             "pass one model source")


def encode_examples(task: MultipleChoice, examples, batch_size: int = 256) -> tuple[dict, np.ndarray]:
    """SWAG examples -> (int32 model inputs [N, 4, max_seq_length], int32 labels [N])."""
    parts = [task.encode_choices([e.context for e in examples[i:i + batch_size]],
                                 [e.second_segments() for e in examples[i:i + batch_size]])
             for i in range(0, len(examples), batch_size)]
    features = {k: np.concatenate([p[k].numpy() for p in parts]) for k in parts[0]}
    return features, np.array([e.label for e in examples], np.int32)


def accuracy(task: MultipleChoice, examples, batch_size: int) -> dict:
    """{"accuracy": share of examples whose most probable choice is the label}."""
    probabilities = task.predict(([e.context for e in examples],
                                  [e.second_segments() for e in examples]), batch_size=batch_size)
    labels = np.array([e.label for e in examples])
    return {"accuracy": float((probabilities.argmax(-1) == labels).mean())}


@dataclasses.dataclass
class SwagRun:
    """A SWAG run with its settings and data checked: `prepare_swag`'s result."""

    resolved: dict          # config.json: the flags plus the resolved vocab_file, do_lower_case
    train: list
    dev: list
    task: MultipleChoice
    strategy: object


def prepare_swag(config: SwagConfig) -> SwagRun:
    """Everything that can fail on bad flags or data, before any training.

    Raises:
        ValueError / FileNotFoundError: naming the flag, file or row.
    """
    set_mixed_precision(config.mixed_precision)
    strategy = get_strategy(config.strategy)
    vocab_file, do_lower_case = resolve_vocab(config)
    resolved = dataclasses.asdict(config) | {"vocab_file": vocab_file, "do_lower_case": do_lower_case}
    check_resume_settings(pathlib.Path(config.output_dir), resolved)
    train = swag.read_swag(config.train_file)[:config.max_train_examples or None]
    dev = swag.read_swag(config.dev_file)[:config.max_eval_examples or None]
    preprocessor = BertPreprocessor(vocab_file, do_lower_case=do_lower_case,
                                    max_seq_length=config.max_seq_length)
    keras.utils.set_random_seed(config.seed)
    with strategy.scope():
        encoder = build_encoder(config, len(preprocessor.vocabulary))
        check_max_seq_length(config.max_seq_length, encoder.bert_config.max_sequence_length,
                             is_pair=True)
        task = MultipleChoice(encoder, num_choices=swag.NUM_CHOICES,
                              dropout_rate=config.dropout_rate, preprocessor=preprocessor)
    return SwagRun(resolved, train, dev, task, strategy)


def run_swag(config: SwagConfig, prepared: SwagRun | None = None) -> dict:
    """One SWAG run (module docstring); `prepared` from `prepare_swag(config)` (else made here).

    Returns:
        dict: "best", "dev" (accuracy of the best weights), "epochs", "steps", "task",
        "train_seconds", "vocab_file", "do_lower_case".

    Raises:
        ValueError / FileNotFoundError: see `prepare_swag`.
    """
    run = prepared or prepare_swag(config)
    task, out = run.task, pathlib.Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    callbacks_lib.write_json_atomic(out / "config.json", run.resolved)
    features, labels = encode_examples(task, run.train)
    logger.info("%d training and %d dev examples", len(run.train), len(run.dev))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    start = time.monotonic()
    result = fit_with_evaluation(task, config, features, labels,
                                 lambda model: accuracy(model, run.dev, config.eval_batch_size),
                                 "accuracy", out, loss, run.strategy)
    train_seconds = time.monotonic() - start
    summary = result | {"dev": accuracy(task, run.dev, config.eval_batch_size),
                        "train_examples": len(run.train), "train_seconds": train_seconds}
    callbacks_lib.write_json_atomic(out / "metrics.json", summary)
    return summary | {"task": task, "vocab_file": run.resolved["vocab_file"],
                      "do_lower_case": run.resolved["do_lower_case"]}
