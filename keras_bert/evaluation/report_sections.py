"""The sections of a one-model evidence-pack report, as `report_writer` blocks.

Input: the metrics dict of `evidence_pack.evaluate` (what metrics.json holds). Each table cell that
shows a number is a `Num` with its metrics.json key, so report.md / report.html and metrics.json
cannot disagree. What differs between task kinds (their own sections, the failure table's
columns, whether slices measure an absolute error) comes from the model's kind (`kinds.kind_of`).
"""

from __future__ import annotations

from keras_bert.evaluation import diagnostic_sections as ds
from keras_bert.evaluation import failure_catalogue as fc
from keras_bert.evaluation import kinds
from keras_bert.evaluation.report_writer import Num, Table, fmt, keyed_rows

FAILURE_ROWS = 100
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


def slice_blocks(m: dict) -> list:
    regression = kinds.kind_of(m["model"]["task_type"]).regression
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
    """(header, rows) of the first FAILURE_ROWS failures; `columns`: (header, failure field,
    cell: True: a `Num` keyed failures.<i>.<field>; False: the value as it is; a function: the
    value -> the cell)."""
    rows = [
        [_cell(f"failures.{i}.{key}", f[key], cell) for _, key, cell in columns]
        for i, f in enumerate(m["failures"][:FAILURE_ROWS])
    ]
    return [header for header, _, _ in columns], rows


def _cell(key: str, value, cell):
    if cell is True:
        return Num(key, value)
    return cell(value) if callable(cell) else value


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
    kind = kinds.kind_of(m["model"]["task_type"])
    failures = m["failures"]
    header, rows = failure_table(m, kind.failure_columns(m))
    what = kind.failure_title.format(n=len(failures)) + (
        f"; the first {len(rows)} shown, all in metrics.json" if len(rows) < len(failures) else ""
    )
    return failure_section(m, f"{what}.", header, rows)


def latency_blocks(m: dict) -> list:
    lat = m["latency"]
    if not lat.get("measured", True):  # scored from recorded predictions: nothing was timed
        return [("h2", "Latency and cost"), f"Not measured: {lat['reason']}"]
    too_few = lat.get("too_few", {})
    rows = [
        [label, f"n/a ({too_few[key]})" if key in too_few else Num(f"latency.{key}", lat[key])]
        for key, label in LATENCY_FIELDS
    ]
    price = lat["machine_cost_per_hour"]
    return [
        ("h2", "Latency and cost"),
        f"Path: {lat['path']}; batch size {lat['batch_size']}; {lat['num_batches']} timed "
        f"batches after one warmup batch; machine price per hour: {fmt(price)}.",
        Table(["measure", "value"], rows),
    ]


def evaluation_report(m: dict) -> tuple[str, list]:
    """(title, blocks) of a one-model report."""
    title = f"Evaluation of {m['model']['name']}"
    intro = (
        f"Model: {m['model']['name']} ({m['model']['task_type']}, {m['model']['path']}, "
        f"max_seq_length {m['model']['max_seq_length']}). Data: {m['data']['file']}, "
        f"{m['data']['examples']} examples, {m['data']['truncated']} truncated."
    )
    sections = [
        block for build in kinds.kind_of(m["model"]["task_type"]).sections for block in build(m)
    ]
    return title, [
        intro,
        *ds.gate_blocks(m),  # the verdict first: what a reader of the report comes for
        *headline_blocks(m),
        *sections,
        *ds.data_health_blocks(m),
        *ds.leakage_blocks(m),
        *ds.label_issue_blocks(m),
        *slice_blocks(m),
        *failure_blocks(m),
        *ds.behaviour_blocks(m),
        *latency_blocks(m),
        *ds.provenance_blocks(m),
    ]
