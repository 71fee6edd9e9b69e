"""The contract every family keeps through the one driver: a few training steps, the kept task
loads back (`load_task`) and predicts what the trained task predicts, and its export's
`serving_default` answers as `predict` does (plain `tf.saved_model.load`, the same process)."""

import numpy as np
import pytest
import tensorflow as tf

import keras_bert
from keras_bert.training import trainer
from keras_bert.training.families import classification, ner, squad, swag
from tests.data.test_swag import HEADER, ROWS, write
from tests.tiny import TINY_SQUAD_WINDOWS, tiny_run_args
from tests.tolerance import assert_close_across_paths


def _common(tmp_path, vocab):
    return tiny_run_args(
        tmp_path / "out",
        vocab,
        export_dir=str(tmp_path / "models"),
        train_batch_size=4,
        max_train_examples=8,
        max_eval_examples=4,
    )


def _texts(values):
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values]


def _classification(tmp_path, data_dir, vocab):
    args = classification.ClassifierArgs(
        task_name="sst2",
        data_dir=str(data_dir / "glue"),
        max_seq_length=32,
        **_common(tmp_path, vocab),
    )
    texts = ["a fine , moving film", "dull and far too long"]

    def check(task, signature):
        want = task.predict(texts)
        assert_close_across_paths(signature(text=tf.constant(texts))["probabilities"].numpy(), want)
        return want

    return classification.FAMILY, args, check


def _ner(tmp_path, data_dir, vocab):
    args = ner.NerArgs(
        data_dir=str(data_dir / "conll2003"), max_seq_length=32, **_common(tmp_path, vocab)
    )
    texts = ["EU rejects German call to boycott British lamb", "Peter Blackburn"]

    def check(task, signature):
        want = task.predict(texts)
        tags = signature(text=tf.constant(texts))["tags"].numpy()
        assert [[t for t in _texts(row) if t] for row in tags] == want
        return want

    return ner.FAMILY, args, check


def _swag(tmp_path, data_dir, vocab):
    data = write(tmp_path / "train.csv", HEADER, ROWS * 4)
    args = swag.SwagArgs(
        train_file=str(data), dev_file=str(data), max_seq_length=32, **_common(tmp_path, vocab)
    )
    contexts = ["The man opens the door.", "She picks up the cup."]
    endings = [
        ["He walks in.", "The door eats him.", "It rains fish.", "He sings."],
        ["She drinks.", "The cup flies.", "She is a cup.", "It melts."],
    ]

    def check(task, signature):
        want = task.predict((contexts, endings))
        got = signature(context=tf.constant(contexts), endings=tf.constant(endings))
        assert_close_across_paths(got["probabilities"].numpy(), want)
        return want

    return swag.FAMILY, args, check


def _squad(tmp_path, data_dir, vocab):
    path = str(data_dir / "squad" / "dev-v1.1.json")
    args = squad.SquadArgs(
        train_file=path,
        predict_file=path,
        holdout_fraction=0.5,
        **TINY_SQUAD_WINDOWS,
        **_common(tmp_path, vocab),
    )
    questions = ["Who won the game?", "Where was it played?"]
    contexts = [
        "The Broncos won the game 24 to 10 in Santa Clara.",
        "It was played at Levi's Stadium in Santa Clara, California.",
    ]

    def check(task, signature):
        want = task.predict((questions, contexts))
        got = signature(question=tf.constant(questions), context=tf.constant(contexts))
        assert _texts(got["answer_text"].numpy()) == [a["answer_text"] for a in want]
        assert got["start"].numpy().tolist() == [a["start"] for a in want]
        assert got["end"].numpy().tolist() == [a["end"] for a in want]
        assert_close_across_paths(got["score"].numpy(), np.array([a["score"] for a in want]))
        return [(a["answer_text"], a["start"], a["end"]) for a in want]

    return squad.FAMILY, args, check


@pytest.mark.slow
@pytest.mark.parametrize(
    "make", [_classification, _ner, _swag, _squad], ids=["classification", "ner", "swag", "squad"]
)
def test_every_family_trains_loads_predicts_and_serves_alike(
    tmp_path, data_dir, uncased_vocab, make
):
    family, args, check = make(tmp_path, data_dir, uncased_vocab)
    summary = trainer.run(family, args)
    run = summary["runs"][0]
    assert run["steps"] == run["num_train_steps"] >= 1
    trained = summary["task"]
    loaded = keras_bert.load_task(args.output_dir)
    served = tf.saved_model.load(summary["export_path"]).signatures["serving_default"]
    from_trained = check(trained, served)
    from_loaded = check(loaded, served)
    if isinstance(from_trained, np.ndarray):
        np.testing.assert_array_equal(from_loaded, from_trained)
    else:
        assert from_loaded == from_trained
