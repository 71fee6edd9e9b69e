"""What an evidence pack measured (metrics.json's "model") and the one rule for which two models'
numbers may be set side by side: `--compare`'s two models, and a release gate's model and its
baseline report (`recipes/evaluate.py`, SPEC section 9). Checked before any prediction is made.
"""

from __future__ import annotations

# Settings two models of a family must share to be scored on one file (SQuAD v1.1 vs v2.0 read
# the file differently; multiple choice: the endings per row).
COMPARABLE_SETTINGS = ("version_2_with_negative", "num_choices")
# task_type -> the scale of its rates in metrics.json; every other family: "fraction" (0-1).
# SQuAD's official evaluators give percentages.
METRIC_SCALES = {"span_question_answering": "percent"}


def metric_scale(task_type: str) -> str:
    """ "percent" (0-100) or "fraction" (0-1): how the family's rates are written."""
    return METRIC_SCALES.get(task_type, "fraction")


def model_record(info, path: str) -> dict:
    """What a report measured (metrics.json's "model"): the `ModelInfo` fields `check_comparable`
    compares (task type, label names, one text or a pair, metric scale, COMPARABLE_SETTINGS),
    with the model's name, path and max_seq_length."""
    return {
        "name": info.name,
        "path": path,
        "task_type": info.task_type,
        "label_names": list(info.label_names),
        "max_seq_length": info.max_seq_length,
        "is_pair": bool(info.is_pair),
        "metric_scale": metric_scale(info.task_type),
        "settings": {k: info.settings[k] for k in COMPARABLE_SETTINGS if k in info.settings},
    }


def check_comparable(a: dict, b: dict) -> None:
    """The one rule for setting two models' numbers side by side: `--compare`'s two models and a
    release gate's model and baseline report (`model_record`s, or the "model" of a report's
    metrics.json) must be the same task type with the same label names, the same metric scale,
    both one text or both a pair, and the same COMPARABLE_SETTINGS. A report written before a
    field was recorded is not judged on that field (its metric scale follows from its task type).

    Raises:
        ValueError: one line naming both models and what differs.
    """
    names = a["name"], b["name"]
    if a["task_type"] != b["task_type"]:
        raise ValueError(
            f"cannot compare a {a['task_type']} model ({names[0]}) with a {b['task_type']} "
            f"model ({names[1]})"
        )
    if list(a["label_names"]) != list(b["label_names"]):
        raise ValueError(
            f"the models have different label names: {names[0]} {list(a['label_names'])}, "
            f"{names[1]} {list(b['label_names'])}"
        )
    scales = [r.get("metric_scale") or metric_scale(r["task_type"]) for r in (a, b)]
    if scales[0] != scales[1]:
        raise ValueError(
            f"the models' metrics are on different scales: {names[0]} {scales[0]}, "
            f"{names[1]} {scales[1]} (fraction: 0-1, percent: 0-100)"
        )
    if None not in (a.get("is_pair"), b.get("is_pair")) and a["is_pair"] != b["is_pair"]:
        raise ValueError(f"{names[0]} and {names[1]} differ in taking one text or a pair")
    if "settings" in a and "settings" in b:
        for key in COMPARABLE_SETTINGS:
            if a["settings"].get(key) != b["settings"].get(key):
                raise ValueError(
                    f"the models differ in {key}: {names[0]} {a['settings'].get(key)}, "
                    f"{names[1]} {b['settings'].get(key)}"
                )
