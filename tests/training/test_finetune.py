"""The classification family through the one driver, end to end on tiny configs: one short fit
per task type, restarts, data errors, an all-NaN run, the defaults on a few dozen rows."""

import csv
import dataclasses
import json
import statistics

import numpy as np
import pytest
import tensorflow as tf

import keras_bert
from keras_bert.data import glue
from keras_bert.tasks import TextClassifier
from keras_bert.training import trainer
from keras_bert.training.families import classification
from keras_bert.training.families.classification import FAMILY, ClassifierArgs, load_task_data
from tests.tiny import tiny_encoder, tiny_run_args


def _args(tmp_path, uncased_vocab, **kw):
    """A tiny run into tmp_path/out: 32 pieces, batches of 8 (16 for eval), at most 32 train and
    eval examples, a checkpoint every 2 steps; `kw` adds to or replaces any of it."""
    base = tiny_run_args(tmp_path / "out", uncased_vocab, max_examples=32, learning_rate=1e-3)
    sizes = dict(
        max_seq_length=32, train_batch_size=8, eval_batch_size=16, save_checkpoints_steps=2
    )
    return ClassifierArgs(**(base | sizes | kw))


def _csv_files(tmp_path, header, train, dev):
    """train.csv and dev.csv in tmp_path, `header` then the rows of `train` / `dev`; the
    train_file and dev_file arguments that name them."""
    files = {}
    for split, rows in (("train", train), ("dev", dev)):
        path = tmp_path / f"{split}.csv"
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows([header, *rows])
        files[f"{split}_file"] = str(path)
    return files


@pytest.mark.slow
def test_sentence_classification_learns_and_writes_artifacts(tmp_path, uncased_vocab):
    rows = [("a good , fine film", "pos"), ("a bad , awful film", "neg")] * 24
    result = trainer.run(
        FAMILY,
        _args(
            tmp_path,
            uncased_vocab,
            task_name="text_classification",
            **_csv_files(tmp_path, ("sentence", "sentiment"), rows, rows),
            text_column="sentence",
            label_column="sentiment",
            num_train_epochs=3,
            max_train_examples=None,
            dropout_rate=0.0,
            learning_rate=3e-3,
            evaluations_per_epoch=2,
        ),
    )
    out = tmp_path / "out"
    assert result["task"].label_names == ["neg", "pos"] and result["monitor"] == "accuracy"
    assert result["family"] == "classification" and result["task_name"] == "text_classification"
    assert result["dev_examples"] == {"dev": 32}  # --max_eval_examples=32 of 48
    assert result["runs"][0]["steps"] == 18 and result["runs"][0]["num_train_steps"] == 18
    assert result["best"]["accuracy"] == 1.0  # a separable task is learnt
    metrics = json.loads((out / "metrics.json").read_text())
    # 6 batches per epoch, dev evaluated every 3 batches (--evaluations_per_epoch=2)
    assert [e["epoch"] for e in metrics["runs"][0]["epochs"]] == [0.5, 1, 1.5, 2, 2.5, 3]
    assert all("loss" in e for e in metrics["runs"][0]["epochs"])  # the dev loss breaks ties
    assert "task" not in metrics and metrics["best"] == result["best"]
    config = json.loads((out / "config.json").read_text())
    assert config["vocab_file"] == str(uncased_vocab) and config["num_replicas"] == 1
    assert config["family"] == "classification" and config["dropout_rate"] == 0.0
    assert config["derived"] == {}  # learning rate and epochs were given
    assert json.loads((out / "checkpoints" / "checkpoint.json").read_text())["step"] == 18
    assert list((out / "logs").glob("train/events.out.tfevents.*"))
    loaded = keras_bert.load_task(out)
    assert loaded.label_names == ["neg", "pos"] and loaded.task_type == "classification"
    assert not loaded.is_pair and loaded.preprocessor.max_seq_length == 32
    assert loaded.predict(["a good , fine film", "a bad , awful film"]).argmax(-1).tolist() == [
        1,
        0,
    ]
    assert not (out / "labels.json").exists()  # what the model is lives in the task alone


@pytest.mark.slow
def test_pair_classification_glue_mrpc(tmp_path, uncased_vocab, data_dir):
    result = trainer.run(
        FAMILY, _args(tmp_path, uncased_vocab, task_name="mrpc", data_dir=str(data_dir / "glue"))
    )
    best = result["best"]
    assert (
        set(best) == {"epoch", "train_loss", "accuracy", "f1", "loss"} and result["monitor"] == "f1"
    )
    assert 0.0 <= best["accuracy"] <= 1.0 and np.isfinite(best["train_loss"])
    assert np.isfinite(best["loss"]) and best["loss"] > 0
    assert result["runs"][0]["steps"] == 4
    # Display names for export; class ids stay GLUE's order (id 0 = "0" = not_equivalent).
    assert result["task"].label_names == ["not_equivalent", "equivalent"] and result["task"].is_pair
    assert keras_bert.load_task(tmp_path / "out").label_names == ["not_equivalent", "equivalent"]
    assert result["task"](
        {
            "input_word_ids": np.ones((1, 32), "int32"),
            "input_mask": np.ones((1, 32), "int32"),
            "input_type_ids": np.zeros((1, 32), "int32"),
        }
    ).shape == (1, 2)


@pytest.mark.slow
def test_regression_stsb_with_restarts(tmp_path, uncased_vocab, data_dir):
    result = trainer.run(
        FAMILY,
        _args(
            tmp_path,
            uncased_vocab,
            task_name="stsb",
            data_dir=str(data_dir),
            num_restarts=2,
            max_train_examples=16,
        ),
    )
    assert result["task"].is_regression and result["monitor"] == "pearson"
    scores = [r["best"]["pearson"] for r in result["runs"]]
    assert [r["seed"] for r in result["runs"]] == [42, 43]
    assert result["mean"] == pytest.approx(statistics.fmean(scores))
    assert result["std"] == pytest.approx(statistics.stdev(scores))
    assert result["best_run"] == int(np.argmax(scores))
    out = tmp_path / "out"
    assert (out / "run_0" / "best_model.keras").exists() and (out / "best_model.keras").exists()
    assert keras_bert.load_task(out).task_type == "regression"


def test_data_errors_are_clear(tmp_path, data_dir):
    (tmp_path / "train.jsonl").write_text(
        '{"text": "a", "label": "x"}\n{"text": "b", "label": "y"}\n'
    )
    (tmp_path / "dev.jsonl").write_text('{"text": "a", "label": "z"}\n')
    args = ClassifierArgs(
        task_name="text_classification",
        output_dir=str(tmp_path),
        train_file=str(tmp_path / "train.jsonl"),
        dev_file=str(tmp_path / "dev.jsonl"),
    )
    with pytest.raises(
        ValueError,
        match=r"dev.jsonl: data row 0 \(0-based\): label 'z' is neither "
        r"a label name nor an id; give every label as a name of "
        r"\['x', 'y'\] or every label as an id 0..1, not a mix$",
    ):
        load_task_data(args)
    with pytest.raises(ValueError, match=r"missing key\(s\) \['sentence'\]"):
        load_task_data(dataclasses.replace(args, text_column="sentence"))
    with pytest.raises(ValueError, match="needs --train_file and --dev_file"):
        load_task_data(ClassifierArgs(task_name="text_regression", output_dir=str(tmp_path)))
    with pytest.raises(ValueError, match="needs --text_b_column"):
        load_task_data(
            ClassifierArgs(
                task_name="text_pair_classification",
                output_dir=str(tmp_path),
                train_file="t.csv",
                dev_file="d.csv",
            )
        )
    with pytest.raises(ValueError, match="unknown GLUE task 'glue'"):
        load_task_data(ClassifierArgs(task_name="glue", output_dir=str(tmp_path)))
    rte = load_task_data(
        ClassifierArgs(
            task_name="rte",
            output_dir=str(tmp_path),
            data_dir=str(data_dir),
            max_train_examples=5,
            max_eval_examples=3,
        )
    )
    assert len(rte.train) == 5 and list(rte.dev) == ["dev"] and len(rte.dev["dev"]) == 3
    assert rte.file_labels == list(glue.get_task("rte").labels)
    assert classification.monitor_name(rte) == "accuracy"


@pytest.mark.slow
def test_a_run_whose_every_evaluation_is_nan_says_so(tmp_path, uncased_vocab, caplog):
    # Dev scores all equal: Pearson correlation is undefined (NaN) at every evaluation.
    train = [("a good film", 4.5), ("a bad film", 0.5), ("an ok film", 2.5)] * 8
    dev = [(text, 2.0) for text, _ in train[:6]]
    result = trainer.run(
        FAMILY,
        _args(
            tmp_path,
            uncased_vocab,
            task_name="text_regression",
            **_csv_files(tmp_path, ("text", "label"), train, dev),
            max_train_examples=None,
            num_train_epochs=2,
        ),
    )
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["all_evaluations_non_finite"] is True
    assert metrics["runs"][0]["all_evaluations_non_finite"] is True
    assert [np.isnan(e["pearson"]) for e in metrics["runs"][0]["epochs"]] == [True, True]
    assert "every dev pearson was NaN or infinite" in caplog.text
    assert result["best"]["epoch"] == 1  # the first evaluation, as nothing finite exists


SMALL_TASK = {
    "sport": [
        "the striker scored a late goal",
        "our team won the football match",
        "the tennis final went to five sets",
        "he ran the marathon in record time",
        "the coach praised the defenders",
        "fans cheered as the ball hit the net",
    ],
    "food": [
        "she baked fresh bread this morning",
        "add salt and pepper to the soup",
        "the pasta was cooked with garlic",
        "we ate grilled fish for dinner",
        "stir the sauce until it thickens",
        "the cake needs more sugar and butter",
    ],
    "weather": [
        "heavy rain is expected tomorrow",
        "a cold wind blew from the north",
        "the forecast says sunny skies",
        "snow fell all night on the hills",
        "thunderstorms will hit the coast",
        "it was a hot and humid afternoon",
    ],
}
SMALL_DEV = [
    ("the goalkeeper saved a penalty", "sport"),
    ("fry the onions in olive oil", "food"),
    ("clouds and drizzle all week", "weather"),
    ("the players trained on the pitch", "sport"),
    ("a bowl of rice with vegetables", "food"),
    ("strong winds and freezing rain", "weather"),
]


@pytest.mark.slow
def test_a_few_dozen_rows_reach_perfect_dev_accuracy_with_the_defaults(tmp_path):
    rows = [(t, label) for label, texts in SMALL_TASK.items() for t in texts] * 2  # 36 rows
    # Only what the data is and where things go: no learning rate, epochs, batch or length flags.
    result = trainer.run(
        FAMILY,
        ClassifierArgs(
            task_name="text_classification",
            output_dir=str(tmp_path / "out"),
            **_csv_files(tmp_path, ("text", "label"), rows, SMALL_DEV),
            init_checkpoint="minilm_l6_h384_uncased",
            verbose=0,
        ),
    )
    run = result["runs"][0]
    assert run["learning_rate"] == 1e-4  # hidden_size 384: the small-encoder rate
    assert run["num_train_steps"] == 100 and run["num_train_epochs"] == 50.0  # 2 batches an epoch
    assert result["best"]["accuracy"] == 1.0
    probabilities = result["task"].predict([text for text, _ in SMALL_DEV])
    assert [result["task"].label_names[i] for i in probabilities.argmax(-1)] == [
        label for _, label in SMALL_DEV
    ]
    derived = json.loads((tmp_path / "out" / "config.json").read_text())["derived"]
    assert derived["learning_rate"] == {
        "value": 1e-4,
        "why": "not given: the classification default for this encoder (hidden_size 384)",
    }
    assert derived["num_train_epochs"] == {
        "value": 50.0,
        "why": "not given: 36 examples give 6 optimizer steps in 3 epochs, raised to "
        "50 epochs to reach --min_train_steps=100",
    }


def test_evaluation_step_does_not_retrace_for_every_batch_width():
    # Dev batches are cut to their longest row, so widths vary; a plain tf.function would trace
    # the model once per width (5 here), a relaxed one at most twice (the first shape, then [None]).
    model = TextClassifier(tiny_encoder(max_sequence_length=16), num_classes=2)
    batches = [
        {
            k: np.ones((4, width), np.int32)
            for k in ("input_word_ids", "input_mask", "input_type_ids")
        }
        for width in (3, 5, 7, 9, 11)
    ]
    expected = model(batches[0], training=False).numpy()  # built, as the evaluator finds it
    step, plain = (
        classification.inference_step(model),
        tf.function(lambda f: model(f, training=False)),
    )
    outputs = np.concatenate([step(b).numpy() for b in batches])
    for b in batches:
        plain(b)
    assert outputs.shape == (20, 2)
    assert plain.experimental_get_tracing_count() == 5
    assert step.experimental_get_tracing_count() == 2
    np.testing.assert_allclose(outputs[:4], expected, atol=1e-6)
