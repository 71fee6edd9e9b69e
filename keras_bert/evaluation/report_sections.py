"""The sections of a one-model evidence-pack report, as `report_writer` blocks.

Input: the metrics dict of `evidence_pack.evaluate` (what metrics.json holds). Each table cell that
shows a number is a `Num` with its metrics.json key, so report.md / report.html and metrics.json
cannot disagree. The sections particular to a task family come from `TASK_SECTIONS`.
"""

from __future__ import annotations

from keras_bert.evaluation import diagnostic_sections as ds
from keras_bert.evaluation import failure_catalogue as fc
from keras_bert.evaluation import multiple_choice_pack, ner_pack, span_qa_pack
from keras_bert.evaluation.report_writer import (
    Figure,
    Num,
    Table,
    confusion_figure,
    fmt,
    keyed_rows,
    reliability_figure,
)

FAILURE_ROWS = 100
MACRO_LEGEND = (
    "support: gold examples of the class; macro avg: the mean over the classes that occur in the "
    "gold labels or the predictions (scikit-learn's rule), so a class in neither (support 0, "
    "never predicted) is listed but not averaged; weighted avg: the mean weighted by support."
)
LATENCY_FIELDS = (
    ("p50_ms", "p50 (ms)"),
    ("p95_ms", "p95 (ms)"),
    ("p99_ms", "p99 (ms)"),
    ("throughput_per_s", "examples / s"),
    ("cost_per_1000", "cost per 1,000"),
)


def headline_blocks(m: dict) -> list:
    rows = [[name, Num(f"headline.{name}", value)] for name, value in m["headline"].items()]
    return [("h2", "Headline metrics"), Table(["metric", "value"], rows)]


def per_class_blocks(m: dict) -> list:
    if "per_class" not in m:
        return []
    fields = ("precision", "recall", "f1", "support")
    rows = [
        [name] + [Num(f"per_class.{name}.{f}", v[f]) for f in fields]
        for name, v in m["per_class"].items()
    ]
    rows += [
        [avg.replace("_", " ")] + [Num(f"{avg}.{f}", m[avg][f]) for f in fields]
        for avg in ("macro_avg", "weighted_avg")
    ]
    names = m["model"]["label_names"]
    matrix = m["confusion_matrix"]
    cm_rows = [
        [f"gold {g}"] + [Num(f"confusion_matrix.{i}.{j}", c) for j, c in enumerate(row)]
        for i, (g, row) in enumerate(zip(names, matrix))
    ]
    return [
        ("h2", "Per-class precision, recall, F1"),
        Table(["class", *fields], rows, legend=MACRO_LEGEND),
        ("h2", "Confusion matrix"),
        "Rows: gold label; columns: predicted label.",
        Table(["", *[f"pred {n}" for n in names]], cm_rows),
        Figure(
            "confusion_matrix.png",
            confusion_figure(matrix, names, m["model"]["name"]),
            "confusion matrix",
        ),
    ]


def calibration_blocks(m: dict) -> list:
    if "calibration" not in m:
        return []
    cal = m["calibration"]
    rows = [
        [
            f"{b['lower']:.1f}-{b['upper']:.1f}",
            Num(f"calibration.bins.{i}.count", b["count"]),
            Num(f"calibration.bins.{i}.confidence", b["confidence"]),
            Num(f"calibration.bins.{i}.accuracy", b["accuracy"]),
        ]
        for i, b in enumerate(cal["bins"])
        if b["count"]
    ]
    return [
        ("h2", "Calibration"),
        f"Expected calibration error (Guo et al. 2017, {cal['num_bins']} equal-width bins of the "
        f"top probability): {fmt(cal['ece'])}.",
        Table(["confidence bin", "examples", "mean confidence", "accuracy"], rows),
        Figure(
            "reliability.png", reliability_figure({m["model"]["name"]: cal}), "reliability diagram"
        ),
    ]


def slice_blocks(m: dict) -> list:
    regression = m["model"]["task_type"] == "regression"
    header = ["slice", "value", "examples"] + (
        ["mean abs error"] if regression else ["errors", "error rate", "p-value"]
    )
    fields = ("count", "error_rate") if regression else ("count", "errors", "error_rate", "p_value")
    rows = keyed_rows("slices", m["slices"], fields)
    flagged = [i for i, s in enumerate(m["slices"]) if s["flagged"]]
    rule = (
        "its mean absolute error is at least twice the overall one"
        if regression
        else f"a one-sided binomial test of its errors against the overall error rate gives "
        f"p < {fc.ALPHA:g}"
    )
    return [
        ("h2", "Errors by slice"),
        Table(
            header,
            rows,
            flagged,
            legend=f"flagged: the slice's error is far above the overall one: it has at least "
            f"{fc.MIN_SUPPORT} examples and {rule}.",
        ),
    ]


def failure_table(m: dict, columns) -> tuple[list, list]:
    """(header, rows) of the first FAILURE_ROWS failures; `columns`: (header, failure field, is
    a number: shown as a `Num` keyed failures.<i>.<field>)."""
    rows = [
        [Num(f"failures.{i}.{key}", f[key]) if number else f[key] for _, key, number in columns]
        for i, f in enumerate(m["failures"][:FAILURE_ROWS])
    ]
    return [header for header, _, _ in columns], rows


def failure_section(m: dict, what: str, header, rows) -> list:
    """The failure catalogue: weak segments, then `what` (a sentence) and the failure table."""
    return [
        ("h2", "Failure catalogue"),
        *ds.weak_segment_blocks(m),
        ("h3", "Failures"),
        what,
        Table(header, rows, legend=ds.row_legend(m)),
    ]


def failure_blocks(m: dict) -> list:
    failures = m["failures"]
    if m["model"]["task_type"] in FAILURE_COLUMNS:
        header, rows = failure_table(m, FAILURE_COLUMNS[m["model"]["task_type"]])
        what = f"{len(failures)} examples with an error, the worst first" + (
            f"; the first {len(rows)} shown, all in metrics.json"
            if len(rows) < len(failures)
            else ""
        )
        return failure_section(m, f"{what}.", header, rows)
    regression = m["model"]["task_type"] == "regression"
    pair = any(f["text_b"] is not None for f in failures)
    score = "abs_error" if regression else "confidence"
    header = (
        ["row", "text"]
        + (["text_b"] if pair else [])
        + ["gold", "predicted", score.replace("_", " "), "tokens", "truncated"]
    )
    rows = []
    for i, f in enumerate(failures[:FAILURE_ROWS]):
        gold = Num(f"failures.{i}.gold", f["gold"]) if regression else f["gold"]
        pred = Num(f"failures.{i}.predicted", f["predicted"]) if regression else f["predicted"]
        rows.append(
            [Num(f"failures.{i}.row", f["row"]), f["text"]]
            + ([f["text_b"] or ""] if pair else [])
            + [gold, pred, Num(f"failures.{i}.{score}", f[score]), f["tokens"], fmt(f["truncated"])]
        )
    what = (
        "largest absolute errors first"
        if regression
        else f"{len(failures)} misclassified examples, the most confident first"
    )
    shown = (
        f"; the first {FAILURE_ROWS} shown, all in metrics.json"
        if len(failures) > FAILURE_ROWS
        else ""
    )
    return failure_section(m, f"{what}{shown}.", header, rows)


def latency_blocks(m: dict) -> list:
    lat = m["latency"]
    if not lat.get("measured", True):  # scored from recorded predictions: nothing was timed
        return [("h2", "Latency and cost"), f"Not measured: {lat['reason']}"]
    rows = [[label, Num(f"latency.{key}", lat[key])] for key, label in LATENCY_FIELDS]
    price = lat["machine_cost_per_hour"]
    return [
        ("h2", "Latency and cost"),
        f"Path: {lat['path']}; batch size {lat['batch_size']}; {lat['num_batches']} timed "
        f"batches after one warmup batch; machine price per hour: {fmt(price)}.",
        Table(["measure", "value"], rows),
    ]


# task_type -> the sections of that family between the headline and the slices; a new task
# family (span QA, NER, multiple choice) adds its own here, next to its evaluator in
# evidence_pack.EVALUATORS.
TASK_SECTIONS = {
    "classification": (per_class_blocks, calibration_blocks),
    "regression": (),
    "token_classification": (ner_pack.ner_blocks,),
    "span_question_answering": (span_qa_pack.span_qa_blocks,),
    "multiple_choice": (multiple_choice_pack.multiple_choice_blocks,),
}
# task_type -> the columns of its failure table (`failure_table`; default: the classification /
# regression table of `failure_blocks`).
FAILURE_COLUMNS = {
    "token_classification": ner_pack.FAILURE_COLUMNS,
    "span_question_answering": span_qa_pack.FAILURE_COLUMNS,
    "multiple_choice": multiple_choice_pack.FAILURE_COLUMNS,
}


def evaluation_report(m: dict) -> tuple[str, list]:
    """(title, blocks) of a one-model report."""
    title = f"Evaluation of {m['model']['name']}"
    intro = (
        f"Model: {m['model']['name']} ({m['model']['task_type']}, {m['model']['path']}, "
        f"max_seq_length {m['model']['max_seq_length']}). Data: {m['data']['file']}, "
        f"{m['data']['examples']} examples, {m['data']['truncated']} truncated."
    )
    sections = [
        block for build in TASK_SECTIONS.get(m["model"]["task_type"], ()) for block in build(m)
    ]
    return title, [
        intro,
        *headline_blocks(m),
        *sections,
        *ds.data_health_blocks(m),
        *ds.leakage_blocks(m),
        *ds.label_issue_blocks(m),
        *slice_blocks(m),
        *failure_blocks(m),
        *ds.behaviour_blocks(m),
        *latency_blocks(m),
        *ds.gate_blocks(m),
        *ds.provenance_blocks(m),
    ]
