"""The evidence pack on disk: metrics.json, report.md, report.html (self-contained) and PNG plots.

A report is first a list of blocks (headings, paragraphs, tables, figures); `to_markdown` and
`to_html` render the same blocks, so both files show the same numbers. Every number is a `Num`
holding its metrics.json key path ("headline.accuracy", "per_class.neg.f1", ...): in report.html it
is `<span data-key="<path>">value</span>`, which lets a reader (or a test in a browser) check each
printed value against metrics.json. Plots are matplotlib PNGs: files beside
report.md, base64 `data:` URLs inside report.html (no network, no other file needed); they are
drawn with matplotlib's object API (`matplotlib.figure.Figure`, Agg canvas), leaving pyplot's
global state and the user's back end alone.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
import math
import os

import numpy as np
from matplotlib.figure import Figure as MplFigure

from keras_bert import fileio

DIGITS = 4
CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}
th{background:#eee}td.text{text-align:left;max-width:480px}tr.flag td{background:#fde2e2}
img{max-width:100%;border:1px solid #ddd;margin:.5em}"""


def fmt(value) -> str:
    """The one text form of a number in both reports: floats with 4 decimals (below 0.001 in
    scientific notation with 4 significant digits), "n/a" for None or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if 0 < abs(float(value)) < 10 ** -(DIGITS - 1):  # small costs and p-values keep 4 digits
        return f"{float(value):.{DIGITS - 1}e}"
    return f"{float(value):.{DIGITS}f}"


@dataclasses.dataclass
class Num:
    """A number printed in a report, with its key path in metrics.json ("a.b.c")."""

    key: str
    value: object


def nums(key: str, item: dict, fields) -> list[Num]:
    """`Num` cells of item[f] for f in fields, keyed "<key>.<f>"."""
    return [Num(f"{key}.{f}", item[f]) for f in fields]


def keyed_rows(key: str, items, fields, text_fields=("family", "value")) -> list[list]:
    """A table row per item of the metrics.json list at `key` (or its first items): the item's
    `text_fields` as they are, then `Num` cells of its `fields`, keyed "<key>.<i>.<f>"."""
    return [
        [*(item[f] for f in text_fields), *nums(f"{key}.{i}", item, fields)]
        for i, item in enumerate(items)
    ]


@dataclasses.dataclass
class Table:
    """A table: `header` (str cells), `rows` (lists of str | Num cells).

    `flagged` row indices are marked with the status word `mark` (Markdown: "**first cell**
    (mark)"; HTML: the row highlighted). `legend` is the line printed under the table ("Legend:
    ..."): it defines the table's status words and marks and how its rows are numbered. A table
    that marks rows needs a legend naming the mark, so no report shows a status word it does not
    define.

    Raises:
        ValueError: rows are flagged and the legend does not define `mark`.
    """

    header: list
    rows: list
    flagged: list = dataclasses.field(default_factory=list)
    mark: str = "flagged"
    legend: str | None = None

    def __post_init__(self):
        if self.flagged and f"{self.mark}:" not in (self.legend or ""):
            raise ValueError(
                f"a table that marks rows {self.mark!r} needs a legend defining it "
                f"('{self.mark}: ...'), got {self.legend!r}"
            )


@dataclasses.dataclass
class Figure:
    filename: str
    png: bytes
    alt: str


def lookup(metrics: dict, key: str):
    """metrics.json value at a dotted key path (list items by index)."""
    value = metrics
    for part in key.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def figure_png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def confusion_figure(matrix, label_names, title) -> bytes:
    """Heatmap PNG of a confusion matrix (rows gold, columns predicted) with its counts."""
    matrix = np.asarray(matrix)
    size = max(3.0, 0.6 * len(label_names) + 2)
    fig = MplFigure(figsize=(size, size))
    ax = fig.subplots()
    ax.imshow(matrix, cmap="Blues")
    ax.set_xticks(range(len(label_names)), label_names, rotation=45, ha="right")
    ax.set_yticks(range(len(label_names)), label_names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title(title)
    top = matrix.max() if matrix.size else 0
    for (i, j), count in np.ndenumerate(matrix):
        ax.text(
            j,
            i,
            str(count),
            ha="center",
            va="center",
            color="white" if count > top / 2 else "black",
        )
    return figure_png(fig)


def reliability_figure(calibrations: dict) -> bytes:
    """Reliability diagram PNG: accuracy vs mean confidence per bin, one line per model."""
    fig = MplFigure(figsize=(4.5, 4.5))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    for name, cal in calibrations.items():
        bins = [b for b in cal["bins"] if b["count"]]
        ax.plot(
            [b["confidence"] for b in bins],
            [b["accuracy"] for b in bins],
            "o-",
            label=f"{name} (ECE {fmt(cal['ece'])})",
        )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("mean confidence in bin")
    ax.set_ylabel("accuracy in bin")
    ax.legend(loc="upper left", fontsize=8)
    return figure_png(fig)


def bar_figure(categories, series: dict, ylabel: str) -> bytes:
    """Grouped bars: one group per category, one bar per series (name -> values)."""
    fig = MplFigure(figsize=(max(4.0, 0.8 * len(categories) + 2), 3.5))
    ax = fig.subplots()
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(categories))
    for k, (name, values) in enumerate(series.items()):
        ax.bar(x + k * width, values, width, label=name)
    ax.set_xticks(x + width * (len(series) - 1) / 2, categories, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    return figure_png(fig)


def _cell_md(cell) -> str:
    text = fmt(cell.value) if isinstance(cell, Num) else str(cell)
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(title: str, blocks: list) -> str:
    lines = [f"# {title}", ""]
    for block in blocks:
        if isinstance(block, Table):
            lines.append("| " + " | ".join(_cell_md(c) for c in block.header) + " |")
            lines.append("|" + "---|" * len(block.header))
            for i, row in enumerate(block.rows):
                cells = [_cell_md(c) for c in row]
                if i in block.flagged:
                    cells[0] = f"**{cells[0]}** ({block.mark})"
                lines.append("| " + " | ".join(cells) + " |")
            if block.legend:
                lines += ["", f"Legend: {block.legend}"]
        elif isinstance(block, Figure):
            lines.append(f"![{block.alt}]({block.filename})")
        elif isinstance(block, tuple):  # ("h2", text)
            lines.append(f"{'#' * int(block[0][1])} {block[1]}")
        else:
            lines.append(str(block))
        lines.append("")
    return "\n".join(lines)


def _cell_html(cell, tag="td") -> str:
    if isinstance(cell, Num):
        return f'<{tag}><span data-key="{html.escape(cell.key)}">{fmt(cell.value)}</span></{tag}>'
    cls = ' class="text"' if tag == "td" else ""  # words left-aligned, numbers right
    return f"<{tag}{cls}>{html.escape(str(cell))}</{tag}>"


def to_html(title: str, blocks: list) -> str:
    body = [f"<h1>{html.escape(title)}</h1>"]
    for block in blocks:
        if isinstance(block, Table):
            rows = ["<tr>" + "".join(_cell_html(c, "th") for c in block.header) + "</tr>"]
            for i, row in enumerate(block.rows):
                cells = [_cell_html(c) for c in row]
                if i in block.flagged:  # the mark after the first cell's content, as in Markdown
                    cells[0] = cells[0].replace("</td>", f" ({html.escape(block.mark)})</td>", 1)
                cls = ' class="flag"' if i in block.flagged else ""
                rows.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
            body.append("<table>" + "\n".join(rows) + "</table>")
            if block.legend:
                body.append(f'<p class="legend">Legend: {html.escape(block.legend)}</p>')
        elif isinstance(block, Figure):
            data = base64.b64encode(block.png).decode("ascii")
            body.append(f'<img alt="{html.escape(block.alt)}" src="data:image/png;base64,{data}">')
        elif isinstance(block, tuple):
            body.append(f"<{block[0]}>{html.escape(block[1])}</{block[0]}>")
        else:
            body.append(f"<p>{html.escape(str(block))}</p>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def json_ready(value):
    """numpy scalars / arrays -> Python, NaN / inf -> None, recursively (for json.dump)."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_ready(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN (e.g. Pearson r of constant predictions)
    return value


def write_report(output_dir, title: str, metrics: dict, blocks: list) -> dict:
    """Writes metrics.json, report.md, report.html and every figure's PNG to `output_dir`.

    `output_dir` may be any `keras_bert.fileio` URI. Each file is written whole-or-nothing,
    metrics.json (what tools read) last.

    Returns:
        dict name -> path (str) of the written files.
    """
    out = os.fspath(output_dir)
    fileio.makedirs(out)
    paths = {
        "metrics": fileio.join(out, "metrics.json"),
        "markdown": fileio.join(out, "report.md"),
        "html": fileio.join(out, "report.html"),
    }
    for block in blocks:
        if isinstance(block, Figure):
            paths[block.filename] = fileio.join(out, block.filename)
            fileio.write_bytes(paths[block.filename], block.png)
    fileio.write_text(paths["markdown"], to_markdown(title, blocks))
    fileio.write_text(paths["html"], to_html(title, blocks))
    fileio.write_text(
        paths["metrics"], json.dumps(json_ready(metrics), indent=2, allow_nan=False) + "\n"
    )
    return paths
