"""A new task kind added in one file per layer (tests/toy_kind/: reader, task, signatures, family,
evidence kind, recipe; nothing else of the project edited) runs through the whole product: the
recipe trains it with the one fine-tuning driver and exports it, the export's signatures score
text, and recipes/evaluate.py builds its evidence pack, whose headline equals the metrics computed
here from the export's own outputs."""

import importlib
import json

import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from keras_bert.evaluation.kinds import evidence_kind
from keras_bert.training import arg_flags
from keras_bert.training.recipe import recipe_main
from tests.recipes.recipe_process import exported_run_flags, run_recipe_main, tiny_run_flags
from tests.toy_kind.family import FAMILY, TOLERANCE, ToyArgs

WORDS = ("good", "great", "fine", "bad", "awful", "poor")


def rows(n: int, seed: int) -> list[dict]:
    """Texts of 1-6 of WORDS; the score: the share of the first three among them."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        words = list(rng.choice(WORDS, rng.integers(1, 7)))
        out.append(
            {"text": " ".join(words), "score": sum(w in WORDS[:3] for w in words) / len(words)}
        )
    return out


def write_rows(path, items) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in items))
    return str(path)


def train(argv: list[str]) -> None:
    """The toy recipe's main in this process (its flags generated from `ToyArgs`)."""
    fv = flags.FlagValues()
    arg_flags.define_flags(ToyArgs, fv)
    fv(["toy_recipe", *argv])
    recipe_main(FAMILY, fv)(["toy_recipe"])


@pytest.fixture
def toy_kind(monkeypatch):
    """The toy evidence kind registered as importing its module does, for one test (the registry
    is restored after it: other tests see the built-in kinds only)."""
    monkeypatch.setattr(evidence_kind, "_KINDS", dict(evidence_kind._KINDS))
    evidence = importlib.import_module("tests.toy_kind.evidence")  # registers on first import
    return evidence_kind.register(evidence.TOY_SCORING)


def test_the_toy_kind_is_found_by_its_task_type(toy_kind):
    assert evidence_kind.kind_of("toy_scoring") is toy_kind


@pytest.mark.slow
def test_a_toy_kind_trains_exports_and_gets_an_evidence_pack(toy_kind, tmp_path, uncased_vocab):
    train_file = write_rows(tmp_path / "train.jsonl", rows(64, 0))
    dev = rows(24, 1)
    dev_file = write_rows(tmp_path / "dev.jsonl", dev)
    train(
        [
            *tiny_run_flags(uncased_vocab, max_seq_length=16, train_batch_size=16),
            "--num_train_epochs=2",
            f"--train_file={train_file}",
            f"--dev_file={dev_file}",
            *exported_run_flags(tmp_path / "run", tmp_path / "models", "toy"),
        ]
    )
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["monitor"] == "hit_rate" and metrics["best"]["epoch"] in (1, 2)
    (version,) = (tmp_path / "models" / "toy").iterdir()
    export_config = json.loads((version / "assets" / "export_config.json").read_text())
    assert export_config["task_type"] == "toy_scoring"

    texts = [r["text"] for r in dev]
    scores = (
        tf.saved_model.load(str(version))
        .signatures["serving_default"](text=tf.constant(texts))["score"]
        .numpy()
    )
    assert scores.shape == (24,) and ((scores > 0) & (scores < 1)).all()
    error = np.abs(scores - [r["score"] for r in dev])

    pack = tmp_path / "pack"
    run_recipe_main(
        "evaluate",
        "--noprogress",
        f"--model={version}",
        f"--data={dev_file}",
        f"--output_dir={pack}",
    )
    result = json.loads((pack / "metrics.json").read_text())
    assert result["model"]["task_type"] == "toy_scoring"
    assert result["headline"]["mae"] == pytest.approx(error.mean(), abs=1e-6)
    assert result["headline"]["hit_rate"] == pytest.approx(np.mean(error <= TOLERANCE))
    worst = result["failures"][0]
    assert worst["abs_error"] == pytest.approx(error.max(), abs=1e-6)
    assert worst["text"] == texts[int(error.argmax())]
    assert "the largest error first" in (pack / "report.html").read_text()
