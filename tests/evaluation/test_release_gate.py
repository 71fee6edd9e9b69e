"""The release gate on constructed reports: parsing, value and change checks, blessing records and
what export's --require_blessing accepts."""

import hashlib
import json

import pytest

from keras_bert.evaluation import release_gate as rg

REPORT = {
    "headline": {"accuracy": 0.90, "macro_f1": 0.86},
    "per_class": {"neg": {"recall": 0.80}, "pos": {"recall": 0.95}},
    "latency": {"p99_ms": 25.0},
}
BASELINE = {
    "headline": {"accuracy": 0.91, "macro_f1": 0.88},
    "per_class": {"neg": {"recall": 0.83}, "pos": {"recall": 0.94}},
}
GATE = {
    "checks": [
        {"metric": "headline.macro_f1", "min": 0.85},
        {"metric": "per_class.*.recall", "max_decrease": 0.02},
        {"metric": "latency.p99_ms", "max": 30},
    ]
}


def test_value_and_change_checks():
    record = rg.evaluate_gate(rg.parse_gate(json.dumps(GATE)), REPORT, BASELINE)
    rows = [(r["metric"], r["pass"]) for r in record["checks"]]
    assert rows == [
        ("headline.macro_f1", True),
        ("per_class.neg.recall", False),  # 0.80 vs 0.83: down 3 points
        ("per_class.pos.recall", True),
        ("latency.p99_ms", True),
    ]
    neg = record["checks"][1]
    assert (neg["value"], neg["baseline"], neg["threshold"]) == (0.80, 0.83, 0.02)
    assert neg["change"] == pytest.approx(-0.03)
    assert record["blessed"] is False
    assert rg.failed_summary(record) == (
        "per_class.neg.recall changed by -0.0300 from 0.8300 (max_decrease 0.02)"
    )
    looser = {"checks": [{"metric": "per_class.*.recall", "max_decrease": 0.031}]}
    assert rg.evaluate_gate(rg.parse_gate(json.dumps(looser)), REPORT, BASELINE)["blessed"]


def test_missing_metrics_fail_their_check():
    checks = rg.parse_gate(
        '{"checks": [{"metric": "latency.p50_ms", "max": 1}, '
        '{"metric": "latency.p99_ms", "max_increase": 5}, {"metric": "headline.ece", "min": 0}]}'
    )
    record = rg.evaluate_gate(checks, REPORT, BASELINE)
    assert [(r["pass"], r["reason"]) for r in record["checks"]] == [
        (False, "not in the report"),
        (False, "not a number in the baseline"),
        (False, "not in the report"),
    ]


@pytest.mark.parametrize(
    "text, message",
    [
        ("{", "not JSON"),
        ('{"checks": []}', 'expected {"checks": [...]} with at least one check'),
        ('{"checks": [{"min": 1}]}', 'check 0 needs "metric"'),
        (
            '{"checks": [{"metric": "a", "min": 1, "max": 2}]}',
            "check 0 (a) needs exactly one of ['min', 'max', 'max_decrease', 'max_increase']",
        ),
        ('{"checks": [{"metric": "a", "minimum": 1}]}', "unknown field(s) ['minimum']"),
        (
            '{"checks": [{"metric": "a", "min": "0.8"}]}',
            "check 0 (a): min must be a finite number",
        ),
        # Found by the gate_json fuzz target: NaN passed (every check against it fails, and
        # the written record is not JSON), and an integer past a double's range raised an
        # OverflowError from float().
        ('{"checks": [{"metric": "a", "min": NaN}]}', "check 0 (a): min must be a finite number"),
        ('{"checks": [{"metric": "a", "max": -Infinity}]}', "max must be a finite number"),
        ('{"checks": [{"metric": "a", "max": 1' + "0" * 400 + "}]}", "max must be a finite number"),
    ],
)
def test_bad_gate_files(text, message):
    with pytest.raises(rg.GateError) as e:
        rg.parse_gate(text, "g.json")
    assert str(e.value).startswith("g.json: ") and message in str(e.value)


def test_read_gate_needs_a_baseline_for_change_checks(tmp_path):
    gate = tmp_path / "gate.json"
    gate.write_text(json.dumps(GATE))
    with pytest.raises(rg.GateError, match="change checks .* give --baseline=REPORT_DIR"):
        rg.read_gate(str(gate), None)
    with pytest.raises(rg.GateError, match="no metrics.json"):
        rg.read_gate(str(gate), str(tmp_path))
    (tmp_path / "metrics.json").write_text(json.dumps(BASELINE))
    checks, baseline = rg.read_gate(str(gate), str(tmp_path))
    assert len(checks) == 3 and baseline == BASELINE


def blessed_report(tmp_path, report, model_bytes=b"task"):
    model = tmp_path / "model.keras"
    model.write_bytes(model_bytes)
    out = tmp_path / "report"
    out.mkdir(exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(report))
    record = rg.evaluate_gate(rg.parse_gate(json.dumps(GATE)), report, BASELINE)
    fp = "sha256:" + hashlib.sha256(model_bytes).hexdigest()
    verdict = rg.write_blessing(
        str(out), record, {"path": str(model), "fingerprint": fp, "kind": "saved task"}
    )
    return out, model, verdict


def test_blessing_records_and_export_check(tmp_path):
    good = REPORT | {"per_class": {"neg": {"recall": 0.82}, "pos": {"recall": 0.95}}}
    out, model, verdict = blessed_report(tmp_path, good)
    assert verdict == f"BLESSED ({out / 'BLESSED'})" and not (out / "NOT_BLESSED").exists()
    record = json.loads((out / "BLESSED").read_text())
    assert record["blessed"] and len(record["checks"]) == 4
    assert (
        record["metrics_sha256"] == hashlib.sha256((out / "metrics.json").read_bytes()).hexdigest()
    )
    assert rg.check_blessing(str(out), str(model))["blessed"]
    other = tmp_path / "other.keras"
    other.write_bytes(b"another task")
    with pytest.raises(rg.GateError, match="blesses .*model.keras .*not .*other.keras"):
        rg.check_blessing(str(out), str(other))
    (out / "metrics.json").write_text(json.dumps(good | {"headline": {"macro_f1": 0.99}}))
    with pytest.raises(rg.GateError, match="metrics.json changed after it was blessed"):
        rg.check_blessing(str(out), str(model))
    # Re-gated on a failing report: NOT_BLESSED replaces BLESSED, and export is refused.
    out, model, verdict = blessed_report(tmp_path, REPORT)
    assert verdict == (
        f"NOT_BLESSED ({out / 'NOT_BLESSED'}): per_class.neg.recall changed by -0.0300 from "
        "0.8300 (max_decrease 0.02)"
    )
    assert not (out / "BLESSED").exists()
    with pytest.raises(
        rg.GateError, match="is NOT_BLESSED: per_class.neg.recall changed by -0.0300"
    ):
        rg.check_blessing(str(out), str(model))
    with pytest.raises(rg.GateError, match="holds no blessing"):
        rg.check_blessing(str(tmp_path), str(model))


def test_a_latency_percentile_from_too_few_batches_fails_with_the_count():
    from keras_bert.evaluation.latency import latency_summary

    report = {"latency": latency_summary([0.05, 2.5], [32, 14], 32, "in-process")}
    checks = rg.parse_gate(
        '{"checks": [{"metric": "latency.p99_ms", "max": 30}, '
        '{"metric": "latency.mean_ms", "max": 1e9}]}'
    )
    record = rg.evaluate_gate(checks, report)
    assert [(r["pass"], r["reason"]) for r in record["checks"]] == [
        (False, "2 timed batches: a p99 needs at least 100"),
        (True, None),
    ]
    assert rg.failed_summary(record) == (
        "latency.p99_ms 2 timed batches: a p99 needs at least 100 (max 30)"
    )
