"""recipes/evaluate.py end to end on tiny TextClassifiers: report numbers equal metrics.json, the
HTML report renders in headless Chromium, usage errors, --compare and the gRPC path."""

import hashlib
import html.parser
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from keras_bert.evaluation import behaviour, label_issues, predictors
from keras_bert.evaluation.diagnostic_sections import GATE_LEGEND, row_legend
from keras_bert.evaluation.provenance import model_fingerprint
from keras_bert.evaluation.report_writer import fmt, lookup
from tests.evaluation.tiny_task import (
    LABELS,
    NER_TAGS,
    TEXTS,
    heldout_rows,
    tiny_classifier,
    write_jsonl,
)
from tests.recipes.recipe_process import REPO, recipe_env, run_recipe, run_recipe_main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def run_evaluate(*args, timeout=400):
    """recipes/evaluate.py `args` without its progress bar, in a fresh CPU-only Python."""
    return run_recipe("evaluate.py", "--noprogress", *args, timeout=timeout)


@pytest.fixture(scope="module")
def models(tmp_path_factory, uncased_vocab):
    """A: fine-tuning-style output_dir (best_model.keras) and its SavedModel export; B: a 1-layer
    task file; the held-out file; A's own probabilities on it."""
    base = tmp_path_factory.mktemp("models")
    a = tiny_classifier(uncased_vocab, seed=1)
    (base / "run_a").mkdir()
    a.save(base / "run_a" / "best_model.keras")
    exported = pathlib.Path(a.export(base / "export", "tiny_a"))  # export returns a str
    b = tiny_classifier(uncased_vocab, seed=5, num_layers=1)
    b.save(base / "b.keras")
    data = write_jsonl(base / "heldout.jsonl", heldout_rows())
    return {
        "run_a": base / "run_a",
        "saved_a": exported,
        "b": base / "b.keras",
        "data": data,
        "probs_a": a.predict(TEXTS),
        "task_a": a,
        "probs_b": b.predict(TEXTS),
        "base": base,
    }


BEHAVIOUR_TESTS = [
    {
        "name": "praise",
        "type": "mft",
        "template": "a {adj} film",
        "fill": {"adj": ["great", "fine"]},
        "label": "pos",
    },
    {
        "name": "complaint lowers pos",
        "type": "dir",
        "texts": TEXTS[:4],
        "append": " i hated it",
        "label": "pos",
        "direction": "down",
    },
]


@pytest.fixture(scope="module")
def single_report(models, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    write_jsonl(models["base"] / "behaviour.jsonl", BEHAVIOUR_TESTS)
    train = models["base"] / "train.tsv"  # rows 0 (exact) and 3 (near) of the held-out set
    train.write_text(f"text\tlabel\n{TEXTS[0]}\tpos\n{TEXTS[3].upper()}!\tpos\nnew\tneg\n")
    proc = run_evaluate(
        f"--model={models['saved_a']}",
        f"--data={models['data']}",
        f"--train_data={train}",
        f"--behaviour_tests={models['base'] / 'behaviour.jsonl'}",
        "--slice_column=source",
        "--batch_size=5",
        "--machine_cost_per_hour=1.5",
        f"--output_dir={out}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


class KeyedNumbers(html.parser.HTMLParser):
    """data-key -> text of every <span data-key> in an HTML page."""

    def __init__(self):
        super().__init__()
        self.values, self._key = {}, None

    def handle_starttag(self, tag, attrs):
        self._key = dict(attrs).get("data-key") if tag == "span" else None

    def handle_data(self, data):
        if self._key:
            self.values.setdefault(self._key, "")
            self.values[self._key] += data

    def handle_endtag(self, tag):
        self._key = None


def keyed_numbers(page: str) -> dict:
    parser = KeyedNumbers()
    parser.feed(page)
    return parser.values


def assert_numbers_equal_metrics(values: dict, metrics: dict):
    assert values, "no numbers found"
    for key, text in values.items():
        assert text == fmt(lookup(metrics, key)), key


def test_metrics_json_is_the_models_own_predictions(models, single_report):
    metrics = json.loads((single_report / "metrics.json").read_text())
    pred = models["probs_a"].argmax(1)
    gold = np.arange(len(TEXTS)) % 3
    assert metrics["headline"]["accuracy"] == pytest.approx(np.mean(pred == gold))
    matrix = np.zeros((3, 3), int)
    np.add.at(matrix, (gold, pred), 1)
    assert metrics["confusion_matrix"] == matrix.tolist()
    assert [f["gold"] for f in metrics["failures"]] == [
        LABELS[g]
        for g in gold[pred != gold][
            np.argsort(-models["probs_a"].max(1)[pred != gold], kind="stable")
        ]
    ]
    assert metrics["model"]["path"] == "in-process SavedModel"
    assert metrics["latency"]["num_batches"] == 3 and metrics["latency"]["cost_per_1000"] > 0
    # Diagnostics, on the same probabilities.
    expected = label_issues.find_label_issues(gold, models["probs_a"], LABELS)
    got = metrics["label_issues"]
    assert len(got) == len(expected) > 0
    for issue, want in zip(got, expected):
        assert issue == want | {"score": pytest.approx(want["score"], rel=1e-4)}
        assert issue["given"] == LABELS[gold[issue["row"]]]
    overall = metrics["data_health"]["overall"]
    assert (overall["examples"], overall["truncated"], overall["unk_pieces"]) == (12, 1, 0)
    assert metrics["weak_segments"] == []  # 12 rows: no segment of >= 10 rows is significant
    leak = metrics["leakage"]
    assert (leak["exact"], leak["near"], [r["row"] for r in leak["rows"]]) == (1, 1, [0, 3])
    prov = metrics["provenance"]
    data_bytes = models["data"].read_bytes()
    assert prov["data"] == {
        "file": str(models["data"]),
        "sha256": hashlib.sha256(data_bytes).hexdigest(),
        "rows": 12,
        "label_distribution": {"neg": 4, "neutral": 4, "pos": 4},
    }
    assert prov["models"]["model"] == {"path": str(models["saved_a"])} | model_fingerprint(
        models["saved_a"]
    )
    assert prov["models"]["model"]["kind"] == "SavedModel"
    assert f"--data={models['data']}" in prov["command"] and "evaluate.py" in prov["command"]
    tests = behaviour.read_template_tests("\n".join(json.dumps(t) for t in BEHAVIOUR_TESTS), LABELS)
    expected = behaviour.run_behaviour(
        lambda t, tb: models["task_a"].predict(t), TEXTS, None, LABELS, tests
    )
    got = metrics["behaviour"]
    assert [(r["name"], r["type"], r["tested"], r["failures"]) for r in got] == [
        (r["name"], r["type"], r["tested"], r["failures"]) for r in expected
    ]
    assert [r["name"] for r in got] == [
        "typo",
        "punctuation",
        "name swap",
        "casing",
        "praise",
        "complaint lowers pos",
    ]
    assert (got[1]["tested"], got[4]["tested"], got[5]["tested"]) == (12, 2, 4)


def test_report_numbers_equal_metrics_json(single_report):
    metrics = json.loads((single_report / "metrics.json").read_text())
    page = (single_report / "report.html").read_text()
    values = keyed_numbers(page)
    assert_numbers_equal_metrics(values, metrics)
    assert {
        "headline.accuracy",
        "per_class.neg.f1",
        "confusion_matrix.2.1",
        "latency.p50_ms",
        "calibration.bins.9.count"
        if metrics["calibration"]["bins"][9]["count"]
        else "headline.ece",
        "slices.0.error_rate",
        "failures.0.confidence",
        "data_health.overall.unk_rate",
        "data_health.slices.0.truncation_rate",
        "leakage.exact",
        "provenance.data.rows",
        "behaviour.0.failure_rate",
        "behaviour.5.tested",
    } <= set(values)
    assert "label_issues.0.score" in values or not metrics["label_issues"]
    md = (single_report / "report.md").read_text()
    assert f"| accuracy | {fmt(metrics['headline']['accuracy'])} |" in md
    neg = metrics["per_class"]["neg"]
    assert (
        f"| neg | {' | '.join(fmt(neg[k]) for k in ('precision', 'recall', 'f1', 'support'))} |"
        in md
    )
    assert f"| p50 (ms) | {fmt(metrics['latency']['p50_ms'])} |" in md
    # 3 timed batches: no p95 or p99 (the slowest batch would stand in for them), and why.
    assert metrics["latency"]["p99_ms"] is None
    assert "| p99 (ms) | n/a (3 timed batches: a p99 needs at least 100) |" in md
    assert "![confusion matrix](confusion_matrix.png)" in md
    for png in ("confusion_matrix.png", "reliability.png"):
        assert (single_report / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert 'src="data:image/png;base64,' in page and "http" not in page.replace(
        "http-equiv", ""
    )  # self-contained


PROBE = """<script>
window.addEventListener("load", () => {
  for (const img of document.images) {
    const c = document.createElement("canvas");
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    let ink = 0;
    if (c.width) {
      const g = c.getContext("2d"); g.drawImage(img, 0, 0);
      const d = g.getImageData(0, 0, c.width, c.height).data;
      for (let i = 0; i < d.length; i += 4) if (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200) ink++;
    }
    img.setAttribute("data-rendered",
                     [img.complete, img.naturalWidth, img.naturalHeight, ink].join(" "));
  }
  document.body.setAttribute("data-probe", "done");
});
</script>"""


def chromium(url, profile):
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=5000",
        "--dump-dom",
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


ROW_LEGEND = (
    "row: the 0-based data row of the held-out file (the header and blank JSON Lines lines not "
    "counted); every row number in this report and metrics.json's row count this way."
)


def tables_and_legends(markdown: str) -> list[tuple[list[str], str]]:
    """(the lines of each table, the line under it: its legend or "") of a report.md."""
    lines, out, i = markdown.split("\n"), [], 0
    while i < len(lines):
        if not lines[i].startswith("|"):
            i += 1
            continue
        start = i
        while i < len(lines) and lines[i].startswith("|"):
            i += 1
        under = lines[i + 1] if i + 1 < len(lines) else ""
        out.append((lines[start:i], under if under.startswith("Legend: ") else ""))
    return out


def test_report_numbers_rows_one_way_and_defines_its_status_words(single_report):
    m = json.loads((single_report / "metrics.json").read_text())
    md = (single_report / "report.md").read_text()
    assert row_legend(m) == ROW_LEGEND
    # One numbering: the 0-based data row (TEXTS[i] is data row i), never the file's line.
    assert (
        "heldout.jsonl-" not in md
        and "heldout.jsonl-" not in (single_report / "report.html").read_text()
    )
    tables = tables_and_legends(md)
    failures = next(t for t in tables if t[0][0].startswith("| row | text |"))
    shown = [line.split(" | ")[:2] for line in failures[0][2:]]
    assert shown == [[f"| {f['row']}", TEXTS[f["row"]]] for f in m["failures"]]
    issues = next(t for t in tables if t[0][0] == "| row | given | suggested | score |")
    assert [line.split(" | ")[:2] for line in issues[0][2:]] == [
        [f"| {x['row']}", LABELS[x["row"] % 3]] for x in m["label_issues"]
    ]  # the given label of that data row of heldout_rows()
    leaks = next(t for t in tables if t[0][0].startswith("| held-out row | training row |"))
    assert [line.split(" | ")[:2] for line in leaks[0][2:]] == [["| 0", "0"], ["| 3", "1"]]
    for lines, legend in tables:  # every table that shows row numbers says how they count
        if "row" in lines[0].split(" | ")[0]:
            assert ROW_LEGEND in legend, lines[0]
    # Every status word that marks a row is defined in the legend under its table.
    behaviour_table = next(t for t in tables if t[0][0].startswith("| test | type | tested |"))
    assert behaviour_table[1] == (
        "Legend: tested: inputs the test ran on; failures: those that failed; failing: the test "
        "has at least one failure, however few (the failure rate says how many); n/a: no input "
        "to test."
    )
    for lines, legend in tables:
        for line in lines:
            if "** (" in line:
                mark = line.split("** (")[1].split(")")[0]
                assert f"{mark}: " in legend, line
    slices = next(t for t in tables if t[0][0].startswith("| slice | value | examples | errors"))
    assert slices[1] == (
        "Legend: flagged: the slice's error is far above the overall one: it has at least 5 "
        "examples and a one-sided binomial test of its errors against the overall error rate "
        "gives p < 0.05."
    )


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium not installed (scripts/test.sh installs Debian's chromium when run as "
    "root; here it was not root, was told KERAS_BERT_NO_CHROMIUM=1, or the install failed)",
)
def test_html_report_in_headless_chromium(single_report, tmp_path):
    page = (single_report / "report.html").read_text()
    probed = tmp_path / "report.html"
    probed.write_text(page.replace("</body>", PROBE + "</body>"))
    proc = chromium(probed.as_uri(), tmp_path / "profile")
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    dom = proc.stdout
    assert 'data-probe="done"' in dom
    rendered = [line.split('data-rendered="')[1].split('"')[0] for line in dom.split("<img")[1:]]
    assert len(rendered) == 2
    for r in rendered:
        complete, width, height, ink = r.split()
        assert complete == "true" and int(width) > 100 and int(height) > 100 and int(ink) > 1000, r
    metrics = json.loads((single_report / "metrics.json").read_text())
    values = keyed_numbers(dom)  # numbers as the browser's DOM holds them
    assert values == keyed_numbers(page)
    assert_numbers_equal_metrics(values, metrics)


def test_missing_column_is_a_usage_error(models, tmp_path):
    proc = run_evaluate(
        f"--model={models['run_a']}",
        f"--data={models['data']}",
        "--text_column=sentence",
        f"--output_dir={tmp_path / 'out'}",
    )
    assert proc.returncode == 2
    assert "missing key(s) ['sentence']; keys present: ['label', 'source', 'text']" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("case", ["unknown_label", "names_and_ids", "empty_file"])
def test_bad_data_is_a_usage_error(models, tmp_path, case):
    if case == "unknown_label":
        rows = heldout_rows()
        rows[2]["label"] = "mixed"
        data = write_jsonl(tmp_path / "d.jsonl", rows)
        message = f"{data}: data row 2 (0-based): label 'mixed' is neither a label name nor an id; "
    elif case == "names_and_ids":  # names in rows 0-1, then ids: one rule, one message (labels.py)
        rows = heldout_rows()[:4]
        rows[2]["label"], rows[3]["label"] = "2", "0"
        data = write_jsonl(tmp_path / "d.jsonl", rows)
        message = (
            f"{data}: data row 2 (0-based): label '2' is an id but data row 0 is the name "
            "'neg'; give every label as a name of ['neg', 'neutral', 'pos'] or every label "
            "as an id 0..2, not a mix\n"
        )
    else:
        data, message = tmp_path / "d.tsv", "empty file"
        data.write_text("text\tlabel\n")
    proc = run_evaluate(f"--model={models['run_a']}", f"--data={data}", f"--output_dir={tmp_path}")
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_compare_two_models(models, tmp_path):
    out = tmp_path / "cmp"
    proc = run_evaluate(
        f"--model={models['run_a']}",
        f"--compare={models['b']}",
        f"--data={models['data']}",
        "--slice_column=source",
        "--batch_size=4",
        "--bootstrap_samples=200",
        "--machine_cost_per_hour=2",
        f"--output_dir={out}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((out / "metrics.json").read_text())
    gold = np.arange(len(TEXTS)) % 3
    pa, pb = models["probs_a"].argmax(1), models["probs_b"].argmax(1)
    acc = m["headline"]["accuracy"]
    assert acc["a"] == pytest.approx(np.mean(pa == gold))
    assert acc["b"] == pytest.approx(np.mean(pb == gold))
    assert acc["delta"] == pytest.approx(acc["b"] - acc["a"])
    assert acc["ci_low"] <= acc["delta"] <= acc["ci_high"]
    d = m["disagreements"]
    assert d["count"] == int(np.sum(pa != pb))
    assert d["a_right"] == int(np.sum((pa != pb) & (pa == gold)))
    assert d["b_right"] == int(np.sum((pa != pb) & (pb == gold)))
    assert m["models"]["a"]["path"] == "in-process task (keras)"
    for row, ra, rb in zip(m["behaviour"], m["a"]["behaviour"], m["b"]["behaviour"]):
        assert (row["failure_rate_a"], row["failure_rate_b"]) == (
            ra["failure_rate"],
            rb["failure_rate"],
        )
        fails = {(True, True): "both", (True, False): "A", (False, True): "B"}
        assert row["fails"] == fails.get((ra["failures"] > 0, rb["failures"] > 0), "neither")
    assert [r["name"] for r in m["behaviour"]] == ["typo", "punctuation", "name swap", "casing"]
    assert set(m["provenance"]["models"]) == {"model", "compare"}
    p50 = m["latency"]["p50_ms"]
    assert p50["delta"] == pytest.approx(m["b"]["latency"]["p50_ms"] - m["a"]["latency"]["p50_ms"])
    assert_numbers_equal_metrics(keyed_numbers((out / "report.html").read_text()), m)
    md = (out / "report.md").read_text()
    assert "| metric | A: run_a | B: b.keras | delta | 95% CI |" in md
    assert "heldout.jsonl-" not in md  # the disagreements by 0-based data row, as every row
    lines, legend = next(t for t in tables_and_legends(md) if t[0][0].startswith("| row | text |"))
    assert [line.split(" | ")[:2] for line in lines[2:]] == [
        [f"| {r['row']}", TEXTS[r["row"]]] for r in d["examples"]
    ]
    assert legend == (
        "Legend: right: the model whose prediction equals the gold one (neither: both are "
        f"wrong). {ROW_LEGEND}"
    )
    row = " | ".join(fmt(acc[k]) for k in ("a", "b", "delta"))
    assert f"| accuracy | {row} | [{fmt(acc['ci_low'])}, {fmt(acc['ci_high'])}] |" in md
    for png in ("confusion_a.png", "confusion_b.png", "reliability.png", "per_class_f1.png"):
        assert (out / png).is_file()


@pytest.mark.slow
def test_evaluate_through_a_grpc_server(models, tmp_path):
    from tests.serving.conftest import ServerProcess

    server = ServerProcess(
        ["--model_name=tiny_a", f"--model_base_path={models['saved_a'].parent}"],
        tmp_path / "server.log",
        rest=False,
    )
    try:
        server.wait_serving()
        proc = run_evaluate(
            f"--model={models['saved_a']}",
            f"--server={server.grpc_target}",
            f"--data={models['data']}",
            "--batch_size=4",
            f"--output_dir={tmp_path / 'out'}",
        )
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert m["model"]["path"] == f"gRPC {server.grpc_target} (model tiny_a)"
    pred = models["probs_a"].argmax(1)
    assert m["headline"]["accuracy"] == pytest.approx(np.mean(pred == np.arange(len(TEXTS)) % 3))
    errors = pred != np.arange(len(TEXTS)) % 3
    np.testing.assert_allclose(
        sorted(f["confidence"] for f in m["failures"]),
        sorted(models["probs_a"].max(1)[errors]),
        rtol=1e-4,
    )


def run_export(*args):
    return subprocess.run(
        [sys.executable, "-m", "export", *map(str, args)],
        cwd=REPO,
        env=recipe_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def write_gate(path, checks):
    path.write_text(json.dumps({"checks": checks}))
    return path


def test_failing_gate_is_not_blessed_and_export_refuses(models, single_report, tmp_path):
    gate = write_gate(
        tmp_path / "gate.json",
        [
            {"metric": "headline.accuracy", "min": 0.0},
            {"metric": "per_class.*.recall", "max_decrease": 0.0},  # same model: no change
            {"metric": "latency.mean_ms", "max": 0.001},  # fails: no model is that fast
            {"metric": "latency.p99_ms", "max": 1e9},  # fails: too few batches to measure it
        ],
    )
    out = tmp_path / "gated"
    proc = run_evaluate(
        f"--model={models['saved_a']}",
        f"--data={models['data']}",
        f"--gate={gate}",
        f"--baseline={single_report}",
        f"--output_dir={out}",
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    m = json.loads((out / "metrics.json").read_text())
    record = json.loads((out / "NOT_BLESSED").read_text())
    assert not (out / "BLESSED").exists() and record["blessed"] is False
    assert [(c["metric"], c["pass"]) for c in record["checks"]] == [
        ("headline.accuracy", True),
        ("per_class.neg.recall", True),
        ("per_class.neutral.recall", True),
        ("per_class.pos.recall", True),
        ("latency.mean_ms", False),
        ("latency.p99_ms", False),
    ]
    assert record["checks"][4]["value"] == m["latency"]["mean_ms"]
    batches = m["latency"]["num_batches"]
    assert record["checks"][5]["reason"] == (
        f"{batches} timed batch{'' if batches == 1 else 'es'}: a p99 needs at least 100"
    )
    assert record["checks"] == m["gate"]["checks"]
    assert record["model"] == m["provenance"]["models"]["model"]
    assert f"NOT_BLESSED ({out / 'NOT_BLESSED'}): latency.mean_ms = " in proc.stderr
    assert_numbers_equal_metrics(keyed_numbers((out / "report.html").read_text()), m)
    md = (out / "report.md").read_text()
    assert "## Release gate: NOT_BLESSED" in md and "| **latency.mean_ms** (FAIL) |" in md
    # The verdict comes first, right after the one-line introduction, with what the latency was
    # measured on.
    sections = [line for line in md.splitlines() if line.startswith("## ")]
    assert sections[0] == "## Release gate: NOT_BLESSED"
    assert f"Latency measured on {batches} timed batches of " in md and " cores" in md
    assert f"Legend: {GATE_LEGEND}" in md  # pass, FAIL, BLESSED, NOT_BLESSED defined
    refused = run_export(
        f"--model_dir={models['run_a']}",
        f"--export_base={tmp_path / 'exports'}",
        "--model_name=a",
        f"--require_blessing={out}",
    )
    assert refused.returncode == 2 and f"{out} is NOT_BLESSED: latency.mean_ms = " in refused.stderr
    assert not (tmp_path / "exports").exists()


def test_gate_usage_errors(models, tmp_path):
    gate = write_gate(tmp_path / "gate.json", [{"metric": "headline.accuracy", "max_decrease": 0}])
    common = [f"--model={models['run_a']}", f"--data={models['data']}", f"--output_dir={tmp_path}"]
    proc = run_evaluate(*common, f"--gate={gate}")
    assert proc.returncode == 2
    assert "change checks (max_decrease, max_increase): give --baseline=REPORT_DIR" in proc.stderr
    proc = run_evaluate(*common, f"--baseline={tmp_path}")
    assert proc.returncode == 2 and proc.stderr.endswith(
        "evaluate.py: error: --baseline acts only with --gate (the reference of the gate's "
        "change thresholds); it would be ignored\n"
    )


@pytest.mark.slow
def test_blessed_task_exports_and_another_model_is_refused(models, tmp_path):
    gate = write_gate(tmp_path / "gate.json", [{"metric": "headline.accuracy", "min": 0.0}])
    out = tmp_path / "gated"
    proc = run_evaluate(
        f"--model={models['run_a']}",
        f"--data={models['data']}",
        f"--gate={gate}",
        f"--output_dir={out}",
    )
    assert proc.returncode == 0 and "BLESSED (" in proc.stdout, proc.stderr[-3000:]
    record = json.loads((out / "BLESSED").read_text())
    fp = hashlib.sha256((models["run_a"] / "best_model.keras").read_bytes()).hexdigest()
    assert record["model"]["fingerprint"] == f"sha256:{fp}"
    refused = run_export(
        f"--model_dir={models['b']}",
        f"--export_base={tmp_path / 'exports'}",
        "--model_name=b",
        f"--require_blessing={out}",
    )
    assert refused.returncode == 2 and "evaluate the model you export" in refused.stderr
    done = run_export(
        f"--model_dir={models['run_a']}",
        f"--export_base={tmp_path / 'exports'}",
        "--model_name=a",
        f"--require_blessing={out}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "exports" / "a" / "1" / "saved_model.pb").is_file()


# The "model" records of reports of other kinds than run_a (a classifier over LABELS, fractions),
# and the one line each baseline is refused with.
OTHER_BASELINES = {
    "regression": (
        {"task_type": "regression", "label_names": []},
        "cannot compare a classification model (run_a) with a regression model (base.keras)",
    ),
    "token_classification": (
        {"task_type": "token_classification", "label_names": NER_TAGS},
        "cannot compare a classification model (run_a) with a token_classification model "
        "(base.keras)",
    ),
    "span_question_answering": (
        {"task_type": "span_question_answering", "label_names": [], "metric_scale": "percent"},
        "cannot compare a classification model (run_a) with a span_question_answering model "
        "(base.keras)",
    ),
    "multiple_choice": (
        {"task_type": "multiple_choice", "label_names": []},
        "cannot compare a classification model (run_a) with a multiple_choice model (base.keras)",
    ),
    "other labels": (
        {"task_type": "classification", "label_names": ["neg", "pos"]},
        "the models have different label names: run_a ['neg', 'neutral', 'pos'], base.keras "
        "['neg', 'pos']",
    ),
    "another scale": (
        {"task_type": "classification", "label_names": LABELS, "metric_scale": "percent"},
        "the models' metrics are on different scales: run_a fraction, base.keras percent "
        "(fraction: 0-1, percent: 0-100)",
    ),
}


class Unrun(predictors.Predictor):
    """A model that is never to be run: what it is (`info`), and a test failure if it predicts."""

    def __init__(self, name, labels):
        self.info = predictors.ModelInfo(name, "classification", labels, False, [], True, 16)

    def predict_inputs(self, inputs):
        raise AssertionError("a prediction was made")


def refusal_before_any_prediction(monkeypatch, capsys, tmp_path, *flags) -> str:
    """The usage error of evaluate.py's `main` run in this process with `flags` on the held-out
    file, where --model opens run_a (LABELS) and --compare base.keras (neg, pos), both `Unrun`;
    returns the stderr line."""
    models = {"run_a": Unrun("run_a", LABELS), "base.keras": Unrun("base.keras", ["neg", "pos"])}
    monkeypatch.setattr(predictors, "open_predictor", lambda path, *args: models[path])
    monkeypatch.setattr(sys, "argv", ["evaluate.py"])  # the program name of the message
    data = write_jsonl(tmp_path / "heldout.jsonl", heldout_rows())
    with pytest.raises(SystemExit) as e:
        run_recipe_main(
            "evaluate", "--noprogress", f"--data={data}", f"--output_dir={tmp_path / 'out'}", *flags
        )
    assert e.value.code == 2 and not (tmp_path / "out").exists()
    return capsys.readouterr().err


@pytest.mark.parametrize("kind", list(OTHER_BASELINES))
def test_gate_refuses_a_baseline_of_another_kind(tmp_path, monkeypatch, capsys, kind):
    measured, message = OTHER_BASELINES[kind]
    baseline = tmp_path / "baseline"
    baseline.mkdir()
    record = {"name": "base.keras", "path": "in-process task (keras)", "max_seq_length": 16}
    (baseline / "metrics.json").write_text(
        json.dumps({"model": record | measured, "headline": {"accuracy": 0.5}})
    )
    gate = write_gate(tmp_path / "gate.json", [{"metric": "headline.accuracy", "max_decrease": 0}])
    err = refusal_before_any_prediction(
        monkeypatch, capsys, tmp_path, "--model=run_a", f"--gate={gate}", f"--baseline={baseline}"
    )
    assert err == f"evaluate.py: error: --baseline {baseline}: {message}\n"


def test_compare_refuses_by_the_same_rule(tmp_path, monkeypatch, capsys):
    err = refusal_before_any_prediction(
        monkeypatch, capsys, tmp_path, "--model=run_a", "--compare=base.keras"
    )
    assert err == f"evaluate.py: error: {OTHER_BASELINES['other labels'][1]}\n"


def test_a_baseline_that_is_no_one_model_report_is_refused(tmp_path, monkeypatch, capsys):
    baseline = tmp_path / "cmp"  # a --compare report: "models", no "model"
    baseline.mkdir()
    (baseline / "metrics.json").write_text(json.dumps({"models": {}, "headline": {}}))
    gate = write_gate(tmp_path / "gate.json", [{"metric": "headline.accuracy", "min": 0}])
    err = refusal_before_any_prediction(
        monkeypatch, capsys, tmp_path, "--model=run_a", f"--gate={gate}", f"--baseline={baseline}"
    )
    assert err == (
        f"evaluate.py: error: --baseline {baseline}: its metrics.json is not a one-model "
        "evaluation report (no model record); give the report of recipes/evaluate.py on one "
        "model\n"
    )
