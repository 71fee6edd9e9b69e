"""The peers' data programs (benchmarks/peers/ner_peer_data.py, squad_peer_data.py): scores of
predictions on our scorer, and predictions or settings that do not fit refused in one line."""

import json
import os
import subprocess
import sys

from benchmarks.peers import ner_peer_data
from tests.recipes.recipe_process import REPO

GOLD = [
    {"tokens": ["Ada", "Lovelace", "wrote"], "ner_tags": ["B-PER", "I-PER", "O"]},
    {"tokens": ["in", "London"], "ner_tags": ["O", "B-LOC"]},
]


def write_lines(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_module(module, *args):
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )


def test_ner_score_counts_entities_on_our_scorer(tmp_path):
    gold = write_lines(tmp_path / "valid.json", GOLD)
    tags = [["B-PER", "I-PER", "O"], ["O", "O"]]  # London missed
    predicted = [{"tokens": g["tokens"], "pred_tags": t} for g, t in zip(GOLD, tags)]
    metrics = ner_peer_data.score(gold, write_lines(tmp_path / "pred.json", predicted))
    assert (metrics["precision"], metrics["recall"], metrics["f1"]) == (1.0, 0.5, 2 / 3)
    assert (metrics["sentences"], metrics["words"]) == (2, 5)


def test_ner_predictions_of_other_sentences_are_refused_in_one_line(tmp_path):
    gold = write_lines(tmp_path / "valid.json", GOLD)
    pred = write_lines(tmp_path / "pred.json", [{"tokens": ["Ada"], "pred_tags": ["O"]}])
    proc = run_module(
        "benchmarks.peers.ner_peer_data",
        "--mode=score",
        f"--gold_file={gold}",
        f"--predictions_file={pred}",
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"ner_peer_data.py: error: {pred}: 1 sentences, but 2 in {gold}"
    )
    assert not (tmp_path / "metrics_valid.json").exists()


def test_squad_split_refuses_a_fraction_out_of_range_in_one_line(tmp_path):
    squad = write_lines(tmp_path / "train.json", [])  # never read: the fraction is checked first
    proc = run_module(
        "benchmarks.peers.squad_peer_data",
        f"--input_file={squad}",
        "--holdout_fraction=1.5",
        f"--output_dir={tmp_path / 'split'}",
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "squad_peer_data.py: error: --holdout_fraction must be in (0, 1), got 1.5"
    )
    assert not (tmp_path / "split").exists()
