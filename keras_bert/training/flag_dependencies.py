"""Flags that act only with (or only without) another: one table for every recipe and program,
and the one check they all call.

A flag the user gave that would be ignored is refused, naming both flags, before anything is read,
loaded or trained: `--export_quantize=int8` without `--export_dir` would write no model.tflite,
SQuAD's `--early_stopping_patience` without `--predict_file` would train without early stopping.
One line, exit status 2 (`keras_bert.cli.fail_usage`; `serving.server` writes the same form):

    run_squad.py: error: --early_stopping_patience acts only with --predict_file (SQuAD evaluates
    during training on the prediction file); it would be ignored

Given means on the command line (absl's `FLAGS[name].present`), whatever the value, the default's
included: `--masked_lm_prob=0.15` without `--dynamic_masking` is refused as `--masked_lm_prob=0.2`
is. From Python, an argument set's field counts as given when it differs from its default
(`argument_set.ArgumentSet.given`). The other flag (the condition) is read by its value (a path flag given
empty, `--export_dir=`, is refused before this check: `keras_bert.cli.check_not_empty`).

`TABLE` maps a program (or the argument set of a fine-tuning family) to its entries, in the order
they are checked; the first missing partner is the one reported. The argument sets
(`keras_bert.training.args`) check it on construction (`ArgumentSet.FLAG_TABLE` names their
entry), the hand-written programs through `check_flag_partners` (`check_flags`), first thing in
their `main`.

This module imports nothing of keras_bert but the leaf `keras_bert.cli`: `serving.server`, which
imports no model code, reads the table too.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Mapping, NamedTuple

from keras_bert.cli import fail_usage


class Condition(NamedTuple):
    """When the flags of an entry act. `text` completes "acts only ..." (e.g. "with
    --export_dir"); `flags` are the flags it reads; `holds(values)` reads them from a mapping of
    flag name -> value."""

    text: str
    flags: tuple[str, ...]
    holds: Callable[[Mapping[str, object]], bool]


class Needs(NamedTuple):
    """`flag` acts only when `condition` holds; `why` says what it does there."""

    flag: str
    condition: Condition
    why: str

    def message(self) -> str:
        return f"--{self.flag} acts only {self.condition.text} ({self.why}); it would be ignored"


def is_set(value) -> bool:
    """Whether a flag's value asks for something: not None, False, "" or an empty list."""
    if isinstance(value, (list, tuple)):
        return bool(value)
    return value is not None and value is not False and value != ""


def given(name: str) -> Condition:
    return Condition(f"with --{name}", (name,), lambda v: is_set(v[name]))


def absent(name: str) -> Condition:
    return Condition(f"without --{name}", (name,), lambda v: not is_set(v[name]))


def equal(name: str, value: str) -> Condition:
    return Condition(f"with --{name}={value}", (name,), lambda v: v[name] == value)


def any_given(*names: str) -> Condition:
    return Condition(
        "with " + " or ".join(f"--{n}" for n in names),
        names,
        lambda v: any(is_set(v[n]) for n in names),
    )


def positive(name: str) -> Condition:
    return Condition(f"with --{name} > 0", (name,), lambda v: v[name] is not None and v[name] > 0)


def needs(flags: Iterable[str], condition: Condition, why: str) -> tuple[Needs, ...]:
    """One entry per flag of `flags`, all with the same condition and reason."""
    return tuple(Needs(flag, condition, why) for flag in flags)


# Own-data task names of the classification family (keras_bert.data.text_files.TASK_TYPES; a test
# keeps the two equal: this module imports nothing of keras_bert).
OWN_DATA_TASKS = ("text_classification", "text_pair_classification", "text_regression")
OWN_DATA = Condition(
    "with --task_name=" + ", ".join(OWN_DATA_TASKS[:-1]) + f" or {OWN_DATA_TASKS[-1]}",
    ("task_name",),
    lambda v: str(v["task_name"] or "").lower() in OWN_DATA_TASKS,
)
GLUE = Condition(
    "with a GLUE --task_name",
    ("task_name",),
    lambda v: is_set(v["task_name"]) and str(v["task_name"]).lower() not in OWN_DATA_TASKS,
)
OWN_DATA_FLAGS = ("train_file", "dev_file", "text_column", "text_b_column", "label_column")

# The settings of training itself (optimisation, training batches, evaluation during training,
# checkpoints): SQuAD with only --predict_file does not train.
TRAINING_SETTINGS = (
    "learning_rate",
    "num_train_epochs",
    "min_train_steps",
    "warmup_proportion",
    "weight_decay",
    "adam_epsilon",
    "optimizer",
    "gradient_accumulation_steps",
    "max_grad_norm",
    "ema_momentum",
    "layerwise_lr_decay",
    "dropout_rate",
    "train_batch_size",
    "pad_to_multiple_of",
    "group_by_length",
    "max_train_examples",
    "evaluations_per_epoch",
    "early_stopping_patience",
    "max_train_seconds",
    "save_checkpoints_steps",
    "log_steps",
    "num_restarts",
    "jit_compile",
)

RUNTIME = (Needs("tpu", equal("strategy", "tpu"), "the TPU to connect to"),)

TRAINING = (
    *RUNTIME,
    Needs(
        "min_train_steps",
        absent("num_train_epochs"),
        "it raises the family's default epochs; a given --num_train_epochs is never changed",
    ),
    Needs("model_name", given("export_dir"), "the name the export is written under"),
    Needs("export_dtype", given("export_dir"), "the dtype of the exported SavedModel"),
    Needs("export_tflite", given("export_dir"), "it adds model.tflite to the export"),
    Needs("export_quantize", given("export_dir"), "it quantizes the exported model.tflite"),
)

SQUAD = (
    *TRAINING,
    *needs(
        TRAINING_SETTINGS,
        given("train_file"),
        "a setting of training; with only --predict_file SQuAD predicts without training",
    ),
    *needs(
        ("evaluations_per_epoch", "early_stopping_patience"),
        given("predict_file"),
        "SQuAD evaluates during training on the prediction file",
    ),
    *needs(
        ("eval_batch_size", "max_eval_examples"),
        any_given("predict_file", "null_threshold_dev_fraction"),
        "the questions predicted after training",
    ),
    Needs(
        "null_score_diff_threshold",
        given("version_2_with_negative"),
        'SQuAD v2.0 answers "" above it',
    ),
    Needs(
        "null_threshold_dev_fraction",
        given("version_2_with_negative"),
        "it chooses the SQuAD v2.0 null threshold",
    ),
    Needs(
        "null_threshold_dev_fraction",
        given("train_file"),
        "the threshold is chosen on held-out training articles",
    ),
)

RANDOM_INIT = "the config of a randomly initialised encoder"

BEAM = (
    Needs(
        "num_workers",
        equal("runner", "DirectRunner"),
        "the DirectRunner's worker processes; other runners take theirs from "
        "--beam_pipeline_options",
    ),
)

TABLE: dict[str, tuple[Needs, ...]] = {
    # Argument sets (keras_bert.training.args: `ArgumentSet.FLAG_TABLE`).
    "training": TRAINING,
    "classification": (
        *TRAINING,
        *needs(OWN_DATA_FLAGS, OWN_DATA, "own data files; a GLUE task reads its own"),
        Needs("data_dir", GLUE, "where the GLUE task's files are"),
    ),
    "squad": SQUAD,
    "ner": (
        *TRAINING,
        *needs(
            ("lstm_units", "lstm_layers"),
            given("feature_mode"),
            "the BiLSTM over the frozen encoder's features",
        ),
    ),
    "swag": TRAINING,
    "distillation": (
        *TRAINING,
        *needs(OWN_DATA_FLAGS, absent("task_name"), "own data files; a GLUE task reads its own"),
        Needs("data_dir", given("task_name"), "where the GLUE task's files are"),
        Needs("student_layers", absent("layer_map"), "--layer_map names the student's layers"),
        Needs(
            "temperature",
            positive("alpha"),
            "it softens the teacher's targets, whose loss --alpha weighs",
        ),
    ),
    "pretraining": (
        *RUNTIME,
        Needs("masked_lm_prob", given("dynamic_masking"), "the masks drawn in the pipeline"),
        Needs("preset", absent("init_checkpoint"), RANDOM_INIT),
        Needs("preset", absent("bert_config_file"), RANDOM_INIT),
        Needs("bert_config_file", absent("init_checkpoint"), RANDOM_INIT),
    ),
    # Programs that define their flags by hand (check_flag_partners).
    "create_pretraining_data": BEAM,
    "batch_predict": BEAM,
    "create_vocab": (),
    "extract_features": (),
    "convert_checkpoint": (),
    "export": (),
    "evaluate": (
        *needs(
            (
                "model",
                "compare",
                "server",
                "server_model_name",
                "compare_server_model_name",
                "behaviour_tests",
                "eval_batch_size",
                "machine_cost_per_hour",
                "invariance_rows",
                "bootstrap_samples",
                "seed",
            ),
            absent("predictions"),
            "it runs a model; --predictions scores recorded outputs",
        ),
        *needs(
            ("bootstrap_samples", "compare_server_model_name"),
            given("compare"),
            "the comparison with a second model",
        ),
        *needs(
            ("server_model_name", "compare_server_model_name"),
            given("server"),
            "the model's name on the server",
        ),
        Needs("baseline", given("gate"), "the reference of the gate's change thresholds"),
    ),
    "serving.server": (
        *needs(
            ("batching_parameters_file", "enable_large_batch_splitting"),
            given("enable_batching"),
            "batched model calls",
        ),
        Needs("model_base_path", absent("model_config_file"), "the config file lists the models"),
        Needs("model_name", given("model_base_path"), "the name of the --model_base_path model"),
        Needs(
            "model_config_file_poll_wait_seconds",
            given("model_config_file"),
            "the wait between reads of the config file",
        ),
        *needs(
            ("request_log_max_file_bytes", "request_log_queue_size"),
            given("model_config_file"),
            "the request logs the config file's logging_config entries ask for",
        ),
        Needs(
            "load_retry_interval_micros",
            positive("max_num_load_retries"),
            "the wait between retries of a failed load",
        ),
        *needs(
            (
                "rest_api_num_threads",
                "rest_api_max_connections",
                "rest_api_idle_timeout_seconds",
                "rest_api_body_timeout_seconds",
            ),
            positive("rest_api_port"),
            "the REST port's bounds; --rest_api_port=0 serves no REST",
        ),
    ),
}


class MissingPartnerError(ValueError):
    """A given flag that acts only with another (`Needs.message`)."""


def flag_names(table: str) -> set[str]:
    """Every flag the entries of `table` name (given or read by a condition)."""
    return {n for e in TABLE[table] for n in (e.flag, *e.condition.flags)}


def check(table: str, values: Mapping[str, object], given_flags: Iterable[str]) -> None:
    """Raises MissingPartnerError for the first entry of `TABLE[table]` whose flag is in
    `given_flags` and whose condition does not hold on `values` (flag name -> value)."""
    given_flags = set(given_flags)
    for entry in TABLE[table]:
        if entry.flag in given_flags and not entry.condition.holds(values):
            raise MissingPartnerError(entry.message())


def check_flags(table: str, flag_values, settings=None) -> None:
    """`check` on parsed absl flags: given = present on the command line.

    Args:
        settings: an argument set read from the same flags (`arg_flags.from_flags`), or None:
            its fields count by their values and its `given()`, so a field given by its
            deprecated spelling counts as given.

    Raises:
        MissingPartnerError: as `check`.
        KeyError: the table names a flag the program does not define.
    """
    names = flag_names(table)
    fields = {f.name for f in dataclasses.fields(settings)} if settings is not None else set()
    given_fields = set(settings.given()) if settings is not None else set()
    check(
        table,
        {n: getattr(settings, n) if n in fields else flag_values[n].value for n in names},
        {n for n in names if (n in given_fields if n in fields else flag_values[n].present)},
    )


def check_flag_partners(table: str, flag_values=None, settings=None) -> None:
    """Ends the program as a usage error (`fail_usage`: one line naming both flags, exit 2) when
    a flag on its command line acts only with (or without) another that is not there:
    `TABLE[table]`. Every program that defines its flags by hand calls it first
    thing in its `main` (the argument sets check the table on construction); `settings`: the
    catalogue fields it takes, read (`check_flags`)."""
    from absl import flags

    try:
        check_flags(table, flags.FLAGS if flag_values is None else flag_values, settings)
    except MissingPartnerError as e:
        fail_usage(str(e))
