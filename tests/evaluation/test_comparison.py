"""Paired bootstrap deltas, disagreements and slice deltas of two models, against sklearn and by hand."""

import warnings

import numpy as np
import pytest
import scipy.stats
from sklearn import metrics as skm

from keras_bert.data.glue import InputExample
from keras_bert.evaluation import comparison
from keras_bert.evaluation import evidence_pack as ep
from keras_bert.evaluation.kinds import classification
from keras_bert.evaluation.predictors import ModelInfo
from keras_bert.evaluation.report_writer import fmt, lookup
from tests.evaluation.test_classification_report import GOLD, NAMES, PRED, probabilities

PRED_B = np.array([0, 0, 0, 2, 1, 2, 1, 2, 1, 2])  # differs from PRED at 2, 5, 6, 8


def test_bootstrap_against_sklearn_on_the_same_resamples():
    rng = np.random.default_rng(7)
    gold, a, b = rng.integers(0, 3, 40), rng.integers(0, 3, 40), rng.integers(0, 3, 40)
    out = comparison.classification_bootstrap(gold, a, b, 3, samples=50, seed=3)
    idx = np.random.default_rng(3).integers(0, 40, size=(50, 40))
    for name, fn in (
        ("accuracy", skm.accuracy_score),
        (
            "macro_f1",
            # scikit-learn's own rule: over the classes in the resample's gold or predictions
            lambda g, p: skm.f1_score(g, p, average="macro", zero_division=0),
        ),
        (
            "weighted_f1",
            lambda g, p: skm.f1_score(g, p, average="weighted", labels=[0, 1, 2], zero_division=0),
        ),
    ):
        assert out[name]["a"] == pytest.approx(fn(gold, a))
        assert out[name]["b"] == pytest.approx(fn(gold, b))
        assert out[name]["delta"] == pytest.approx(fn(gold, b) - fn(gold, a))
        deltas = [fn(gold[i], b[i]) - fn(gold[i], a[i]) for i in idx]
        assert out[name]["ci_low"] == pytest.approx(np.percentile(deltas, 2.5))
        assert out[name]["ci_high"] == pytest.approx(np.percentile(deltas, 97.5))


def test_identical_models_have_a_zero_interval():
    out = comparison.classification_bootstrap(GOLD, PRED, PRED, 3, samples=200)
    assert (out["accuracy"]["delta"], out["accuracy"]["ci_low"], out["accuracy"]["ci_high"]) == (
        0,
        0,
        0,
    )


def test_regression_bootstrap_point_values():
    out = comparison.regression_bootstrap(
        [0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 5.0], [0.5, 1.0, 2.0, 3.0], samples=20
    )
    assert out["mse"]["a"] == pytest.approx(1.0) and out["mse"]["b"] == pytest.approx(0.0625)
    assert out["mae"]["delta"] == pytest.approx(0.125 - 0.5)


# Six rows with tied gold scores: a resample can hold one gold value only (or constant scores),
# and the correlations of such a resample are undefined (NaN).
GOLD6 = np.array([1.0, 1.0, 2.0, 2.0, 3.0, 4.0])
A6 = np.array([1.2, 0.8, 2.3, 1.6, 3.4, 3.9])
B6 = np.array([1.5, 1.5, 2.5, 2.0, 2.5, 4.5])


def _resample_deltas(gold, a, b, fn, samples, seed):
    """B - A of fn on the resamples regression_bootstrap draws, recomputed here (NaN kept)."""
    rng = np.random.default_rng(seed)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on the constant resamples
        for _ in range(samples):
            i = rng.integers(0, len(gold), len(gold))
            out.append(fn(gold[i], b[i])[0] - fn(gold[i], a[i])[0])
    return np.asarray(out)


def test_regression_bootstrap_drops_undefined_resamples():
    out = comparison.regression_bootstrap(GOLD6, A6, B6, samples=1000, seed=0)
    for name, fn in (("pearson", scipy.stats.pearsonr), ("spearman", scipy.stats.spearmanr)):
        deltas = _resample_deltas(GOLD6, A6, B6, fn, 1000, 0)
        valid = deltas[np.isfinite(deltas)]
        assert (
            len(deltas) - len(valid) == 4
        )  # 4 of 1,000 resamples hold one gold value or one score
        assert out[name]["dropped_resamples"] == 4 and out[name]["ci_note"] is None
        assert out[name]["ci_low"] == np.percentile(valid, 2.5)
        assert out[name]["ci_high"] == np.percentile(valid, 97.5)
        assert np.isnan(np.percentile(deltas, 2.5))  # what the interval was before: NaN
    assert (out["mse"]["dropped_resamples"], out["mae"]["dropped_resamples"]) == (0, 0)


def test_too_few_valid_resamples_is_not_enough_data():
    gold = np.array([0.0, 0.0, 0.0, 0.0, 1.0])  # one resample in three has constant gold
    out = comparison.regression_bootstrap(
        gold, gold + [0.1, 0.2, 0.3, 0.4, 0.5], gold + [0.5, 0.4, 0.3, 0.2, 0.1], samples=50, seed=0
    )
    deltas = _resample_deltas(
        gold,
        gold + [0.1, 0.2, 0.3, 0.4, 0.5],
        gold + [0.5, 0.4, 0.3, 0.2, 0.1],
        scipy.stats.pearsonr,
        50,
        0,
    )
    assert int(np.sum(~np.isfinite(deltas))) == 11
    assert {
        k: out["pearson"][k] for k in ("ci_low", "ci_high", "dropped_resamples", "ci_note")
    } == {
        "ci_low": None,
        "ci_high": None,
        "dropped_resamples": 11,
        "ci_note": "not enough data: 39 of 50 resamples valid, an interval needs 40",
    }
    assert out["mae"]["dropped_resamples"] == 0 and out["mae"]["ci_low"] is not None
    at_minimum = comparison.percentile_interval([np.nan] * 5 + list(range(40)))
    assert at_minimum == {
        "ci_low": float(np.percentile(range(40), 2.5)),
        "ci_high": float(np.percentile(range(40), 97.5)),
        "dropped_resamples": 5,
        "ci_note": None,
    }
    assert (
        comparison.percentile_interval([np.nan] + list(range(39)))["ci_note"]
        == "not enough data: 39 of 40 resamples valid, an interval needs 40"
    )


def _data_and_results():
    examples = [InputExample(f"f-{i}", f"text {i}", None, str(g)) for i, g in enumerate(GOLD)]
    gold_names = [NAMES[g] for g in GOLD]
    data = ep.EvalData(
        "f", examples, GOLD, gold_names, None, None, np.full(10, 4), np.zeros(10, bool)
    )
    info = ModelInfo("m", "classification", NAMES, False, [], True, 16)
    results = []
    for pred in (PRED, PRED_B):
        r = classification.evaluate_classification(
            data, {"probabilities": probabilities(GOLD, pred)}, info
        )
        r["model"] = {"name": "m", "label_names": NAMES, "task_type": "classification", "path": "p"}
        r["data"] = {"file": "f", "examples": 10}
        r["latency"] = {
            "p50_ms": 2.0,
            "p95_ms": 3.0,
            "p99_ms": 4.0,
            "mean_ms": 2.5,
            "throughput_per_s": 100.0,
            "cost_per_1000": None,
            "path": "p",
            "batch_size": 4,
            "machine_cost_per_hour": None,
        }
        results.append(r)
    return data, results


def test_compare_by_hand():
    data, (ra, rb) = _data_and_results()
    rb["latency"]["p50_ms"] = 1.5
    m = comparison.compare(data, ra, rb, samples=100)
    # PRED right at 0,1,4,5,7,8,9 (0.7); PRED_B right at 0,1,3,4,6,7,9 (0.7)
    assert m["headline"]["accuracy"]["delta"] == pytest.approx(0.0)
    d = m["disagreements"]
    assert (d["count"], d["a_right"], d["b_right"], d["neither_right"]) == (4, 2, 2, 0)
    assert [(r["guid"], r["gold"], r["a"], r["b"], r["right"]) for r in d["examples"]] == [
        ("f-2", "a", "b", "a", "b"),
        ("f-5", "b", "b", "c", "a"),
        ("f-6", "b", "a", "b", "b"),
        ("f-8", "c", "c", "b", "a"),
    ]
    assert m["per_class"]["c"]["recall_delta"] == pytest.approx(2 / 3 - 1.0)
    worst = m["slices"][0]
    assert (worst["family"], worst["value"], worst["delta"]) == (
        "gold label",
        "c",
        pytest.approx(1 / 3),
    )
    assert (
        m["latency"]["p50_ms"]["delta"] == -0.5 and m["latency"]["cost_per_1000"]["delta"] is None
    )
    title, blocks = comparison.comparison_report(m)
    keys = [
        c.key
        for b in blocks
        if hasattr(b, "rows")
        for row in b.rows
        for c in row
        if hasattr(c, "key")
    ]
    assert "headline.accuracy.delta" in keys
    assert all(lookup(m, k) is not None or "cost" in k for k in keys)


def _regression_comparison(gold, scores_a, scores_b, samples):
    examples = [InputExample(f"f-{i}", f"t{i}", None, str(g)) for i, g in enumerate(gold)]
    n = len(gold)
    data = ep.EvalData("f", examples, gold, None, None, None, np.full(n, 4), np.zeros(n, bool))
    info = ModelInfo("r", "regression", [], False, [], True, 16)
    results = []
    for scores in (scores_a, scores_b):
        r = classification.evaluate_regression(data, {"scores": scores}, info)
        r["model"] = {"name": "r", "label_names": [], "task_type": "regression", "path": "p"}
        r["data"] = {"file": "f", "examples": n}
        r["latency"] = {k: 1.0 for k in comparison.LATENCY_KEYS} | {
            "path": "p",
            "batch_size": 2,
            "machine_cost_per_hour": None,
        }
        results.append(r)
    return comparison.compare(data, *results, samples=samples)


def test_regression_comparison_report():
    from keras_bert.evaluation.report_writer import to_html

    gold = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    m = _regression_comparison(gold, gold + 0.5, gold - 1.0, samples=50)
    assert m["headline"]["mae"]["a"] == pytest.approx(0.5)
    assert m["headline"]["mae"]["delta"] == pytest.approx(0.5)
    assert m["headline"]["mse"]["delta"] == pytest.approx(0.75)
    assert m["per_class"] is None and m["disagreements"] is None
    assert m["slices"][0]["delta"] == pytest.approx(0.5)
    page = to_html(*comparison.comparison_report(m))
    assert 'data-key="headline.mae.delta">0.5000<' in page and "Where they disagree" not in page


def test_comparison_report_shows_dropped_resamples():
    from keras_bert.evaluation.report_writer import to_html, to_markdown

    m = _regression_comparison(GOLD6, A6, B6, samples=1000)
    pearson = m["headline"]["pearson"]
    assert pearson["dropped_resamples"] == 4 and m["bootstrap"]["min_valid_resamples"] == 40
    title, blocks = comparison.comparison_report(m)
    md = to_markdown(title, blocks)
    assert "| metric | A: r | B: r | delta | 95% CI | dropped resamples |" in md
    row = " | ".join(fmt(pearson[k]) for k in ("a", "b", "delta"))
    assert f"| pearson | {row} | [{fmt(pearson['ci_low'])}, {fmt(pearson['ci_high'])}] | 4 |" in md
    assert 'data-key="headline.pearson.dropped_resamples">4<' in to_html(title, blocks)
    small = _regression_comparison(
        np.array([0.0, 0.0, 0.0, 0.0, 1.0]),
        np.array([0.1, 0.2, 0.3, 0.4, 1.5]),
        np.array([0.5, 0.4, 0.3, 0.2, 1.1]),
        samples=50,
    )
    md = to_markdown(*comparison.comparison_report(small))
    assert "| not enough data: 39 of 50 resamples valid, an interval needs 40 | 11 |" in md
