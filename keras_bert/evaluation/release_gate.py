"""A release gate over an evidence pack: value and change thresholds -> a blessing export can require.

A gate file is JSON:

    {"checks": [
      {"metric": "headline.macro_f1", "min": 0.85},
      {"metric": "latency.p99_ms", "max": 30},
      {"metric": "per_class.*.recall", "max_decrease": 0.02},
      {"metric": "headline.ece", "max_increase": 0.01}
    ]}

`metric` is a dotted path in metrics.json; a `*` part stands for every key (or list index) there,
so `per_class.*.recall` is one check per class. Each check has exactly one threshold: `min` /
`max` bound the value; `max_decrease` / `max_increase` bound the change against the baseline
report's value at the same path (value - baseline >= -max_decrease, resp. <= max_increase), in
the metric's own unit (0.02 = 2 points of a rate). A metric absent from the report (latency of
recorded predictions) or from the baseline fails its check with the reason; so does a latency
percentile from too few timed batches (a p99 needs 100: from 2 it is the slower of two, and the
verdict would follow the machine's load), with the count. The gate's section in the report says
what the latency was measured on (batches, path, CPU, load average).

A baseline must have measured the same kind of model: `check_baseline` refuses, before any
prediction, a report of another task type, other label names or another metric scale (SQuAD's
percentages against a fraction), by `model_record.check_comparable`, the rule `--compare` applies
to its two models.

The record (`gate`) lists every check with its value, baseline, threshold and pass; it is written to
the report directory as a file named BLESSED (every check passed) or NOT_BLESSED (`write_blessing`),
holding the record, the model's fingerprint (`provenance.model_fingerprint`) and the SHA-256 of
metrics.json. `check_blessing` is what `python -m export --require_blessing=REPORT_DIR` asks.
"""

from __future__ import annotations

import hashlib
import math

from keras_bert import fileio
from keras_bert.evaluation.model_record import check_comparable
from keras_bert.evaluation.provenance import model_fingerprint

THRESHOLDS = ("min", "max", "max_decrease", "max_increase")
CHANGE = ("max_decrease", "max_increase")
BLESSED, NOT_BLESSED = "BLESSED", "NOT_BLESSED"
RECORD_KEYS = {"name", "task_type", "label_names"}  # in every report's "model"


class GateError(ValueError):
    """A gate file or a blessing that cannot be used (one line naming the problem)."""


def parse_gate(text: str, where: str = "gate") -> list[dict]:
    """The checks of a gate file's text: [{"metric", "kind", "threshold"}].

    Raises:
        GateError: not JSON, no "checks" list, a check without a metric or without exactly one
            numeric threshold of THRESHOLDS, or an unknown field.
    """
    try:
        gate = fileio.parse_json(text, where)
    except fileio.UserFileError as e:
        raise GateError(str(e)) from None
    if not isinstance(gate, dict) or not isinstance(gate.get("checks"), list) or not gate["checks"]:
        raise GateError(f'{where}: expected {{"checks": [...]}} with at least one check')
    checks = []
    for i, check in enumerate(gate["checks"]):
        if not isinstance(check, dict) or not isinstance(check.get("metric"), str):
            raise GateError(f'{where}: check {i} needs "metric" (a dotted metrics.json path)')
        unknown = set(check) - {"metric", *THRESHOLDS}
        given = [k for k in THRESHOLDS if k in check]
        if unknown or len(given) != 1:
            raise GateError(
                f"{where}: check {i} ({check['metric']}) needs exactly one of {list(THRESHOLDS)}"
                + (f"; unknown field(s) {sorted(unknown)}" if unknown else "")
            )
        value = check[given[0]]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
            raise GateError(
                f"{where}: check {i} ({check['metric']}): {given[0]} must be a finite number"
            )
        checks.append({"metric": check["metric"], "kind": given[0], "threshold": float(value)})
    return checks


def _finite(value) -> bool:
    """Whether a JSON number is finite as a float (NaN, Infinity and integers past a double's
    range are not: no metric compares with them)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def needs_baseline(checks) -> bool:
    return any(c["kind"] in CHANGE for c in checks)


def expand(metrics: dict, path: str) -> list[tuple[str, object]]:
    """(concrete path, value) of every match of a dotted path with `*` parts; [] when none."""
    found = [("", metrics)]
    for part in path.split("."):
        nxt = []
        for prefix, node in found:
            keys = (
                range(len(node))
                if isinstance(node, list)
                else list(node)
                if isinstance(node, dict)
                else []
            )
            for key in keys if part == "*" else [part]:
                if isinstance(node, list):
                    if str(key).isdigit() and int(key) < len(node):
                        nxt.append((f"{prefix}{key}.", node[int(key)]))
                elif isinstance(node, dict) and str(key) in node:
                    nxt.append((f"{prefix}{key}.", node[str(key)]))
        found = nxt
    return [(p[:-1], v) for p, v in found]


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _judge(kind, threshold, value, base):
    """(pass, change, reason) of one concrete check."""
    if value is None:
        return False, None, "not a number in the report"
    if kind == "min":
        return value >= threshold, None, None
    if kind == "max":
        return value <= threshold, None, None
    if base is None:
        return False, None, "not a number in the baseline"
    change = value - base
    ok = change >= -threshold if kind == "max_decrease" else change <= threshold
    return ok, change, None


def _why_missing(metrics: dict, path: str) -> str:
    """Why the report has no number at `path`: the reason it records beside the figure (a
    latency percentile from too few batches: `latency.too_few`), else "not a number"."""
    parent, _, leaf = path.rpartition(".")
    holder = expand(metrics, parent)[0][1] if parent and expand(metrics, parent) else metrics
    why = holder.get("too_few", {}).get(leaf) if isinstance(holder, dict) else None
    return why or "not a number in the report"


def evaluate_gate(checks, metrics: dict, baseline: dict | None = None) -> dict:
    """The gate record: {"blessed", "checks": [{"metric", "kind", "threshold", "value",
    "baseline", "change", "pass", "reason"}]}; a check matching nothing fails ("not in the
    report")."""
    rows = []
    for check in checks:
        matches = expand(metrics, check["metric"])
        if not matches:
            rows.append(check | _row(None, None, None, False, "not in the report"))
            continue
        for path, value in matches:
            base = None
            if check["kind"] in CHANGE and baseline is not None:
                base_matches = expand(baseline, path)
                base = _number(base_matches[0][1]) if base_matches else None
            ok, change, reason = _judge(check["kind"], check["threshold"], _number(value), base)
            reason = _why_missing(metrics, path) if value is None and not ok else reason
            rows.append(check | {"metric": path} | _row(_number(value), base, change, ok, reason))
    return {"blessed": all(r["pass"] for r in rows), "checks": rows}


def _row(value, base, change, ok, reason) -> dict:
    return {"value": value, "baseline": base, "change": change, "pass": bool(ok), "reason": reason}


def metrics_sha256(report_dir: str) -> str:
    return hashlib.sha256(fileio.read_bytes(fileio.join(report_dir, "metrics.json"))).hexdigest()


def write_blessing(report_dir: str, record: dict, model: dict) -> str:
    """Writes BLESSED or NOT_BLESSED (JSON: the record, the model's path and fingerprint, the
    metrics.json hash) to `report_dir`, removing the other. metrics.json must be written first.

    Returns:
        the verdict line: "BLESSED (<path>)" or "NOT_BLESSED (<path>): <failed checks>".
    """
    name = BLESSED if record["blessed"] else NOT_BLESSED
    fileio.remove(fileio.join(report_dir, NOT_BLESSED if record["blessed"] else BLESSED))
    path = fileio.join(report_dir, name)
    fileio.write_json(path, record | {"model": model, "metrics_sha256": metrics_sha256(report_dir)})
    return f"{name} ({path})" + ("" if record["blessed"] else f": {failed_summary(record)}")


def failed_summary(record: dict) -> str:
    failed = [r for r in record["checks"] if not r["pass"]]
    return "; ".join(
        f"{r['metric']} {r['reason'] or _shown(r)} ({r['kind']} {r['threshold']:g})" for r in failed
    )


def _shown(r) -> str:
    if r["change"] is not None:
        return f"changed by {r['change']:+.4f} from {r['baseline']:.4f}"
    return f"= {r['value']:.4f}"


def check_blessing(report_dir: str, model_path: str) -> dict:
    """The BLESSED record of `report_dir`, if it blesses the model at `model_path`.

    Raises:
        GateError: no BLESSED file (NOT_BLESSED: with the failed checks), metrics.json changed
            since the blessing, or the report measured another model (fingerprints differ).
    """
    blessed = fileio.join(report_dir, BLESSED)
    if not fileio.isfile(blessed):
        refused = fileio.join(report_dir, NOT_BLESSED)
        if fileio.isfile(refused):
            record = fileio.read_json(refused)
            raise GateError(f"{report_dir} is NOT_BLESSED: {failed_summary(record)}")
        raise GateError(
            f"{report_dir} holds no blessing: run recipes/evaluate.py --gate=FILE "
            f"--output_dir={report_dir} first"
        )
    record = fileio.read_json(blessed)
    if metrics_sha256(report_dir) != record["metrics_sha256"]:
        raise GateError(f"{report_dir}/metrics.json changed after it was blessed")
    found = model_fingerprint(model_path)["fingerprint"]
    if found != record["model"]["fingerprint"]:
        raise GateError(
            f"{report_dir} blesses {record['model']['path']} ({record['model']['fingerprint']}), "
            f"not {model_path} ({found}): evaluate the model you export"
        )
    return record


def read_gate(gate_path: str, baseline_dir: str | None) -> tuple[list, dict | None]:
    """(checks, baseline metrics or None) of --gate / --baseline, read before any model runs.

    Raises:
        GateError: a bad gate file (`parse_gate`), a change check without a baseline, or a
            baseline directory without metrics.json.
    """
    if not fileio.isfile(gate_path):
        raise GateError(f"--gate {gate_path}: no such file")
    try:
        text = fileio.read_user_text(gate_path)
    except fileio.UserFileError as e:
        raise GateError(f"--gate {e}") from None
    checks = parse_gate(text, f"--gate {gate_path}")
    if needs_baseline(checks) and not baseline_dir:
        raise GateError(
            f"--gate {gate_path} has change checks ({', '.join(CHANGE)}): give --baseline=REPORT_DIR"
        )
    if not baseline_dir:
        return checks, None
    baseline_file = fileio.join(baseline_dir, "metrics.json")
    if not fileio.isfile(baseline_file):
        raise GateError(f"--baseline {baseline_dir}: no metrics.json (not an evaluation report)")
    return checks, fileio.read_json(baseline_file)


def check_baseline(record: dict, baseline: dict | None, baseline_dir: str | None) -> None:
    """Refuses a baseline report (metrics.json `baseline` of `baseline_dir`, None: no baseline)
    that did not measure the same kind of model as `record` (`model_record.model_record` of the
    model to gate): the rule of `--compare`, `model_record.check_comparable`, so a percentage is
    never set against a fraction nor one family's metric against another's.

    Raises:
        GateError: "--baseline DIR: <what differs, naming both models>", or a baseline that is
            not a one-model report (no "model" record: a --compare report, a training run's).
    """
    if baseline is None:
        return
    measured = baseline.get("model")
    if not isinstance(measured, dict) or not RECORD_KEYS <= set(measured):
        raise GateError(
            f"--baseline {baseline_dir}: its metrics.json is not a one-model evaluation report "
            "(no model record); give the report of recipes/evaluate.py on one model"
        )
    try:
        check_comparable(record, measured)
    except ValueError as e:
        raise GateError(f"--baseline {baseline_dir}: {e}") from None
