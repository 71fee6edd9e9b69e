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
were derived, and why; the driver writes both into config.json.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import ClassVar

from keras_bert.cli import check_not_empty
from keras_bert.config import check_max_seq_length
from keras_bert.training import flag_dependencies

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")


def args_dataclass(cls):
    """`dataclasses.dataclass(kw_only=True)` for an argument set; a common field named in the
    class's `FAMILY_DEFAULTS` gets that default (same help, check and position)."""
    for name, value in cls.__dict__.get("FAMILY_DEFAULTS", {}).items():
        base = next(
            b.__dataclass_fields__[name]
            for b in cls.__mro__[1:]
            if name in getattr(b, "__dataclass_fields__", {})
        )
        setattr(cls, name, dataclasses.field(default=value, metadata=base.metadata))
        cls.__annotations__[name] = base.type
    return dataclasses.dataclass(kw_only=True)(cls)


class Rule(typing.NamedTuple):
    """What a field's value must be: `check(value)` true; `text` says it in the error message."""

    check: typing.Callable
    text: str


POSITIVE = Rule(lambda v: v > 0, "> 0")
AT_LEAST_ONE = Rule(lambda v: v >= 1, ">= 1")
A_FRACTION = Rule(lambda v: 0 < v < 1, "in (0, 1)")  # strictly between 0 and 1
NOT_NEGATIVE = Rule(lambda v: v >= 0, ">= 0")


def arg(
    default=None,
    help: str = "",
    *,
    rule: Rule | None = None,
    choices=None,
    required: bool = False,
    derived: bool = False,
    deprecated_name: str | None = None,
    path: bool = False,
):
    """A field of an argument set.

    Args:
        default: the value when the flag is not given (None for a required field, or one a
            family or the driver fills in).
        help: the flag's help text.
        rule: a `Rule` the non-None values must keep ("--<name> must be <rule.text>, got
            <value>").
        choices: allowed values (an enum flag).
        required: the flag must be given.
        derived: None means "derive it" (`Resolution`); the flag's default stays None.
        deprecated_name: an older spelling of the flag, still accepted on the command line
            (`arg_flags.from_flags` takes its value with a warning naming the field's flag).
        path: the value names a file, a directory or a checkpoint: given empty, it is refused
            ("--<name> is empty", `keras_bert.cli.check_not_empty`), never read as not given.
    """
    meta = {
        "help": help,
        "check": rule and rule.check,
        "rule": rule and rule.text,
        "choices": choices,
        "required": required,
        "derived": derived,
        "deprecated_name": deprecated_name,
        "path": path,
    }
    if required:
        return dataclasses.field(default=None, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@args_dataclass
class ArgumentSet:
    """Base of an argument set (`TrainingArgs`, `keras_bert.training.pretraining.PretrainConfig`):
    every field checked against its `arg` metadata on construction, the defaults, the settings as
    config.json records them, and which fields the user gave.

    `given_flags` (not a field): the names of the flags on the command line (`from_flags`); None
    (a call from Python): the fields whose value is not the default (`given`).
    """

    FAMILY_DEFAULTS: ClassVar[dict] = {}
    # The entry of `flag_dependencies.TABLE` whose flags act only with (or without) another.
    FLAG_TABLE: ClassVar[str | None] = None

    given_flags: dataclasses.InitVar[frozenset | None] = None

    def __post_init__(self, given_flags=None):
        """Check every field against its rule, then across fields (`validate`), then that no
        given flag acts only with another that is missing (`flag_dependencies.TABLE`).

        Raises:
            ValueError: naming the flag, e.g. "--train_batch_size must be >= 1, got 0", or both
                flags, e.g. "--export_quantize acts only with --export_dir (...)".
        """
        if given_flags is not None:
            self.__dict__["_given"] = set(given_flags)
        for f in dataclasses.fields(self):
            value, meta = getattr(self, f.name), f.metadata
            if meta.get("required") or meta.get("path"):  # None (if required), "" or blank
                check_not_empty(f.name, value, required=bool(meta.get("required")))
            if value is None:
                continue
            if meta.get("choices") is not None and value not in meta["choices"]:
                raise ValueError(
                    f"--{f.name} must be one of {', '.join(map(str, meta['choices']))}, "
                    f"got {value!r}"
                )
            if meta.get("check") is not None and not meta["check"](value):
                raise ValueError(f"--{f.name} must be {meta['rule']}, got {value!r}")
        self.validate()
        if self.FLAG_TABLE is not None:
            flag_dependencies.check(
                self.FLAG_TABLE,
                {f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
                self.given(),
            )

    def validate(self) -> None:
        """Checks across fields (subclasses extend it). Raises ValueError naming the flags."""

    @classmethod
    def default(cls, name: str):
        """The default of a field (the family's where it sets one)."""
        return cls.__dataclass_fields__[name].default

    def settings(self) -> dict:
        """Every field, as config.json records it (JSON types)."""
        return {
            f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
            for f in dataclasses.fields(self)
        }

    def given(self) -> list[str]:
        """Names of the fields the user gave: the flags present on the command line
        (`from_flags`), else (a call from Python) those whose value is not the default."""
        explicit = self.__dict__.get("_given")
        if explicit is not None:
            return sorted(explicit)
        return sorted(
            f.name
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != self.default(f.name) and getattr(self, f.name) is not None
        )


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
    gradient_accumulation_steps: int = arg(1, "Batches per optimizer update.", rule=AT_LEAST_ONE)
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
        "Batches between step checkpoints (pretraining: and history.jsonl lines).",
        rule=AT_LEAST_ONE,
    )
    log_steps: int = arg(
        100,
        "Batches between training-loss points in TensorBoard (<output_dir>/logs): the learning "
        "curve's resolution.",
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


def fields_of(
    name: str, catalogue, changes: dict[str, dict], bases: tuple = (ArgumentSet,)
) -> type:
    """An argument set named `name` of some fields of the argument set `catalogue`: the flags of a
    program that writes its other flags by hand (`arg_flags.define_flags` beside its own
    `flags.DEFINE_*`), so a setting it shares with the catalogue has one name, help text, type,
    rule and choices. `changes` maps each field taken to what the program changes of it: `default`
    (its own default, as a family's `FAMILY_DEFAULTS`), `required`, `deprecated_name` (the
    program's older spelling, still accepted with a warning), `derived` (False: a setting the
    catalogue derives when not given is the program's `default` there). The catalogue's checks
    across fields (`validate`) and its `FLAG_TABLE` are not taken. `bases`: the classes the set
    extends, e.g. `(RuntimeArgs,)` for a program whose argument set subclasses it with its own
    fields (`keras_bert.training.pretraining.PretrainConfig`).
    """
    hints = typing.get_type_hints(catalogue)
    spec = []
    for field_name, change in changes.items():
        base = catalogue.__dataclass_fields__[field_name]
        meta = dict(base.metadata)
        meta.update({k: v for k, v in change.items() if k != "default"})
        default = None if meta["required"] else change.get("default", base.default)
        spec.append(
            (field_name, hints[field_name], dataclasses.field(default=default, metadata=meta))
        )
    return dataclasses.make_dataclass(name, spec, bases=bases, kw_only=True)


@dataclasses.dataclass
class Resolution:
    """The values derived for settings the user did not give, each with its reason."""

    derived: dict = dataclasses.field(default_factory=dict)  # name -> {"value", "why"}

    def derive(self, name: str, value, why: str):
        self.derived[name] = {"value": value, "why": why}
        return value


def default_learning_rate(hidden_size: int) -> float:
    """The peak learning rate of a classifier when --learning_rate is not given.

    Small encoders (hidden_size <= 512: MiniLM-L6-H384, BERT-tiny ... BERT-medium) fine-tune best
    near 1e-4 (measured on SST-2 and on a 200-row 3-class set, docs/finetuning.md: 2e-5 barely
    moves them in a few hundred steps); BERT-base and larger take the paper's range (2e-5 - 5e-5,
    BERT §A.3), 3e-5.
    """
    return 1e-4 if hidden_size <= 512 else 3e-5
