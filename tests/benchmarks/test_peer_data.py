"""The peers' data programs (benchmarks/peers/ner_peer_data.py, squad_peer_data.py): scores of
predictions on our scorer, and predictions or settings that do not fit refused in one line."""

import json

import pytest

from benchmarks.peers import ner_peer_data, squad_peer_data
from tests.recipes.recipe_process import run_module

GOLD = [
    {"tokens": ["Ada", "Lovelace", "wrote"], "ner_tags": ["B-PER", "I-PER", "O"]},
    {"tokens": ["in", "London"], "ner_tags": ["O", "B-LOC"]},
]


def write_lines(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


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


def test_ner_predictions_without_their_tags_are_refused_naming_the_sentence(tmp_path):
    gold = write_lines(tmp_path / "valid.json", GOLD)
    rows = [{"tokens": GOLD[0]["tokens"], "pred_tags": ["O"] * 3}, {"tokens": GOLD[1]["tokens"]}]
    pred = write_lines(tmp_path / "pred.json", rows)
    with pytest.raises(ValueError) as refused:
        ner_peer_data.score(gold, pred)
    assert str(refused.value) == f'{pred}: sentence 1 has no "pred_tags"'
    write_lines(gold, [GOLD[0], {"tokens": GOLD[1]["tokens"]}])
    with pytest.raises(ValueError) as refused:
        ner_peer_data.score(gold, pred)
    assert str(refused.value) == f'{gold}: sentence 1 has no "ner_tags"'


def test_ner_write_reads_the_conll_files_before_making_the_output_dir(tmp_path):
    (tmp_path / "conll").mkdir()
    with pytest.raises(FileNotFoundError, match="conll lacks train.txt, valid.txt, test.txt"):
        ner_peer_data.write_splits(str(tmp_path / "conll"), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


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


def test_squad_split_examples_refuses_a_fraction_out_of_range(tmp_path):
    # In process: squad_peer_data defines its flags when it runs, never at import (test_imports)
    squad = write_lines(tmp_path / "train.json", [])  # never read: the fraction is checked first
    with pytest.raises(ValueError) as refused:
        squad_peer_data.split_examples(squad, 1.5, False)
    assert str(refused.value) == "--holdout_fraction must be in (0, 1), got 1.5"


def squad_article(title, context, questions):
    qas = [
        {"id": i, "question": q, "answers": [{"text": a, "answer_start": context.index(a)}]}
        for i, q, a in questions
    ]
    return {"title": title, "paragraphs": [{"context": context, "qas": qas}]}


def test_squad_score_writes_the_official_metrics_of_the_held_out_questions(tmp_path):
    # Two titles; --holdout_fraction=0.5 holds out the last one (q2, q3).
    london = "London is the capital city of England."
    dev = tmp_path / "dev.json"
    dev.write_text(
        json.dumps(
            {
                "version": "1.1",
                "data": [
                    squad_article(
                        "Ada", "Ada Lovelace wrote it.", [("q1", "Who?", "Ada Lovelace")]
                    ),
                    squad_article(
                        "London",
                        london,
                        [("q2", "What?", "the capital city of England"), ("q3", "Of?", "England")],
                    ),
                ],
            }
        )
    )
    peer = tmp_path / "peer"
    peer.mkdir()
    args = ["--mode=score", f"--input_file={dev}", "--holdout_fraction=0.5"]
    args.append(f"--predictions_dir={peer}")
    missing = run_module("benchmarks.peers.squad_peer_data", *args)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1] == (
        f"squad_peer_data.py: error: {peer}/predictions.json: not found (did the peer finish?)"
    )
    assert not (peer / "metrics.json").exists()

    # q2 half right ("the" is not counted: P 1, R 1/2, F1 2/3), q3 exact
    (peer / "predictions.json").write_text(json.dumps({"q2": "the capital city", "q3": "England"}))
    proc = run_module("benchmarks.peers.squad_peer_data", *args)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((peer / "metrics.json").read_text())
    assert metrics == {
        "exact_match": 50.0,
        "f1": 100 * (2 / 3 + 1) / 2,
        "scored_examples": 2,
        "version_2_with_negative": False,
    }
