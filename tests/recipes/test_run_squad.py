"""Smoke test of recipes/run_squad.py on a tiny config (real SQuAD v2.0 dev subset), and bad flags."""

import json
import math

import pytest
import tensorflow as tf

from keras_bert.data import squad, squad_answers
from keras_bert.metrics import squad as squad_eval
from keras_bert.tasks import SpanQuestionAnswerer, load_task
from keras_bert.training import trainer
from keras_bert.training.families.squad import FAMILY, SquadArgs
from tests.recipes.finished_run import assert_finished_run_dir, result_line
from tests.recipes.kill_resume import assert_killed_and_resumed_like_uninterrupted
from tests.recipes.recipe_process import REPO, exported_run_flags, run_recipe, tiny_run_flags


def tiny_squad_flags(data_dir, vocab_file) -> list[str]:
    """The data and size flags of both runs here: the real SQuAD v2.0 dev subset as train and
    predict file (half held out), 4 questions trained, 5 predicted, 5 of the last quarter of the
    training articles as the dev split that chooses the null threshold, bert_tiny over
    `vocab_file` in 64-piece windows (stride 32, questions of <= 16 pieces), batches of 16."""
    squad_file = data_dir / "squad" / "dev-v2.0-subset.json"
    return [
        f"--train_file={squad_file}",
        f"--predict_file={squad_file}",
        "--version_2_with_negative",
        "--holdout_fraction=0.5",
        "--max_train_examples=4",
        "--max_eval_examples=5",
        "--null_threshold_dev_fraction=0.25",
        *tiny_run_flags(vocab_file, 64, 16),
        "--doc_stride=32",
        "--max_query_length=16",
    ]


@pytest.mark.slow
def test_tiny_run_writes_predictions_metrics_and_export(tmp_path, data_dir, uncased_vocab):
    squad_file = data_dir / "squad" / "dev-v2.0-subset.json"
    out, export_base = tmp_path / "out", tmp_path / "models"
    proc = run_recipe(
        "run_squad.py",
        *tiny_squad_flags(data_dir, uncased_vocab),
        "--num_train_epochs=1",
        "--verbose=0",
        *exported_run_flags(out, export_base, "qa_tiny"),
        timeout=500,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = json.loads((out / "config.json").read_text())
    assert config["doc_stride"] == 32 and config["version_2_with_negative"] is True
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["train_examples"] == 4 and metrics["predict_examples"] == 5
    record = metrics["runs"][0]  # its train_examples are windows of the 4 questions
    assert record["steps"] == math.ceil(record["train_examples"] / 16) == 2
    assert record["epochs"] == []
    assert metrics["family"] == "squad" and metrics["monitor"] == "f1" and metrics["best"] is None
    for key in ("exact", "f1", "HasAns_total", "best_f1", "best_f1_thresh"):
        assert key in metrics
    assert_finished_run_dir(out)
    assert result_line(proc.stdout) == (
        f"exact {metrics['exact']:.4f}, f1 {metrics['f1']:.4f}, "
        f"train_steps 2 (all metrics: {out}/metrics.json)"
    )
    predictions = json.loads((out / "predictions.json").read_text())
    null_odds = json.loads((out / "null_odds.json").read_text())
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    assert len(predictions) == len(null_odds) == len(nbest) == 5
    held_out = [
        qa
        for a in json.loads(squad_file.read_text())["data"][-8:]
        for p in a["paragraphs"]
        for qa in p["qas"]
    ]
    assert set(predictions) <= {qa["id"] for qa in held_out}
    # The null threshold: the sweep's best-F1 one on the dev split (the last quarter of the
    # training articles, capped at 5 questions), stored in the kept task and the export.
    task = load_task(out)
    examples = squad.read_squad_examples(str(squad_file), True)
    training_titles = squad.split_by_title(examples, 0.5)[0]
    dev = squad.split_by_title(training_titles, 0.25)[1][:5]
    assert {e.title for e in dev}.isdisjoint(e.title for e in training_titles[:4])
    features = task.features(dev)
    dev_answers = task.answer(dev, features, task.window_logits(features))
    dev_data = squad_eval.dataset_of(dev)
    sweep = squad_eval.evaluate(dev_data, dev_answers, True)
    threshold = sweep["best_f1_thresh"]
    assert metrics["null_score_diff_threshold"] == task.null_score_diff_threshold == threshold
    at_threshold = squad_eval.official_scores(
        dev_data, squad_eval.with_threshold(dev_answers, threshold), True
    )
    assert metrics["null_threshold_dev"] == {
        "questions": 5,
        "articles": len({e.title for e in dev}),
        "best_f1": sweep["best_f1"],
        "exact": at_threshold["exact_match"],
    }
    assert at_threshold["f1"] == sweep["best_f1"]
    # ... and the kept task's predict and the export's serving_default give those scores on the
    # questions that chose it.
    questions, contexts = [e.question for e in dev], [e.context for e in dev]
    ids = [e.qas_id for e in dev]
    predicted = [row["answer_text"] for row in task.predict((questions, contexts))]
    served = tf.saved_model.load(str(export_base / "qa_tiny" / "1")).signatures["serving_default"](
        question=tf.constant(questions), context=tf.constant(contexts)
    )
    assert [t.decode() for t in served["answer_text"].numpy()] == predicted
    obtained = squad_eval.official_scores(dev_data, dict(zip(ids, predicted)), True)
    assert (obtained["exact_match"], obtained["f1"]) == (
        at_threshold["exact_match"],
        sweep["best_f1"],
    )
    for qid, text in predictions.items():  # thresholded there, from the written null odds
        best = next((n["text"] for n in nbest[qid] if n["text"]), "")
        assert text == ("" if squad_answers.predicts_null(null_odds[qid], threshold) else best)
    exported = export_base / "qa_tiny" / "1"
    assert f"exported to {exported}" in proc.stdout and "export_path" not in metrics
    export_config = json.loads((exported / "assets" / "export_config.json").read_text())
    assert export_config["task_type"] == "span_question_answering"
    assert export_config["doc_stride"] == 32 and export_config["version_2_with_negative"] is True
    assert export_config["signatures"]["serving_default"] == "question, context"
    assert export_config["null_score_diff_threshold"] == threshold
    assert isinstance(task, SpanQuestionAnswerer) and task.version_2_with_negative
    assert task.doc_stride == 32 and task.preprocessor.max_seq_length == 64


@pytest.mark.slow
def test_killed_before_metrics_are_written_and_resumed_ends_like_an_uninterrupted_run(
    tmp_path, data_dir, uncased_vocab
):
    flags = [
        *tiny_squad_flags(data_dir, uncased_vocab),
        "--num_train_epochs=2",
        "--evaluations_per_epoch=1",
        "--learning_rate=1e-3",
        "--dropout_rate=0",
        "--verbose=0",
    ]
    # Killed with best_model.keras kept and the run recorded complete, before metrics.json: the
    # rerun trains nothing (resumed at its last step, 4) and predicts with the kept weights.
    metrics = assert_killed_and_resumed_like_uninterrupted(
        tmp_path,
        "run_squad.py",
        flags,
        "metrics_write",
        resumed_from_step=4,
        epochs=[1, 2],
        steps=4,
    )
    # Each epoch's evaluation scores the prediction file at threshold 0 and the best is kept; the
    # final scores are the kept model's answers at the threshold chosen after training on the dev
    # split (docs/squad.md), so they need not equal the kept evaluation's.
    run = metrics["runs"][0]
    assert metrics["best"]["f1"] == max(e["f1"] for e in run["epochs"])
    assert metrics["best"]["epoch"] in [e["epoch"] for e in run["epochs"]]
    threshold = metrics["null_score_diff_threshold"]
    assert load_task(tmp_path / "uninterrupted").null_score_diff_threshold == threshold
    # The final scores are the official evaluator's on the answers written: the first 5 held-out
    # questions, answered at that threshold.
    examples = squad.read_squad_examples(str(data_dir / "squad" / "dev-v2.0-subset.json"), True)
    predicted = squad.split_by_title(examples, 0.5)[1][:5]
    answers = json.loads((tmp_path / "uninterrupted" / "predictions.json").read_text())
    assert sorted(answers) == sorted(e.qas_id for e in predicted)
    scores = squad_eval.official_scores(squad_eval.dataset_of(predicted), answers, True)
    assert (scores["exact_match"], scores["f1"]) == (metrics["exact"], metrics["f1"])


def test_lengths_that_leave_no_context_are_a_usage_error(
    tmp_path,
):  # in process (exit 2 in the recipe)
    with pytest.raises(ValueError, match="leaves no room for the context"):
        SquadArgs(
            output_dir=str(tmp_path / "out"),
            train_file=str(REPO / "README.md"),
            max_seq_length=32,
            max_query_length=64,
        )


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"train_file": "missing.json"}, "--train_file=missing.json: no such file"),
        ({}, "give --train_file, --predict_file or both"),
        (
            {"predict_file": str(REPO / "README.md"), "holdout_fraction": 1.0},
            "--holdout_fraction must be in \\(0, 1\\)",
        ),
        (
            {"predict_file": str(REPO / "README.md"), "train_batch_size": 0},
            "--train_batch_size must be >= 1, got 0",
        ),
        (
            {"train_file": str(REPO / "README.md"), "null_threshold_dev_fraction": 0.2},
            "--null_threshold_dev_fraction acts only with --version_2_with_negative",
        ),
        (
            {
                "train_file": str(REPO / "README.md"),
                "version_2_with_negative": True,
                "null_threshold_dev_fraction": 0.2,
                "null_score_diff_threshold": 1.5,
            },
            "give --null_score_diff_threshold or --null_threshold_dev_fraction",
        ),
        (
            {"train_file": str(REPO / "README.md"), "null_score_diff_threshold": float("nan")},
            "--null_score_diff_threshold must be a number, not NaN, got nan",
        ),
        (
            {"train_file": str(REPO / "README.md"), "null_threshold_dev_fraction": 1.0},
            "--null_threshold_dev_fraction must be in \\(0, 1\\)",
        ),
    ],
)
def test_config_errors_name_the_flag(tmp_path, settings, message):
    with pytest.raises(ValueError, match=message):
        SquadArgs(output_dir=str(tmp_path), **settings)


def test_rerun_with_other_settings_is_refused(tmp_path, data_dir, uncased_vocab):
    (tmp_path / "config.json").write_text(json.dumps({"doc_stride": 64, "seed": 42}))
    args = SquadArgs(
        output_dir=str(tmp_path),
        doc_stride=32,
        preset="bert_tiny",
        vocab_file=str(uncased_vocab),
        predict_file=str(data_dir / "squad" / "dev-v1.1.json"),
    )
    with pytest.raises(ValueError, match="doc_stride 64 -> 32"):
        trainer.prepare(FAMILY, args)
