"""`FinetuneConfig`: every setting of a fine-tuning run, and the rerun check of an output_dir.

Field names are the flag names of `recipes/run_classifier.py` (google-research/bert's where one
exists). A rerun into the same output_dir must use the same settings (`check_resume_settings`, the
shared check of `resume_check`); it then resumes from the last checkpoint.
"""
from __future__ import annotations

import dataclasses
import pathlib

from keras_bert.config import check_max_seq_length
from keras_bert.training import resume_check

@dataclasses.dataclass
class FinetuneConfig:
    """All settings of a fine-tuning run; field names are the recipe's flag names.

    Model source, one of: `init_checkpoint` (preset name such as "minilm_l6_h384_uncased", a
    Hugging Face / google-research / Keras checkpoint; its vocab is used unless `vocab_file` is
    given), or random init from `bert_config_file` (JSON) or `preset` (e.g. "bert_tiny") with
    `vocab_file`. Sizes are in examples, tokens (including [CLS]/[SEP]) and optimizer steps.
    """

    task_name: str
    output_dir: str
    data_dir: str | None = None
    train_file: str | None = None
    dev_file: str | None = None
    text_column: str = "text"
    text_b_column: str | None = None
    label_column: str = "label"
    init_checkpoint: str | None = None
    bert_config_file: str | None = None
    preset: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    max_seq_length: int = 128
    pad_to_multiple_of: int = 8
    group_by_length: bool = True
    train_batch_size: int = 32
    eval_batch_size: int = 64
    learning_rate: float | None = None  # None: by encoder width, see default_learning_rate
    num_train_epochs: float = 3.0
    min_train_steps: int = 100            # more epochs when num_train_epochs gives fewer steps
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    optimizer: str = "adamw"
    gradient_accumulation_steps: int = 1
    max_grad_norm: float = 1.0
    ema_momentum: float = 0.0             # > 0: evaluate and keep a moving average of the weights
    layerwise_lr_decay: float = 1.0       # < 1: each Transformer block d times the rate above it
    classifier_dropout: float = 0.1
    classifier_pooling: str = "cls"
    strategy: str = "default"
    tpu: str | None = None
    mixed_precision: str = "float32"
    jit_compile: bool = False
    num_restarts: int = 1
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    seed: int = 42
    save_checkpoints_steps: int | None = 1000
    early_stopping_patience: int | None = None
    evaluations_per_epoch: int = 1
    verbose: str | int = "auto"

    def __post_init__(self):
        """Check the numeric flags and the model source at construction.

        Raises:
            ValueError: naming the flag, e.g. "--train_batch_size must be >= 1, got 0", or two
                model sources given together (--init_checkpoint with --preset / --bert_config_file).
        """
        checks = [("num_train_epochs", self.num_train_epochs > 0, "> 0"),
                  ("train_batch_size", self.train_batch_size >= 1, ">= 1"),
                  ("eval_batch_size", self.eval_batch_size >= 1, ">= 1"),
                  ("learning_rate", self.learning_rate is None or self.learning_rate > 0, "> 0"),
                  ("min_train_steps", self.min_train_steps >= 0, ">= 0"),
                  ("warmup_proportion", 0 <= self.warmup_proportion <= 1, "in [0, 1]"),
                  ("num_restarts", self.num_restarts >= 1, ">= 1"),
                  ("gradient_accumulation_steps", self.gradient_accumulation_steps >= 1, ">= 1"),
                  ("pad_to_multiple_of", self.pad_to_multiple_of >= 0, ">= 0 (0: pad to max_seq_length)"),
                  ("evaluations_per_epoch", self.evaluations_per_epoch >= 1, ">= 1"),
                  ("ema_momentum", 0 <= self.ema_momentum < 1, "in [0, 1) (0: no weight average)"),
                  ("layerwise_lr_decay", 0 < self.layerwise_lr_decay <= 1, "in (0, 1] (1: off)")]
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"--{name} must be {rule}, got {getattr(self, name)!r}")
        try:  # the one rule; checked again against the encoder and the task's pairing later
            check_max_seq_length(self.max_seq_length)
        except ValueError as e:
            raise ValueError(f"--{e}") from None
        for other in ("preset", "bert_config_file"):
            if self.init_checkpoint and getattr(self, other):
                raise ValueError(f"--init_checkpoint={self.init_checkpoint} and --{other}={getattr(self, other)} "
                                 f"both given: use --init_checkpoint for a pretrained encoder, or --{other} "
                                 "(with --vocab_file) for a randomly initialised one, not both")
        if self.preset and self.bert_config_file:
            raise ValueError("--preset and --bert_config_file both given: pass one of them")


# Settings that do not change what a run computes: a rerun into the same output_dir may differ here.
# pad_to_multiple_of only cuts masked padding columns (same results up to float summation order);
# output_dir is the directory the old config.json was read from, however it is spelled.
HARMLESS_SETTINGS = frozenset({"verbose", "num_replicas", "pad_to_multiple_of", "output_dir"})

# Settings added after output_dirs were first written, with the value an older config.json (which
# lacks them) stands for: before --group_by_length every epoch was random batches, so resuming such
# a run with grouping would skip the wrong batches of the interrupted epoch; runs before
# --ema_momentum kept no weight average, runs before --layerwise_lr_decay one rate for all layers.
ADDED_SETTINGS = {"group_by_length": False, "ema_momentum": 0.0, "layerwise_lr_decay": 1.0}


def check_resume_settings(out: pathlib.Path, resolved: dict) -> None:
    """Refuse to reuse an output_dir whose config.json holds a run with different settings: the
    shared rerun check (`resume_check.check_resume_settings`) with the fine-tuning families' lists.

    Args:
        out: the output directory.
        resolved: this run's settings as written to config.json (flags + resolved vocab_file,
            do_lower_case). Every setting but HARMLESS_SETTINGS counts; one an older config.json
            lacks counts as its ADDED_SETTINGS value (`group_by_length` False).

    Raises:
        ValueError: "output_dir <path> holds a run with different settings (recorded -> this
            run): <flag> <old> -> <new>, ...; use a new --output_dir, or rerun with the recorded
            values".
    """
    resume_check.check_resume_settings(out, resolved, ignored=HARMLESS_SETTINGS,
                                       defaults=ADDED_SETTINGS)


def default_learning_rate(hidden_size: int) -> float:
    """The peak learning rate used when --learning_rate is not given.

    Small encoders (hidden_size <= 512: MiniLM-L6-H384, BERT-tiny ... BERT-medium) fine-tune best
    near 1e-4 (measured on SST-2 and on a 200-row 3-class set, docs/finetuning.md: 2e-5 barely
    moves them in a few hundred steps); BERT-base and larger take the paper's range (2e-5 - 5e-5,
    BERT §A.3), 3e-5.
    """
    return 1e-4 if hidden_size <= 512 else 3e-5
