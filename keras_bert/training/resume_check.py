"""The one rerun check of every recipe that writes a run into an output_dir.

A rerun into an output_dir that already holds a run resumes from its checkpoints (pretraining and
every fine-tuning family) or replaces its files (distillation). Either is only right when the
settings that give those files their meaning are the ones recorded in the directory's
`config.json`: resuming a batch-8 pretraining run with batch 4 would mix two runs under one name
and count its examples wrong. `check_resume_settings` compares this run's settings with the
recorded ones before anything is written and refuses, naming each changed setting, when they differ.

Which settings count is each recipe's call, as the settings that may change (`ignored`):
everything else counts, so a newly added flag is checked unless it is declared harmless.
"""

from __future__ import annotations

import json
import os
from typing import Callable

from keras_bert import fileio


def check_resume_settings(
    out: str,
    settings: dict,
    *,
    ignored=frozenset(),
    defaults: dict | None = None,
    view: Callable[[dict], dict] | None = None,
) -> dict | None:
    """Refuse to reuse an output_dir whose config.json records a run with different settings.

    Call it before the run writes anything to `out` (config.json above all).

    Args:
        out: the output directory (any `keras_bert.fileio` URI).
        settings: this run's settings, a flat dict name -> JSON value, as `view` makes them from
            the config.json this run will write.
        ignored: names of settings that do not change what the directory's files mean (the
            spelling of output_dir, verbosity, ...); they may differ on a rerun.
        defaults: the value a setting stands for in an older config.json that lacks it (a
            setting added since); a setting missing on either side and without a default is not
            compared.
        view: config.json's dict -> the flat settings dict (default: config.json as it is).

    Returns:
        The recorded settings (`view` of config.json), or None when `out` holds no config.json.

    Raises:
        ValueError: "output_dir <out> holds a run with different settings (recorded -> this
            run): <name> <recorded> -> <new>, ...; use a new --output_dir, or rerun with the
            recorded values".
    """
    path = fileio.join(os.fspath(out), "config.json")
    if not fileio.isfile(path):
        return None
    recorded = (view or (lambda d: d))(fileio.read_json(path))
    previous = (defaults or {}) | recorded
    new = json.loads(json.dumps(settings))  # tuples as the JSON lists they were recorded as
    changed = [
        f"{k} {previous[k]} -> {v}"
        for k, v in new.items()
        if k not in ignored and k in previous and previous[k] != v
    ]
    if changed:
        raise ValueError(
            f"output_dir {out} holds a run with different settings (recorded -> this "
            f"run): {', '.join(changed)}; use a new --output_dir, or rerun with the "
            "recorded values"
        )
    return recorded
