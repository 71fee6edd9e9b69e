"""Two models on the same examples, side by side (`recipes/evaluate.py --compare`, SPEC section 9).

Deltas are always second model minus first (B - A). Confidence intervals are the paired
percentile bootstrap (Efron & Tibshirani 1993, ch. 13; as Koehn 2004 applies it to compare two
systems on one test set): resample the example indices with replacement, compute both models'
metric on the same resample, and take the 2.5th / 97.5th percentiles of the B - A differences.
A resample where a metric is undefined (NaN: Pearson or Spearman of constant values, likely on a
few examples) is dropped from that metric's interval and counted (`dropped_resamples`); below
MIN_VALID_RESAMPLES valid ones the interval is None with "not enough data" in `ci_note`.
Classification metrics of a resample come from its confusion counts (one `np.bincount`), so 1,000
resamples of a few thousand examples take well under a second.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.stats
from sklearn import metrics as skm

from keras_bert.evaluation import diagnostic_sections as ds
from keras_bert.evaluation.report_writer import (
    Figure,
    Num,
    Table,
    bar_figure,
    confusion_figure,
    fmt,
    keyed_rows,
    reliability_figure,
)
from keras_bert.metrics import classification as glue_metrics

DISAGREEMENT_ROWS = 100
SLICE_ROWS = 20
LATENCY_KEYS = ("p50_ms", "p95_ms", "p99_ms", "mean_ms", "throughput_per_s", "cost_per_1000")
CONFIDENCE = 0.95
# Fewest finite resample statistics an interval is computed from: 40 = 1 / 0.025, so each 2.5% tail
# of the 95% interval rests on at least one resample.
MIN_VALID_RESAMPLES = 40


def _from_confusion(cm: np.ndarray) -> dict:
    """accuracy, macro_f1, weighted_f1 from confusion counts [..., C, C] (rows gold)."""
    tp = np.diagonal(cm, axis1=-2, axis2=-1).astype(np.float64)
    gold = cm.sum(-1).astype(np.float64)
    pred = cm.sum(-2).astype(np.float64)
    denominator = gold + pred
    f1 = np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0)
    total = gold.sum(-1)
    return {
        "accuracy": tp.sum(-1) / total,
        "macro_f1": glue_metrics.macro_average(f1, gold, pred),
        "weighted_f1": (f1 * gold).sum(-1) / total,
    }


def classification_bootstrap(gold, pred_a, pred_b, num_classes, samples=1000, seed=0) -> dict:
    """Metric -> {"a", "b", "delta", "ci_low", "ci_high"} with paired bootstrap 95% CIs of delta.

    Args:
        gold, pred_a, pred_b: int [N] label ids.
        samples: number of resamples (>= 1).
    """
    gold, pred_a, pred_b = (np.asarray(x, np.int64) for x in (gold, pred_a, pred_b))
    n, c = len(gold), int(num_classes)
    rng = np.random.default_rng(seed)

    def metrics_of(pred, idx):  # idx: [S, N] -> metric arrays [S]
        flat = (gold[idx] * c + pred[idx]) + (np.arange(idx.shape[0])[:, None] * c * c)
        cm = np.bincount(flat.ravel(), minlength=idx.shape[0] * c * c).reshape(-1, c, c)
        return _from_confusion(cm)

    full = np.arange(n)[None, :]
    point_a, point_b = metrics_of(pred_a, full), metrics_of(pred_b, full)
    deltas = {k: [] for k in point_a}
    for start in range(0, samples, 100):
        idx = rng.integers(0, n, size=(min(100, samples - start), n))
        ma, mb = metrics_of(pred_a, idx), metrics_of(pred_b, idx)
        for k in deltas:
            deltas[k].append(mb[k] - ma[k])
    return {
        k: _delta_row(float(point_a[k][0]), float(point_b[k][0]), np.concatenate(deltas[k]))
        for k in point_a
    }


def percentile_interval(values, confidence: float = CONFIDENCE) -> dict:
    """The percentile interval of bootstrap statistics [S], over the finite ones.

    A resample whose statistic is undefined (NaN: a correlation of a resample with constant gold
    or constant predictions) is dropped and counted, not allowed to turn the interval into NaN.

    Returns:
        {"ci_low", "ci_high", "dropped_resamples", "ci_note"}: the interval (None when fewer than
        MIN_VALID_RESAMPLES statistics are finite, ci_note then says "not enough data: ..."),
        how many statistics were dropped, and ci_note None otherwise.
    """
    values = np.asarray(values, np.float64)
    valid = values[np.isfinite(values)]
    dropped = int(len(values) - len(valid))
    if len(valid) < MIN_VALID_RESAMPLES:
        return {
            "ci_low": None,
            "ci_high": None,
            "dropped_resamples": dropped,
            "ci_note": f"not enough data: {len(valid)} of {len(values)} resamples valid, "
            f"an interval needs {MIN_VALID_RESAMPLES}",
        }
    tail = round(50 * (1 - confidence), 9)  # 2.5, not 2.500000000000002
    low, high = np.percentile(valid, [tail, 100 - tail])
    return {
        "ci_low": float(low),
        "ci_high": float(high),
        "dropped_resamples": dropped,
        "ci_note": None,
    }


def _delta_row(a, b, deltas) -> dict:
    """Point values, B - A and the bootstrap interval of the delta; deltas None: not bootstrapped."""
    interval = (
        {"ci_low": None, "ci_high": None, "dropped_resamples": None, "ci_note": "not bootstrapped"}
        if deltas is None
        else percentile_interval(deltas)
    )
    return {"a": a, "b": b, "delta": b - a} | interval


def regression_bootstrap(gold, scores_a, scores_b, samples=1000, seed=0) -> dict:
    """Like `classification_bootstrap` for pearson, spearman, mse and mae of scores [N]."""
    gold, scores_a, scores_b = (np.asarray(x, np.float64) for x in (gold, scores_a, scores_b))
    fns = {
        "pearson": glue_metrics.pearson,
        "spearman": glue_metrics.spearman,
        "mse": skm.mean_squared_error,
        "mae": skm.mean_absolute_error,
    }
    rng = np.random.default_rng(seed)
    deltas = {k: [] for k in fns}
    with warnings.catch_warnings():  # a constant resample: NaN correlation, dropped from the CI
        warnings.simplefilter("ignore", scipy.stats.ConstantInputWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        for _ in range(samples):
            idx = rng.integers(0, len(gold), len(gold))
            for k, fn in fns.items():
                deltas[k].append(fn(gold[idx], scores_b[idx]) - fn(gold[idx], scores_a[idx]))
    return {
        k: _delta_row(
            float(fn(gold, scores_a)), float(fn(gold, scores_b)), np.asarray(deltas[k], np.float64)
        )
        for k, fn in fns.items()
    }


def count_bootstrap(counts_a, counts_b, metrics_of, samples=1000, seed=0) -> dict:
    """Like `classification_bootstrap` for a metric computed from per-example counts.

    Args:
        counts_a, counts_b: float or int [N, K], additive per-example counts of each model (NER:
            entities right, predicted, gold; SQuAD: exact, F1; multiple choice: right).
        metrics_of: function(sums [..., K]) -> {metric: array [...]}, the metrics of summed
            counts (and the number of examples summed, passed as a last column).
    """
    counts_a, counts_b = (np.asarray(x, np.float64) for x in (counts_a, counts_b))
    n = len(counts_a)
    ones = np.ones((n, 1))
    counts_a, counts_b = np.hstack([counts_a, ones]), np.hstack([counts_b, ones])
    rng = np.random.default_rng(seed)
    point_a, point_b = metrics_of(counts_a.sum(0)), metrics_of(counts_b.sum(0))
    deltas = {k: [] for k in point_a}
    for start in range(0, samples, 100):
        idx = rng.integers(0, n, size=(min(100, samples - start), n))
        ma, mb = metrics_of(counts_a[idx].sum(1)), metrics_of(counts_b[idx].sum(1))
        for k in deltas:
            deltas[k].append(mb[k] - ma[k])
    return {
        k: _delta_row(float(point_a[k]), float(point_b[k]), np.concatenate(deltas[k]))
        for k in point_a
    }


def outcome_disagreements(data, pa: dict, pb: dict) -> dict:
    """`disagreements` of two task-family predictions (`predicted` dicts with per-example "shown"
    text, "gold_shown" and "correct" bool [N]): the examples whose shown predictions differ."""
    rows = []
    for i, (a, b) in enumerate(zip(pa["shown"], pb["shown"])):
        if a == b:
            continue
        right = "a" if pa["correct"][i] else "b" if pb["correct"][i] else "neither"
        e = data.examples[i]
        rows.append(
            {
                "row": i,
                "guid": e.guid,
                "text": e.text_a,
                "text_b": e.text_b,
                "gold": pa["gold_shown"][i],
                "a": a,
                "b": b,
                "right": right,
            }
        )
    return _disagreement_summary(rows)


def _disagreement_summary(rows: list) -> dict:
    count = {k: sum(r["right"] == k for r in rows) for k in ("a", "b", "neither")}
    return {
        "count": len(rows),
        "a_right": count["a"],
        "b_right": count["b"],
        "neither_right": count["neither"],
        "examples": rows,
    }


def per_type_deltas(result_a, result_b) -> dict:
    """Per entity type: precision / recall / F1 of both models and B - A (0 where a type is absent
    from one model's report), with the gold support."""
    empty = {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    a_types, b_types = result_a["per_type"], result_b["per_type"]
    out = {}
    for n in sorted(set(a_types) | set(b_types)):
        va, vb = a_types.get(n, empty), b_types.get(n, empty)
        out[n] = {
            f"{f}_{k}": v
            for f in ("precision", "recall", "f1")
            for k, v in (("a", va[f]), ("b", vb[f]), ("delta", vb[f] - va[f]))
        } | {"support": max(va["support"], vb["support"])}
    return out


def disagreements(data, pa, pb, label_names) -> dict:
    """Examples where the two predicted label ids (int [N] each) differ, and which model was right.

    Returns:
        {"count", "a_right", "b_right", "neither_right", "examples": [{"row" (0-based), "guid",
        "text", "text_b", "gold", "a", "b", "right"}]} with right in {"a", "b", "neither"}.
    """
    gold = data.gold
    rows = []
    for i in np.flatnonzero(pa != pb):
        right = "a" if pa[i] == gold[i] else "b" if pb[i] == gold[i] else "neither"
        e = data.examples[i]
        rows.append(
            {
                "row": int(i),
                "guid": e.guid,
                "text": e.text_a,
                "text_b": e.text_b,
                "gold": label_names[gold[i]],
                "a": label_names[pa[i]],
                "b": label_names[pb[i]],
                "right": right,
            }
        )
    return _disagreement_summary(rows)


def slice_deltas(result_a, result_b) -> list[dict]:
    """Per slice: error rates of both models and B - A, the slices where B loses most first."""
    b_rows = {(s["family"], s["value"]): s for s in result_b["slices"]}
    rows = [
        {
            "family": s["family"],
            "value": s["value"],
            "count": s["count"],
            "error_rate_a": s["error_rate"],
            "error_rate_b": b_rows[(s["family"], s["value"])]["error_rate"],
            "delta": b_rows[(s["family"], s["value"])]["error_rate"] - s["error_rate"],
        }
        for s in result_a["slices"]
    ]
    return sorted(rows, key=lambda r: (-r["delta"], r["family"], r["value"]))


def compare(data, result_a, result_b, samples=1000, seed=0) -> dict:
    """The comparison dict (what metrics.json holds) of two `evidence_pack.evaluate` results.

    Pops "predicted" from both results.
    """
    pa, pb = result_a.pop("predicted"), result_b.pop("predicted")
    names = result_a["model"]["label_names"]
    if result_a["model"]["task_type"] == "classification":
        headline = classification_bootstrap(data.gold, pa, pb, len(names), samples, seed)
        headline["ece"] = _delta_row(result_a["headline"]["ece"], result_b["headline"]["ece"], None)
        per_class = {
            n: {
                f"{f}_{k}": v
                for f in ("precision", "recall", "f1")
                for k, v in (
                    ("a", result_a["per_class"][n][f]),
                    ("b", result_b["per_class"][n][f]),
                    ("delta", result_b["per_class"][n][f] - result_a["per_class"][n][f]),
                )
            }
            | {"support": result_a["per_class"][n]["support"]}
            for n in names
        }
    elif isinstance(pa, dict):  # span QA, NER, multiple choice: per-example counts
        headline = count_bootstrap(pa["counts"], pb["counts"], pa["metrics_of"], samples, seed)
        per_class = per_type_deltas(result_a, result_b) if "per_type" in result_a else None
    else:
        headline, per_class = regression_bootstrap(data.gold, pa, pb, samples, seed), None
    if isinstance(pa, dict):
        disagree = outcome_disagreements(data, pa, pb)
    else:
        disagree = disagreements(data, pa, pb, names) if per_class else None
    la, lb = result_a["latency"], result_b["latency"]
    latency = {
        k: {
            "a": la[k],
            "b": lb[k],
            "delta": None if la[k] is None or lb[k] is None else lb[k] - la[k],
        }
        for k in LATENCY_KEYS
    }
    return {
        "models": {"a": result_a["model"], "b": result_b["model"]},
        "data": result_a["data"],
        "bootstrap": {
            "samples": int(samples),
            "seed": int(seed),
            "confidence": CONFIDENCE,
            "min_valid_resamples": MIN_VALID_RESAMPLES,
        },
        "headline": headline,
        "per_class": per_class,
        "disagreements": disagree,
        "slices": slice_deltas(result_a, result_b),
        "latency": latency,
        "latency_setup": {
            "a": la["path"],
            "b": lb["path"],
            "batch_size": la["batch_size"],
            "machine_cost_per_hour": la["machine_cost_per_hour"],
        },
        "a": result_a,
        "b": result_b,
    }


def _headline_blocks(m, a, b) -> list:
    rows = [
        [
            k,
            Num(f"headline.{k}.a", v["a"]),
            Num(f"headline.{k}.b", v["b"]),
            Num(f"headline.{k}.delta", v["delta"]),
            v["ci_note"] if v["ci_low"] is None else f"[{fmt(v['ci_low'])}, {fmt(v['ci_high'])}]",
            "n/a"
            if v["dropped_resamples"] is None
            else Num(f"headline.{k}.dropped_resamples", v["dropped_resamples"]),
        ]
        for k, v in m["headline"].items()
    ]
    bs = m["bootstrap"]
    return [
        ("h2", "Headline metrics"),
        f"Delta = B - A; 95% paired bootstrap interval of the delta over {bs['samples']} "
        f"resamples (seed {bs['seed']}). A resample where a metric is undefined (a correlation "
        f"of constant values) is dropped and counted; an interval needs "
        f"{bs['min_valid_resamples']} valid resamples.",
        Table(["metric", f"A: {a}", f"B: {b}", "delta", "95% CI", "dropped resamples"], rows),
    ]


def _per_class_blocks(m, a, b) -> list:
    if not m["per_class"]:
        return []
    rows = [
        [n, Num(f"per_class.{n}.support", v["support"])]
        + [
            Num(f"per_class.{n}.{f}_{k}", v[f"{f}_{k}"])
            for f in ("precision", "recall", "f1")
            for k in ("a", "b", "delta")
        ]
        for n, v in m["per_class"].items()
    ]
    header = ["class", "support"] + [
        f"{f} {k}" for f in ("P", "R", "F1") for k in ("A", "B", "delta")
    ]
    names = list(m["per_class"])
    f1 = {name: [m["per_class"][n][f"f1_{k}"] for n in names] for name, k in ((a, "a"), (b, "b"))}
    entity_types = m["models"]["a"]["task_type"] == "token_classification"
    if entity_types:
        header[0] = "entity type"
    return [
        ("h2", "Per-entity-type deltas (seqeval)" if entity_types else "Per-class deltas"),
        Table(header, rows),
        Figure("per_class_f1.png", bar_figure(names, f1, "F1"), "per-class F1"),
    ]


def _disagreement_blocks(m, a, b) -> list:
    d = m["disagreements"]
    if d is None:
        return []
    rows = [
        [
            Num(f"disagreements.examples.{i}.row", r["row"]),
            r["text"] + (f" || {r['text_b']}" if r["text_b"] else ""),
            r["gold"],
            r["a"],
            r["b"],
            {"a": "A", "b": "B", "neither": "neither"}[r["right"]],
        ]
        for i, r in enumerate(d["examples"][:DISAGREEMENT_ROWS])
    ]
    summary = Table(
        ["disagreements", "A right", "B right", "neither right"],
        [
            [
                Num("disagreements.count", d["count"]),
                Num("disagreements.a_right", d["a_right"]),
                Num("disagreements.b_right", d["b_right"]),
                Num("disagreements.neither_right", d["neither_right"]),
            ]
        ],
    )
    return [
        ("h2", "Where they disagree"),
        summary,
        Table(
            ["row", "text", "gold", f"A: {a}", f"B: {b}", "right"],
            rows,
            legend="right: the model whose prediction equals the gold one (neither: both are "
            f"wrong). {ds.row_legend(m)}",
        ),
    ]


def _slice_blocks(m) -> list:
    fields = ("count", "error_rate_a", "error_rate_b", "delta")
    rows = keyed_rows("slices", m["slices"][:SLICE_ROWS], fields)
    return [
        ("h2", "Slices where B loses most"),
        "Error rate (regression: mean absolute error) per slice; worst delta (B - A) first.",
        Table(["slice", "value", "examples", "A", "B", "delta"], rows),
    ]


def _latency_blocks(m, a, b) -> list:
    rows = [
        [
            k,
            Num(f"latency.{k}.a", v["a"]),
            Num(f"latency.{k}.b", v["b"]),
            Num(f"latency.{k}.delta", v["delta"]),
        ]
        for k, v in m["latency"].items()
    ]
    s = m["latency_setup"]
    return [
        ("h2", "Latency and cost"),
        f"A: {s['a']}; B: {s['b']}; batch size {s['batch_size']}; machine price per hour "
        f"{fmt(s['machine_cost_per_hour'])}.",
        Table(["measure", f"A: {a}", f"B: {b}", "delta"], rows),
    ]


def comparison_report(m: dict) -> tuple[str, list]:
    """(title, blocks) of a two-model report."""
    a, b = m["models"]["a"]["name"], m["models"]["b"]["name"]
    blocks = [
        f"A: {a} ({m['models']['a']['path']}). B: {b} ({m['models']['b']['path']}). Data: "
        f"{m['data']['file']}, {m['data']['examples']} examples.",
        *_headline_blocks(m, a, b),
        *_per_class_blocks(m, a, b),
    ]
    if m["models"]["a"]["task_type"] == "classification":
        names = m["models"]["a"]["label_names"]
        blocks += [
            Figure(
                "confusion_a.png",
                confusion_figure(m["a"]["confusion_matrix"], names, f"A: {a}"),
                "confusion matrix A",
            ),
            Figure(
                "confusion_b.png",
                confusion_figure(m["b"]["confusion_matrix"], names, f"B: {b}"),
                "confusion matrix B",
            ),
            Figure(
                "reliability.png",
                reliability_figure(
                    {f"A: {a}": m["a"]["calibration"], f"B: {b}": m["b"]["calibration"]}
                ),
                "reliability diagram",
            ),
        ]
    blocks += [*_disagreement_blocks(m, a, b), *_slice_blocks(m)]
    blocks += ds.behaviour_comparison_blocks(m, a, b)
    for key, name in (("a", a), ("b", b)):
        blocks += ds.weak_segment_blocks(
            m[key], f"{key}.", f"Weak segments of {key.upper()}: {name}"
        )
    blocks += ds.data_health_blocks(m["a"], "a.", f"Data health (tokenizer of A: {a})")
    blocks += ds.leakage_blocks(m)
    for key, name in (("a", a), ("b", b)):
        blocks += ds.label_issue_blocks(
            m[key], f"{key}.", f"Suspected label errors by {key.upper()}: {name}"
        )
    blocks += [*_latency_blocks(m, a, b), *ds.provenance_blocks(m)]
    return f"Comparison: {a} vs {b}", blocks
