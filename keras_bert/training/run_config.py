"""A run's config.json: written once (`write_config`: every setting, which were given, which
derived and why), and read back by a rerun into the same output_dir (`check_rerun`), older
output_dirs included: the settings a rerun may change (`HARMLESS_SETTINGS`), the value a setting
added since stands for (`ADDED_SETTINGS`) and the old names (`RENAMED_SETTINGS`,
`recorded_settings`).
"""

from __future__ import annotations

from keras_bert import fileio
from keras_bert.training import resume_check

# Settings that do not change what a run computes: a rerun into the same output_dir may differ
# here. pad_to_multiple_of only cuts masked padding columns; output_dir is where the old
# config.json was read from, however it is spelled; the export settings act after training;
# max_train_seconds is a limit of the process, as a kill is (a rerun of a killed run resumes the
# same batches under its own limit; a run the limit stopped is finished, and a rerun reuses it).
HARMLESS_SETTINGS = frozenset(
    {
        "verbose",
        "num_replicas",
        "pad_to_multiple_of",
        "output_dir",
        "given",
        "derived",
        "family",
        "export_dir",
        "model_name",
        "export_dtype",
        "export_tflite",
        "export_quantize",
        "save_checkpoints_steps",
        "log_steps",
        "max_train_seconds",
    }
)

# Settings added to a family after output_dirs were first written, with the value an older
# config.json (which lacks them) stands for: the behaviour of the family before the flag.
ADDED_SETTINGS = {
    "group_by_length": False,
    "ema_momentum": 0.0,
    "layerwise_lr_decay": 1.0,
    "optimizer": "adamw",
    "gradient_accumulation_steps": 1,
    "jit_compile": False,
    "num_restarts": 1,
    "evaluations_per_epoch": 1,
    "early_stopping_patience": None,
    "max_train_seconds": None,
    "min_train_steps": 0,
    "tpu": None,
    "strategy": "default",
    "dropout_rate": 0.1,
}

# Old names in config.json of output_dirs written before the families shared one argument set.
RENAMED_SETTINGS = {
    "classifier_dropout": "dropout_rate",
    "window_stride": "doc_stride",
    "predict_batch_size": "eval_batch_size",
    "max_predict_examples": "max_eval_examples",
    "resolved_do_lower_case": "do_lower_case",
}


def recorded_settings(config: dict, family_epochs: float | None = None) -> dict:
    """An older config.json in today's names (`RENAMED_SETTINGS`); a vocab_file recorded as
    not given (older SQuAD runs recorded the flag, not the resolved file) is not compared.

    Older runs recorded `num_train_epochs` as the flag's value, its default included, and raised
    it to reach --min_train_steps either way: the family's default epochs there stand for today's
    "not given" (None), which trains the same schedule.
    """
    if "given" in config:
        return config
    if family_epochs is not None and config.get("num_train_epochs") == family_epochs:
        config = config | {"num_train_epochs": None}
    out = {
        RENAMED_SETTINGS.get(k, k): v
        for k, v in config.items()
        if k not in ("do_lower_case", "resolved_vocab_size", "export_litert")
        or "resolved_do_lower_case" not in config
    }
    if out.get("vocab_file") is None:
        out.pop("vocab_file", None)
    return out


def check_rerun(out: str, settings: dict, family_epochs: float) -> None:
    """Refuses a rerun into `out` whose config.json records a run with other settings
    (`resume_check.check_resume_settings` under the rules above; `family_epochs`: the family's
    default `--num_train_epochs`).

    Raises:
        ValueError: naming each changed setting.
    """
    resume_check.check_resume_settings(
        out,
        settings,
        ignored=HARMLESS_SETTINGS,
        defaults=ADDED_SETTINGS,
        view=lambda c: recorded_settings(c, family_epochs),
    )


def write_config(out: str, settings: dict, given: list[str], derived: dict) -> None:
    """`out`/config.json (atomically): `settings`, the names the user gave (`given`) and the
    derived values with their reasons (`derived`: name -> {"value", "why"}, `argument_set.Resolution`)."""
    fileio.write_json(
        fileio.join(out, "config.json"), settings | {"given": given, "derived": derived}
    )
