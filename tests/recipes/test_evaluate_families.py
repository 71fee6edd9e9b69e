"""recipes/evaluate.py on the other task families: the model (an export or a saved task) tells the
recipe its family, the data file is the training reader's format, and one --compare run holds both
models' packs, whose headline metrics equal the reference scorer on each model's own predictions."""

import json

import numpy as np
import pytest
from official.nlp.tools import squad_evaluate_v2_0
from seqeval import metrics as sm

from keras_bert.data.conll import read_conll
from keras_bert.data.swag import read_swag
from tests.evaluation.tiny_task import (
    CONLL,
    SWAG_CSV,
    squad_json,
    tiny_chooser,
    tiny_reader,
    tiny_tagger,
)
from tests.recipes.test_evaluate import (
    CHROMIUM,
    PROBE,
    assert_numbers_equal_metrics,
    chromium,
    keyed_numbers,
    run_evaluate,
)


def check_comparison(out, headline_keys):
    """The comparison's report numbers equal its metrics.json; returns the metrics."""
    metrics = json.loads((out / "metrics.json").read_text())
    assert_numbers_equal_metrics(keyed_numbers((out / "report.html").read_text()), metrics)
    for key in headline_keys:
        row = metrics["headline"][key]
        assert row["a"] == pytest.approx(metrics["a"]["headline"][key])
        assert row["b"] == pytest.approx(metrics["b"]["headline"][key])
        assert row["delta"] == pytest.approx(row["b"] - row["a"])
        assert row["ci_low"] <= row["ci_high"] and row["dropped_resamples"] == 0
    assert metrics["latency"]["mean_ms"]["a"] > 0 and metrics["latency"]["mean_ms"]["b"] > 0
    assert metrics["provenance"]["data"]["rows"] == metrics["data"]["examples"]
    return metrics


def check_in_chromium(out, tmp_path, images):
    """report.html in headless Chromium: no console message, `images` non-blank plots, the DOM's
    numbers equal to metrics.json (skipped where Chromium is missing, as in test_evaluate)."""
    if CHROMIUM is None:
        return
    probed = tmp_path / "probed.html"
    probed.write_text((out / "report.html").read_text().replace("</body>", PROBE + "</body>"))
    proc = chromium(probed.as_uri(), tmp_path / "profile")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [line for line in proc.stderr.splitlines() if ":CONSOLE" in line] == []
    assert 'data-probe="done"' in proc.stdout
    rendered = [r.split('data-rendered="')[1].split('"')[0] for r in proc.stdout.split("<img")[1:]]
    assert len(rendered) == images
    for r in rendered:
        complete, width, height, ink = r.split()
        assert complete == "true" and int(width) > 100 and int(height) > 100 and int(ink) > 1000, r
    metrics = json.loads((out / "metrics.json").read_text())
    assert_numbers_equal_metrics(keyed_numbers(proc.stdout), metrics)


def test_ner_export_against_saved_task(tmp_path, uncased_vocab):
    a, b = tiny_tagger(uncased_vocab, seed=2), tiny_tagger(uncased_vocab, seed=4)
    export = a.export(tmp_path / "export", "tagger")
    b.save(tmp_path / "b.keras")
    data, train = tmp_path / "test.txt", tmp_path / "train.txt"
    data.write_text(CONLL)
    train.write_text("Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n\nnew NN O O\n")
    out = tmp_path / "report"
    proc = run_evaluate(
        f"--model={export}",
        f"--compare={tmp_path / 'b.keras'}",
        f"--data={data}",
        f"--train_data={train}",
        "--batch_size=4",
        f"--output_dir={out}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = check_comparison(out, ("f1", "precision", "recall"))
    sentences = read_conll(data)
    gold = [list(s.tags) for s in sentences]
    for key, task in (("a", a), ("b", b)):
        own = task.predict_word_lists([list(s.words) for s in sentences])
        assert metrics[key]["headline"]["f1"] == pytest.approx(sm.f1_score(gold, own))
        assert metrics[key]["headline"]["recall"] == pytest.approx(sm.recall_score(gold, own))
        assert metrics[key]["model"]["task_type"] == "token_classification"
    assert metrics["models"]["a"]["path"] == "in-process SavedModel"
    assert metrics["leakage"]["exact"] == 1 and metrics["leakage"]["rows"][0]["row"] == 1
    assert "by_sentence_length" in metrics["a"] and "entity_errors" in metrics["b"]
    disagree = metrics["disagreements"]
    assert disagree["count"] == sum(r["a"] != r["b"] for r in disagree["examples"]) and disagree[
        "count"
    ] <= len(sentences)
    assert np.isfinite(metrics["headline"]["f1"]["delta"])
    # Label issues need the saved task's probabilities: B (.keras) has them, the export A none.
    assert "label_issues" not in metrics["a"]
    for issue in metrics["b"]["label_issues"]:
        assert issue["word"] == sentences[issue["row"]].words[issue["token"]]
        assert issue["given"] == gold[issue["row"]][issue["token"]] != issue["suggested"]
    assert_which_fails(metrics)
    check_in_chromium(out, tmp_path, images=1)  # the per-type F1 bar chart


def assert_which_fails(metrics, names=("typo", "punctuation", "name swap", "casing")):
    """The invariance tests `names` ran for both models and the comparison says which fails
    which."""
    assert sum(r["tested"] for r in metrics["behaviour"]) > 0
    assert [r["name"] for r in metrics["behaviour"]] == list(names)
    for row, ra, rb in zip(
        metrics["behaviour"], metrics["a"]["behaviour"], metrics["b"]["behaviour"]
    ):
        assert row["tested"] == ra["tested"] == rb["tested"]
        fails = {(True, True): "both", (True, False): "A", (False, True): "B"}
        assert row["fails"] == fails.get((ra["failures"] > 0, rb["failures"] > 0), "neither")


def test_squad_v2_run_dir_against_saved_task(tmp_path, uncased_vocab):
    a = tiny_reader(uncased_vocab, seed=3)
    b = tiny_reader(uncased_vocab, seed=6)
    (tmp_path / "run_a").mkdir()
    a.save(tmp_path / "run_a" / "best_model.keras")  # a fine-tuning output_dir
    b.save(tmp_path / "b.keras")
    raw = squad_json(version_2=True)
    data = tmp_path / "dev.json"
    data.write_text(json.dumps(raw))
    out = tmp_path / "report"
    proc = run_evaluate(
        f"--model={tmp_path / 'run_a'}",
        f"--compare={tmp_path / 'b.keras'}",
        f"--data={data}",
        "--batch_size=4",
        f"--output_dir={out}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = check_comparison(out, ("exact_match", "f1"))
    qas = [(qa, p["context"]) for x in raw["data"] for p in x["paragraphs"] for qa in p["qas"]]
    for key, task in (("a", a), ("b", b)):
        own = task.predict_texts([qa["question"] for qa, _ in qas], [c for _, c in qas])
        official = squad_evaluate_v2_0.evaluate(
            raw["data"], {qa["id"]: o["answer_text"] for (qa, _), o in zip(qas, own)}
        )
        assert metrics[key]["headline"]["exact_match"] == pytest.approx(official["exact"])
        assert metrics[key]["headline"]["f1"] == pytest.approx(official["f1"])
        assert metrics[key]["squad"]["NoAns_total"] == 2
    assert {s["family"] for s in metrics["slices"]} >= {"question word", "answer length (words)"}
    assert metrics["provenance"]["data"]["label_distribution"] == {
        "answerable": 6,
        "unanswerable": 2,
    }
    assert_which_fails(metrics, ("typo", "punctuation", "casing"))  # questions perturbed


def test_swag_saved_tasks_compared(tmp_path, uncased_vocab):
    a, b = tiny_chooser(uncased_vocab, seed=5), tiny_chooser(uncased_vocab, seed=7)
    a.save(tmp_path / "a.keras")
    b.save(tmp_path / "b.keras")
    data = tmp_path / "val.csv"
    data.write_text(SWAG_CSV)
    out = tmp_path / "report"
    proc = run_evaluate(
        f"--model={tmp_path / 'a.keras'}",
        f"--compare={tmp_path / 'b.keras'}",
        f"--data={data}",
        "--slice_column=gold-source",
        "--bootstrap_samples=200",
        f"--output_dir={out}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = check_comparison(out, ("accuracy",))
    examples = read_swag(data)
    gold = np.asarray([e.label for e in examples])
    inputs = ([e.context for e in examples], [e.second_segments() for e in examples])
    chosen = {key: task.predict(inputs).argmax(1) for key, task in (("a", a), ("b", b))}
    for key in ("a", "b"):
        assert metrics[key]["headline"]["accuracy"] == pytest.approx(np.mean(chosen[key] == gold))
    differ = np.flatnonzero(chosen["a"] != chosen["b"])
    assert metrics["disagreements"]["count"] == len(differ)
    assert [r["guid"] for r in metrics["disagreements"]["examples"]] == [
        examples[i].example_id for i in differ
    ]
    assert metrics["provenance"]["data"]["label_distribution"] == {"0": 5, "1": 1}
    assert_which_fails(metrics)
