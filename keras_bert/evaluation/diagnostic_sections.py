"""Report sections of the diagnostics (`diagnostics.py`), provenance and leakage, as
`report_writer` blocks.

Each builder takes the metrics dict holding the section and a key `prefix` ("" in a one-model
report, "a." / "b." for one model of a comparison), so every printed number is a `Num` whose key
is its path in metrics.json. A builder returns [] when its section is absent (e.g. no weak
segments for a regressor).
"""

from __future__ import annotations

from keras_bert.evaluation import label_issues, weak_segments
from keras_bert.evaluation.report_writer import Num, Table, fmt, keyed_rows, nums

LABEL_ISSUE_ROWS = 50
SEGMENT_ROWS = 20
HEALTH_FIELDS = ("examples", "unk_rate", "rows_with_unk", "truncated", "truncation_rate")
# task_type -> what a row of its held-out file is; default: a data row of a CSV / TSV / JSONL
# file (classification, regression) or of a SWAG CSV file (multiple choice).
ROW_UNITS = {
    "token_classification": "sentence of the CoNLL file (-DOCSTART- lines and blank lines are "
    "not sentences)",
    "span_question_answering": "question of the SQuAD file, in file order",
}
DATA_ROW = "data row of the held-out file (the header and blank JSON Lines lines not counted)"
GATE_LEGEND = (
    "pass: the value (min, max) or its change from the baseline (max_decrease, max_increase) is "
    "within the threshold; FAIL: it is not, or the report or the baseline has no such number (the "
    "reason follows); BLESSED: every check passed; NOT_BLESSED: at least one check failed."
)


def task_type(m: dict) -> str:
    """The task type of a one-model metrics dict or of a comparison's first model."""
    return (m.get("model") or m["models"]["a"])["task_type"]


def row_legend(m: dict) -> str:
    """How every row number of the report of `m` counts: the one numbering of the report, that of
    metrics.json's `row` keys (0-based), defined where rows are shown."""
    unit = ROW_UNITS.get(task_type(m), DATA_ROW)
    return (
        f"row: the 0-based {unit}; every row number in this report and metrics.json's row "
        "count this way."
    )


def data_health_blocks(r: dict, prefix: str = "", title: str = "Data health") -> list:
    if "data_health" not in r:
        return []
    h = r["data_health"]
    rows = [["all", "", *nums(f"{prefix}data_health.overall", h["overall"], HEALTH_FIELDS)]]
    rows += keyed_rows(f"{prefix}data_health.slices", h["slices"], HEALTH_FIELDS)
    return [
        ("h2", title),
        "[UNK] rate: [UNK] WordPiece pieces over all pieces (model's own tokenizer, without "
        "[CLS]/[SEP]); truncated: longer than max_seq_length, so the model saw only part.",
        Table(
            [
                "slice",
                "value",
                "examples",
                "[UNK] rate",
                "rows with [UNK]",
                "truncated",
                "truncation rate",
            ],
            rows,
        ),
    ]


def weak_segment_blocks(r: dict, prefix: str = "", title: str = "Weak segments") -> list:
    if "weak_segments" not in r:
        return []
    segs = r["weak_segments"]
    rule = (
        f"Segments of rows sharing a text property (or its quartile bin) whose accuracy is "
        f"below the whole set's: one-sided binomial test, Benjamini-Hochberg adjusted p < "
        f"{weak_segments.ALPHA} over all segments of at least {weak_segments.MIN_SIZE} rows; "
        f"95% Wilson interval. Worst first."
    )
    if not segs:
        return [("h3", title), f"{rule} None found."]
    rows = [
        [
            s["description"],
            Num(f"{prefix}weak_segments.{i}.size", s["size"]),
            Num(f"{prefix}weak_segments.{i}.accuracy", s["accuracy"]),
            f"[{fmt(s['ci_low'])}, {fmt(s['ci_high'])}]",
            Num(f"{prefix}weak_segments.{i}.overall", s["overall"]),
            Num(f"{prefix}weak_segments.{i}.adjusted_p_value", s["adjusted_p_value"]),
            " / ".join(f"row {e['row']}: {e['text']}" for e in s["examples"]),
        ]
        for i, s in enumerate(segs[:SEGMENT_ROWS])
    ]
    header = ["segment", "rows", "accuracy", "95% CI", "whole set", "adjusted p", "wrong examples"]
    return [("h3", title), rule, Table(header, rows, legend=row_legend(r))]


def label_issue_blocks(r: dict, prefix: str = "", title: str = "Suspected label errors") -> list:
    if "label_issues" not in r:
        return []
    issues = r["label_issues"]
    tokens = any("token" in x for x in issues)  # NER: one word of a sentence per issue
    rows = [
        [
            Num(f"{prefix}label_issues.{i}.row", x["row"]),
            *([Num(f"{prefix}label_issues.{i}.token", x["token"]), x["word"]] if tokens else []),
            x["given"],
            x["suggested"],
            Num(f"{prefix}label_issues.{i}.score", x["score"]),
        ]
        for i, x in enumerate(issues[:LABEL_ISSUE_ROWS])
    ]
    shown = (
        f" (the first {LABEL_ISSUE_ROWS} shown, all in metrics.json)"
        if len(issues) > len(rows)
        else ""
    )
    what = (
        "words (cleanlab token classification)" if tokens else "rows (cleanlab)",
        "token = 0-based word in the row, score = probability of the given tag"
        if tokens
        else "score = probability of the given label",
    )
    return [
        ("h2", title),
        f"{len(issues)} {what[0]} suspected by confident learning, most suspect first{shown}; "
        f"{what[1]}. {label_issues.CAVEAT}",
        Table(
            ["row", *(["token", "word"] if tokens else []), "given", "suggested", "score"],
            rows,
            legend=row_legend(r),
        ),
    ]


def leakage_blocks(m: dict) -> list:
    leak = m.get("leakage")
    if leak is None:
        return []
    rows = [
        [
            Num(f"leakage.rows.{i}.row", x["row"]),
            Num(f"leakage.rows.{i}.train_row", x["train_row"]),
            x["kind"],
            x["text"],
        ]
        for i, x in enumerate(leak["rows"])
    ]
    return [
        ("h2", "Overlap with the training data"),
        f"Training file {leak['train_file']} ({leak['train_examples']} rows). Exact: the same "
        "text; near: the same after lower-casing and dropping punctuation and extra whitespace.",
        Table(
            ["exact duplicates", "near duplicates"],
            [[Num("leakage.exact", leak["exact"]), Num("leakage.near", leak["near"])]],
        ),
        *(
            [
                Table(
                    ["held-out row", "training row", "kind", "text"],
                    rows,
                    legend=f"{row_legend(m)} A training row is numbered the same way in the "
                    "training file.",
                )
            ]
            if rows
            else []
        ),
    ]


def provenance_blocks(m: dict) -> list:
    p = m.get("provenance")
    if p is None:
        return []
    d = p["data"]
    rows = [
        ["held-out file", d["file"]],
        ["SHA-256", d["sha256"]],
        ["rows", Num("provenance.data.rows", d["rows"])],
    ]
    for label, count in (d["label_distribution"] or {}).items():
        rows.append([f"label {label}", Num(f"provenance.data.label_distribution.{label}", count)])
    for key, model in p["models"].items():
        rows.append([f"--{key}", f"{model['path']} ({model['kind']} {model['fingerprint']})"])
    rows += [[name, version] for name, version in p["versions"].items()]
    rows.append(["command", p["command"]])
    return [("h2", "Provenance"), Table(["what", "value"], rows)]


def measured_on(latency: dict | None) -> str:
    """ " Latency measured on ...": what the gate's latency figures come from, or ""."""
    if not latency or not latency.get("measured", True) or "machine" not in latency:
        return ""
    host = latency["machine"]
    load = host.get("load_average_1m")
    return (
        f" Latency measured on {latency['num_batches']} timed batches of "
        f"{latency['batch_size']} ({latency['path']}), {host['cpu']}, {host['cores']} cores"
        + ("" if load is None else f", load average {load:.2f}")
        + "."
    )


def gate_blocks(m: dict) -> list:
    gate = m.get("gate")
    if gate is None:
        return []
    rows, failed = [], []
    for i, c in enumerate(gate["checks"]):
        rows.append(
            [
                c["metric"],
                f"{c['kind']} {fmt(c['threshold'])}",
                Num(f"gate.checks.{i}.value", c["value"]),
                Num(f"gate.checks.{i}.baseline", c["baseline"]),
                Num(f"gate.checks.{i}.change", c["change"]),
                "pass" if c["pass"] else f"FAIL{': ' + c['reason'] if c['reason'] else ''}",
            ]
        )
        if not c["pass"]:
            failed.append(i)
    verdict = "BLESSED" if gate["blessed"] else "NOT_BLESSED"
    return [
        ("h2", f"Release gate: {verdict}"),
        f"Gate {gate['file']}; baseline {gate['baseline'] or 'none'}. change = value - baseline."
        + measured_on(m.get("latency")),
        Table(
            ["metric", "threshold", "value", "baseline", "change", "result"],
            rows,
            failed,
            mark="FAIL",
            legend=GATE_LEGEND,
        ),
    ]


def _example_text(e: dict) -> str:
    if "perturbed" in e and "after" in e and isinstance(e["after"], str):
        return f"{e['text']} -> {e['perturbed']}: {e['before']} -> {e['after']}"
    if "perturbed" in e:
        return f"{e['text']} -> {e['perturbed']}: {fmt(e['before'])} -> {fmt(e['after'])}"
    return f"{e['text']}: expected {e['expected']}, predicted {e['predicted']}"


def behaviour_blocks(r: dict, prefix: str = "", title: str = "Behavioural tests") -> list:
    if "behaviour" not in r:
        return []
    rows = [
        [
            t["name"],
            t["type"],
            *nums(f"{prefix}behaviour.{i}", t, ("tested", "failures", "failure_rate")),
            " / ".join(_example_text(e) for e in t["examples"][:3]),
        ]
        for i, t in enumerate(r["behaviour"])
    ]
    failing = [i for i, t in enumerate(r["behaviour"]) if t["failures"]]
    return [
        ("h2", title),
        "Invariance (built-in perturbations of held-out texts): a row fails when the predicted "
        "label changes (NER: the predicted entities, spans and types; multiple choice: the chosen "
        "ending, the context perturbed). mft: the input must get the test's label. dir: the label's probability "
        "must move the stated way when the phrase is added (docs/evaluation.md).",
        Table(
            ["test", "type", "tested", "failures", "failure rate", "failing examples"],
            rows,
            failing,
            mark="failing",
            legend="tested: inputs the test ran on; failures: those that failed; failing: the "
            "test has at least one failure, however few (the failure rate says how many); n/a: "
            "no input to test.",
        ),
    ]


def behaviour_comparison_blocks(m: dict, a: str, b: str) -> list:
    if "behaviour" not in m:
        return []
    rows = [
        [
            t["name"],
            t["type"],
            *nums(f"behaviour.{i}", t, ("tested", "failure_rate_a", "failure_rate_b")),
            t["fails"],
        ]
        for i, t in enumerate(m["behaviour"])
    ]
    return [
        ("h2", "Behavioural tests: which model fails which"),
        "Failure rate per test (same inputs for both).",
        Table(
            ["test", "type", "tested", f"A: {a}", f"B: {b}", "fails"],
            rows,
            legend="fails: which model has at least one failure on the test, however few: A, B, "
            "both or neither; n/a: no input to test.",
        ),
    ]
