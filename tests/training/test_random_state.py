"""Every random stream of a training step is kept with each step checkpoint (`random_state`): the
streams are put back as they were; a run stopped anywhere and resumed ends bit for bit like the
uninterrupted one with dropout on, for every fine-tuning family and pretraining; and no step
draws from a state no checkpoint holds (a stateful random op)."""

import collections
import dataclasses
import json
import logging
import pathlib
import random
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.checkpoints.loader import load_encoder
from keras_bert.layers.dropout import BertDropout
from keras_bert.training import callbacks as callbacks_lib
from keras_bert.training import random_state, trainer
from keras_bert.training.callbacks import ResumableCheckpoint
from keras_bert.training.fit import resumable_fit
from keras_bert.training.pretraining import (
    PretrainConfig,
    build_pretrainer,
    make_train_dataset_fn,
    run_pretraining,
)
from keras_bert.tokenization.full_tokenizer import load_vocab
from tests.recipes.kill_resume import differences, repeatable
from tests.recipes.test_run_pretraining import PRED, SEQ, write_shards
from tests.tiny import TINY_SQUAD_WINDOWS, tiny_config

# Ops drawing from a state no checkpoint can hold: a kernel's own counter (seeded by the graph and
# op seeds), or a tf.random.Generator the model does not track.
STATEFUL_RANDOM_OPS = frozenset(
    {
        "RandomUniform",
        "RandomUniformInt",
        "RandomStandardNormal",
        "ParameterizedTruncatedNormal",
        "TruncatedNormal",
        "RandomShuffle",
        "RandomGamma",
        "RandomPoisson",
        "RandomPoissonV2",
        "Multinomial",
        "StatefulUniform",
        "StatefulUniformInt",
        "StatefulUniformFullInt",
        "StatefulStandardNormal",
        "StatefulStandardNormalV2",
        "StatefulTruncatedNormal",
        "StatefulRandomBinomial",
        "NonDeterministicInts",
        "RngSkip",
        "RngReadAndSkip",
    }
)
STATELESS_RANDOM_OPS = frozenset({"StatelessRandomUniformV2", "StatelessRandomUniformFullIntV2"})


def _dropout_model():
    """Dense -> BertDropout(0.3) -> Keras Dropout(0.5) -> Dense, seeded, compiled (Adam 0.05)."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((3,)),
            keras.layers.Dense(8),
            BertDropout(0.3),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.Adam(0.05), "mse")
    return model


def _draws(model):
    """One draw from every stream: the model's two dropout masks, Keras's global generator,
    TensorFlow's global generator, Python's and NumPy's."""
    return [
        model(np.ones((4, 3), "float32"), training=True).numpy(),
        keras.random.uniform((3,)).numpy(),
        tf.random.get_global_generator().normal([3]).numpy(),
        random.random(),
        np.random.rand(3),
    ]


def _assert_same(got, want):
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_restored_record_replays_every_stream_in_a_new_model():
    model = _dropout_model()
    model(np.ones((4, 3), "float32"), training=True)  # advance the masks
    keras.random.uniform((2,))  # make Keras's and TensorFlow's global generators
    tf.random.get_global_generator().normal([2])
    state = json.loads(json.dumps(random_state.capture(model)))  # as checkpoint.json holds it
    assert len(state["seed_generators"]) == 2
    assert [draws for _, draws in state["seed_generators"]] == [1, 1]
    want = _draws(model)
    fresh = _dropout_model()  # as a resumed process builds it; resets Keras's global generator
    fresh.set_weights(model.get_weights())
    random_state.restore(fresh, state, "checkpoint.json")
    _assert_same(_draws(fresh), want)
    assert not np.array_equal(_draws(fresh)[0], want[0])  # the streams move on


def test_a_record_of_another_model_is_refused():
    state = random_state.capture(_dropout_model())
    keras.utils.set_random_seed(0)
    other = keras.Sequential([keras.Input((3,)), BertDropout(0.1), keras.layers.Dense(1)])
    with pytest.raises(ValueError) as error:
        random_state.restore(other, state, "out/checkpoints/checkpoint.json")
    assert str(error.value) == (
        "out/checkpoints/checkpoint.json holds the state of 2 random seed generators but the "
        "model has 1: it is a checkpoint of another model"
    )


class Killed(BaseException):
    """What a SIGKILL is to the tests that stay in one process: everything after it is lost."""


def kill_at(monkeypatch, point: str, n: int) -> None:
    """The n-th pass of the crash point `point` (`keras_bert.faults`) in the step checkpoint's
    callback raises `Killed`: the run stops with what its checkpoints hold, as a SIGKILL leaves it."""
    passes = collections.Counter()

    def crash(name):
        passes[name] += 1
        if name == point and passes[name] == n:
            raise Killed(f"{point}:{n}")

    monkeypatch.setattr(callbacks_lib, "crash_point", crash)


def _data(epoch, skip):
    x = np.arange(24, dtype="float32").reshape(8, 3) / 10
    return tf.data.Dataset.from_tensor_slices((x, x.sum(1))).batch(2).skip(skip)


def _fit(directory, callbacks=()):
    model = _dropout_model()
    resumable_fit(model, _data, 4, 3, ResumableCheckpoint(directory, save_freq=2), callbacks, 0)
    return [w.numpy() for w in model.weights]


def test_a_run_killed_mid_epoch_resumes_to_the_same_weights_bit_for_bit(
    tmp_path, monkeypatch, caplog
):
    want = _fit(tmp_path / "uninterrupted")
    kill_at(monkeypatch, "train_batch", 7)  # epoch 2, batch 3; the checkpoint of step 6 is kept
    with pytest.raises(Killed):
        _fit(tmp_path / "killed")
    monkeypatch.undo()
    shutil.copytree(tmp_path / "killed", tmp_path / "old")
    assert json.loads((tmp_path / "killed" / "checkpoint.json").read_text())["step"] == 6
    _assert_same(_fit(tmp_path / "killed"), want)

    # Without the random record (a checkpoint of an older version) the masks after the resume
    # are a fresh start's: other weights, and a warning says why.
    record = tmp_path / "old" / "checkpoint.json"
    old = {k: v for k, v in json.loads(record.read_text()).items() if k != "random"}
    record.write_text(json.dumps(old))
    with caplog.at_level(logging.WARNING, "keras_bert.training.callbacks"):
        got = _fit(tmp_path / "old")
    assert caplog.messages == [
        f"{record} records no random state (written by an older version): the dropout masks "
        "after this resume differ from an uninterrupted run's"
    ]
    assert not all(np.array_equal(a, b) for a, b in zip(got, want))


# ---- every family and pretraining, in process: stopped where a SIGKILL stops it, resumed ----


def _bert_config(tmp_path) -> str:
    """A 1-layer H=16 encoder over the real uncased vocabulary, dropout 0.1 (hidden and
    attention), 64 positions."""
    path = tmp_path / "bert_config.json"
    tiny_config(
        vocab_size=30522,
        hidden_size=16,
        intermediate_size=24,
        max_sequence_length=64,
        dropout_rate=0.1,
        attention_dropout_rate=0.1,
    ).to_json_file(path)
    return str(path)


def _common(tmp_path, vocab) -> dict:
    """Two epochs of batches of 4 from the dropout encoder (and head dropout 0.1), a checkpoint
    every 2 batches, dev evaluated at each epoch end."""
    return dict(
        bert_config_file=_bert_config(tmp_path),
        vocab_file=str(vocab),
        train_batch_size=4,
        num_train_epochs=2,
        learning_rate=3e-3,
        save_checkpoints_steps=2,
        early_stopping_patience=2,  # never stops in 2 epochs; SQuAD evaluates only when asked
        verbose=0,
    )


def _classification(tmp_path, data_dir, vocab):
    from keras_bert.training.families import classification

    args = dict(task_name="sst2", data_dir=str(data_dir / "glue"), max_seq_length=32)
    args |= dict(max_train_examples=16, max_eval_examples=16)
    return classification.FAMILY, lambda out: classification.ClassifierArgs(
        output_dir=out, **_common(tmp_path, vocab), **args
    )


def _ner(tmp_path, data_dir, vocab):
    from keras_bert.training.families import ner

    args = dict(data_dir=str(data_dir / "conll2003"), max_seq_length=32)
    args |= dict(max_train_examples=14, max_eval_examples=16)
    return ner.FAMILY, lambda out: ner.NerArgs(output_dir=out, **_common(tmp_path, vocab), **args)


def _swag(tmp_path, data_dir, vocab):
    from keras_bert.training.families import swag
    from tests.data.test_swag import HEADER, ROWS, write

    data = tmp_path / "swag.csv"
    write(data, HEADER, ROWS * 8)
    args = dict(train_file=str(data), dev_file=str(data), max_seq_length=32)
    return swag.FAMILY, lambda out: swag.SwagArgs(
        output_dir=out, **_common(tmp_path, vocab), **args
    )


def _squad(tmp_path, data_dir, vocab):
    from keras_bert.training.families import squad

    path = str(data_dir / "squad" / "dev-v1.1.json")
    args = dict(train_file=path, predict_file=path, holdout_fraction=0.5, **TINY_SQUAD_WINDOWS)
    args |= dict(max_train_examples=4, max_eval_examples=4)
    return squad.FAMILY, lambda out: squad.SquadArgs(
        output_dir=out, **_common(tmp_path, vocab), **args
    )


def _distillation(tmp_path, data_dir, vocab):
    from keras_bert.training.families import distillation
    from tests.evaluation.tiny_task import tiny_classifier
    from tests.training.test_distillation import rule_rows, write_rows

    teacher = tiny_classifier(vocab, seed=4, num_classes=2, label_names=["neg", "pos"])
    teacher.save(tmp_path / "teacher.keras")  # two layers, hidden and attention dropout 0.1
    rng = np.random.default_rng(0)
    args = dict(
        teacher=str(tmp_path / "teacher.keras"),
        train_file=write_rows(tmp_path / "train.jsonl", rule_rows(rng, 14)),
        dev_file=write_rows(tmp_path / "dev.jsonl", rule_rows(rng, 8)),
        student_layers=1,
    )
    common = _common(tmp_path, vocab)  # the student is the teacher's, cut to one layer
    del common["bert_config_file"], common["vocab_file"]
    return distillation.FAMILY, lambda out: distillation.DistillArgs(
        output_dir=out, **common, **args
    )


FAMILIES = {
    "classification": _classification,
    "ner": _ner,
    "swag": _swag,
    "squad": _squad,
    "distillation": _distillation,
}


def _run(family, args, prepared):
    """`trainer.run` into `args.output_dir`, over the data `prepared` read once for the test's
    runs; (metrics.json without what a resume cannot repeat, the kept task, metrics.json)."""
    out = args.output_dir
    summary = trainer.run(family, args, dataclasses.replace(prepared, out=out))
    metrics = json.loads(pathlib.Path(out, "metrics.json").read_text())
    return repeatable(metrics), summary["task"], metrics


def _first_batch(monkeypatch):
    """Records the first training batch the driver makes (to trace the step with)."""
    batches = []
    make = trainer.fit_batches

    def recording(*args, **kwargs):
        dataset = make(*args, **kwargs)
        if not batches:
            batches.append(next(iter(dataset)))
        return dataset

    monkeypatch.setattr(trainer, "fit_batches", recording)
    return batches


def _assert_draws_only_checkpointed_streams(model, batch):
    """The train step's graph (gradient included) holds no stateful random op, and it draws
    dropout masks with the stateless op `BertDropout` uses."""
    step = tf.function(model.train_step).get_concrete_function(batch)
    graph_def = step.graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    assert sorted(f"{n.op} {n.name}" for n in nodes if n.op in STATEFUL_RANDOM_OPS) == []
    assert any(n.op in STATELESS_RANDOM_OPS for n in nodes)


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_killed_mid_epoch_with_dropout_resumes_bit_for_bit(
    tmp_path, monkeypatch, data_dir, uncased_vocab, family
):
    fam, make_args = FAMILIES[family](tmp_path, data_dir, uncased_vocab)
    ref, out = make_args(str(tmp_path / "uninterrupted")), make_args(str(tmp_path / "killed"))
    prepared = trainer.prepare(fam, ref)
    batches = _first_batch(monkeypatch)
    want, task, metrics = _run(fam, ref, prepared)
    _assert_draws_only_checkpointed_streams(task, batches[0])
    run = metrics["runs"][0]
    assert run["steps"] // 2 >= 3 and [e["epoch"] for e in run["epochs"]] == [1, 2], run
    kill_at(monkeypatch, "train_batch", 3)  # inside epoch 1; the checkpoint of step 2 is kept
    with pytest.raises(Killed):
        _run(fam, out, prepared)
    monkeypatch.undo()
    got, resumed_task, resumed = _run(fam, out, prepared)
    assert resumed["runs"][0]["resumed_from_step"] == 2
    assert got == want, differences(got, want)
    for a, b in zip(resumed_task.get_weights(), task.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_pretraining_killed_mid_chunk_with_dropout_resumes_bit_for_bit(
    tmp_path, monkeypatch, data_dir, uncased_vocab
):
    shards = write_shards(tmp_path, data_dir, uncased_vocab)

    def config(out):
        return PretrainConfig(
            input_file=shards,
            vocab_file=str(uncased_vocab),
            output_dir=str(out),
            bert_config_file=_bert_config(tmp_path),
            max_seq_length=SEQ,
            max_predictions_per_seq=PRED,
            train_batch_size=4,
            num_train_steps=6,
            num_warmup_steps=1,
            learning_rate=1e-3,
            save_checkpoints_steps=2,
            dynamic_masking=True,
        )

    ref, out = tmp_path / "uninterrupted", tmp_path / "killed"
    want = run_pretraining(config(ref))
    kill_at(monkeypatch, "train_batch", 3)  # chunks of 2 batches: the checkpoint of step 2 kept
    with pytest.raises(Killed):
        run_pretraining(config(out))
    monkeypatch.undo()
    got = run_pretraining(config(out))
    assert got["resumed_from_step"] == 2 and got["steps"] == want["steps"] == 6

    def history(metrics):
        return [{k: v for k, v in h.items() if k != "seconds"} for h in metrics["history"]]

    assert history(got) == history(want)
    for a, b in zip(
        load_encoder(str(out / "encoder")).get_weights(),
        load_encoder(str(ref / "encoder")).get_weights(),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    vocab = load_vocab(str(uncased_vocab))
    model = build_pretrainer(config(ref), vocab, "float32")
    model.optimizer.build(model.trainable_variables)
    _assert_draws_only_checkpointed_streams(
        model, next(iter(make_train_dataset_fn(config(ref), vocab)(0, 0)))
    )
