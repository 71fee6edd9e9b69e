"""One argument set for every fine-tuning family: `TrainingArgs`, `FinetuneArgs` (the catalogue).

Each field is one setting with one name, one default, one check and its help text (the field's
metadata); `arg_flags.define_flags(cls)` turns the fields of any subclass into absl flags, so every
recipe has every common flag, and `arg_flags.from_flags(cls)` reads them back, remembering which
the user gave. A family
subclasses `FinetuneArgs` with only its own fields (`families/*.py`) and may give a common field
another default (`FAMILY_DEFAULTS` with `args_dataclass`, e.g. SWAG's batch of 16, SQuAD's 384
tokens): the flag then shows that default.

Two settings are derived when not given, never when given: `learning_rate` (by encoder width,
`default_learning_rate`, or the family's) and `num_train_epochs` (the family's epochs, raised to
reach `min_train_steps` on small data). `Resolution` records which values were given and which
were derived, and why; the driver writes both into config.json. The machinery of fields and
sets (`arg`, `ArgumentSet`, `fields_of`, `Resolution`) is `keras_bert.training.argument_set`.
"""

from __future__ import annotations

from keras_bert.config import check_max_seq_length
from keras_bert.training.argument_set import (
    AT_LEAST_ONE,
    NOT_NEGATIVE,
    POSITIVE,
    ArgumentSet,
    Rule,
    arg,
    args_dataclass,
)

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")


@args_dataclass
class RuntimeArgs(ArgumentSet):
    """Where and how a training run computes: the settings of pretraining and fine-tuning alike."""

    strategy: str = arg("default", "tf.distribute strategy.", choices=STRATEGIES)
    tpu: str | None = arg(None, "TPU name or address for --strategy=tpu.")
    mixed_precision: str = arg("float32", "Keras dtype policy.", choices=PRECISIONS)
    jit_compile: bool = arg(False, "XLA-compile the train step.")


@args_dataclass
class TrainingArgs(RuntimeArgs):
    """Settings of any training run of the driver: optimisation, batches and evaluation, runtime,
    export. Sizes are in examples (a family says what an example is: a sentence, a window, a
    question with its four endings), tokens (incl. [CLS]/[SEP]) and batches / optimizer steps."""

    FLAG_TABLE = "training"

    output_dir: str = arg(
        help="Output directory (a rerun with the same flags resumes).", required=True
    )
    # optimisation
    learning_rate: float | None = arg(
        None,
        "Peak learning rate (fine-tuning default: the family's; "
        "classification: 1e-4 for encoders with hidden_size <= 512, "
        "3e-5 above; see docs/finetuning.md).",
        rule=POSITIVE,
        derived=True,
    )
    num_train_epochs: float | None = arg(
        None,
        "Epochs, may be fractional (default: the family's, "
        "3 (SQuAD 2), raised to reach --min_train_steps on small "
        "data; a given value is never changed).",
        rule=POSITIVE,
        derived=True,
    )
    min_train_steps: int = arg(
        100,
        "When --num_train_epochs is not given: train more epochs "
        "until this many optimizer steps (small data sets); 0: off.",
        rule=NOT_NEGATIVE,
    )
    warmup_proportion: float = arg(
        0.1, "Fraction of steps of linear warmup.", rule=Rule(lambda v: 0 <= v <= 1, "in [0, 1]")
    )
    weight_decay: float = arg(0.01, "AdamW/LAMB decoupled weight decay.", rule=NOT_NEGATIVE)
    adam_epsilon: float = arg(
        1e-6,
        "Epsilon of AdamW/LAMB, added to the root of the second moment after the step size's "
        "bias correction, as TensorFlow and Keras add it (BERT's 1e-6; see docs/finetuning.md).",
        rule=POSITIVE,
    )
    optimizer: str = arg("adamw", "Optimizer.", choices=("adamw", "lamb"))
    gradient_accumulation_steps: int = arg(
        1,
        "Batches per optimizer update (a step): each update applies the mean gradient of this "
        "many batches. Every *_steps flag counts steps, as do the learning-rate schedule, the "
        "weight average and the progress lines.",
        rule=AT_LEAST_ONE,
    )
    max_grad_norm: float = arg(1.0, "Global-norm gradient clipping (0: off).", rule=NOT_NEGATIVE)
    ema_momentum: float = arg(
        0.0,
        "Largest decay of a moving average of the weights that is "
        "evaluated and kept instead of the last weights (e.g. 0.999; 0: off); "
        "see docs/finetuning.md.",
        rule=Rule(lambda v: 0 <= v < 1, "in [0, 1) (0: no weight average)"),
    )
    layerwise_lr_decay: float = arg(
        1.0,
        "Layer-wise learning-rate decay d in (0, 1]: the task "
        "head trains at --learning_rate, each Transformer block at d "
        "times the block above it, the embeddings lowest (ELECTRA's "
        "0.8; 1: one rate for all); see docs/finetuning.md.",
        rule=Rule(lambda v: 0 < v <= 1, "in (0, 1] (1: off)"),
    )
    dropout_rate: float = arg(
        0.1, "Dropout before the task head.", rule=Rule(lambda v: 0 <= v < 1, "in [0, 1)")
    )
    # batches and evaluation
    train_batch_size: int = arg(32, "Global training batch size (examples).", rule=AT_LEAST_ONE)
    eval_batch_size: int = arg(
        64, "Examples per evaluation / prediction batch (one model call).", rule=AT_LEAST_ONE
    )
    pad_to_multiple_of: int = arg(
        8,
        "Dynamic padding: cut each batch to its longest row rounded up to a multiple of this "
        "many tokens (0: no rounding); under --strategy=tpu or --jit_compile, up to the next of "
        "four fixed lengths (docs/finetuning.md).",
        rule=NOT_NEGATIVE,
    )
    group_by_length: bool = arg(
        True,
        "Order each shuffled training epoch so a batch holds "
        "examples of similar length (groups of 50 batches, as Hugging "
        "Face's group_by_length); with dynamic padding an epoch of SST-2 "
        "carries 2.5x fewer tokens. --nogroup_by_length: batches of "
        "random lengths.",
    )
    max_train_examples: int | None = arg(
        None, "Use only the first N training examples.", rule=AT_LEAST_ONE
    )
    max_eval_examples: int | None = arg(
        None, "Use only the first N dev (and test) examples.", rule=AT_LEAST_ONE
    )
    evaluations_per_epoch: int = arg(
        1,
        "Dev evaluations per epoch (the best one is kept); 1: at epoch ends only.",
        rule=AT_LEAST_ONE,
    )
    early_stopping_patience: int | None = arg(
        None, "Stop after N epochs without dev improvement.", rule=AT_LEAST_ONE
    )
    max_train_seconds: float | None = arg(
        None,
        "Stop training after this many seconds of training (the best evaluation so far is kept).",
        rule=POSITIVE,
    )
    save_checkpoints_steps: int | None = arg(
        1000,
        "Optimizer steps between step checkpoints (pretraining: and history.jsonl lines).",
        rule=AT_LEAST_ONE,
    )
    log_steps: int = arg(
        100,
        "Optimizer steps between training-loss and learning-rate points in TensorBoard "
        "(<output_dir>/logs): the learning curve's resolution.",
        rule=AT_LEAST_ONE,
    )
    num_restarts: int = arg(
        1, "Runs with seeds seed..seed+N-1; the best is kept.", rule=AT_LEAST_ONE
    )
    # runtime (and RuntimeArgs)
    seed: int = arg(
        42,
        "Random seed of initialisation, dropout and input order (pretraining data: the same "
        "seed and inputs give identical records).",
    )
    verbose: int = arg(
        1, "Progress: 0 silent, 1 progress bar, 2 one line per epoch.", choices=(0, 1, 2)
    )
    # export
    export_dir: str | None = arg(
        None,
        "Base directory of the versioned SavedModel export of the model (a fine-tuning run's: "
        "the kept one): writes <export_dir>/<model_name>/<version>.",
        path=True,
    )
    model_name: str | None = arg(None, "Model name for --export_dir (default: the family's).")
    export_dtype: str | None = arg(
        None,
        "Dtype policy of the --export_dir SavedModel (default: as trained). bfloat16 stores the "
        "variables in bfloat16: half the size, faster on CPUs with AVX512_BF16/AMX (LayerNorm, "
        "softmax and outputs stay float32); see docs/export.md.",
        choices=("float32", "bfloat16"),
    )
    export_tflite: bool = arg(
        False,
        "With --export_dir: also write model.tflite, the `encoded` "
        "signature for LiteRT (serving.server --prefer_tflite_model); "
        "docs/export.md.",
    )
    export_quantize: str | None = arg(
        None,
        "With --export_dir: quantize model.tflite (implies "
        "--export_tflite); int8 = dynamic-range int8 weights (the SavedModel stays float32).",
        choices=("int8",),
    )

    def validate(self) -> None:
        super().validate()
        _ = self.litert  # a quantization with --noexport_tflite is refused before training

    @property
    def litert(self) -> str | None:
        """`Task.export`'s `litert` argument: None, "float32" or "int8"."""
        return litert_setting(self)


def litert_setting(settings: ArgumentSet) -> str | None:
    """`Task.export`'s `litert` argument from the export fields of `settings` (a `TrainingArgs`,
    or `python -m export`'s): None, "float32" or "int8".

    Raises:
        ValueError: `--export_quantize` with `--noexport_tflite` given.
    """
    from keras_bert.saved_model.litert import litert_option

    refused = "export_tflite" in settings.given() and not settings.export_tflite
    return litert_option(settings.export_tflite, settings.export_quantize, tflite_refused=refused)


@args_dataclass
class FinetuneArgs(TrainingArgs):
    """`TrainingArgs` plus the model source of a fine-tuning run.

    Model source, one of: `init_checkpoint` (preset name such as "minilm_l6_h384_uncased", a
    Hugging Face / google-research / Keras checkpoint; its vocab is used unless `vocab_file` is
    given), or random init from `bert_config_file` (JSON) or `preset` (e.g. "bert_tiny") with
    `vocab_file`.
    """

    init_checkpoint: str | None = arg(
        None, "Preset name (minilm_l6_h384_uncased) or checkpoint path.", path=True
    )
    bert_config_file: str | None = arg(
        None,
        "BERT config JSON (our or google-research names) for a randomly initialised encoder.",
        path=True,
    )
    preset: str | None = arg(
        None, "Preset config (bert_tiny, ...) for a randomly initialised encoder."
    )
    vocab_file: str | None = arg(
        None,
        "WordPiece vocab.txt (fine-tuning default: the checkpoint's; pretraining: the vocab the "
        "records are made with, which sizes the pretrained model and gives the [MASK] id).",
        path=True,
    )
    do_lower_case: bool | None = arg(
        None,
        "Lower-case and strip accents (an uncased vocab; fine-tuning default: the checkpoint's, "
        "else True); pretraining stores it with the encoder it writes.",
    )
    # The rule is the least every program takes; fine-tuning's `validate` and pretraining's
    # model build ask for more (`check_max_seq_length`).
    max_seq_length: int = arg(
        128,
        "Tokens per example incl. [CLS]/[SEP] (a window; pretraining: a record, must match the "
        "records).",
        rule=AT_LEAST_ONE,
    )

    def validate(self) -> None:
        super().validate()
        try:  # the one rule; checked again against the encoder and the task's pairing later
            check_max_seq_length(self.max_seq_length)
        except ValueError as e:
            raise ValueError(f"--{e}") from None
        for other in ("preset", "bert_config_file"):
            if self.init_checkpoint and getattr(self, other):
                raise ValueError(
                    f"--init_checkpoint={self.init_checkpoint} and --{other}="
                    f"{getattr(self, other)} both given: use --init_checkpoint for a "
                    f"pretrained encoder, or --{other} (with --vocab_file) for a "
                    "randomly initialised one, not both"
                )
        if self.preset and self.bert_config_file:
            raise ValueError("--preset and --bert_config_file both given: pass one of them")


def default_learning_rate(hidden_size: int) -> float:
    """The peak learning rate of a classifier when --learning_rate is not given.

    Small encoders (hidden_size <= 512: MiniLM-L6-H384, BERT-tiny ... BERT-medium) fine-tune best
    near 1e-4 (measured on SST-2 and on a 200-row 3-class set, docs/finetuning.md: 2e-5 barely
    moves them in a few hundred steps); BERT-base and larger take the paper's range (2e-5 - 5e-5,
    BERT §A.3), 3e-5.
    """
    return 1e-4 if hidden_size <= 512 else 3e-5
