"""Bad flags and reruns of the classification family fail fast with messages naming the problem:
`ClassifierArgs(...)` checks each value, `trainer.prepare` the rerun and the data (no training)."""

import dataclasses
import json

import pytest

import keras_bert
from keras_bert.data import glue
from keras_bert.training import model_setup, resume_check, run_config, trainer
from keras_bert.training.families.classification import FAMILY, ClassifierArgs, load_task_data
from keras_bert.training.model_setup import build_encoder

TAIL = "; use a new --output_dir, or rerun with the recorded values"


def _cfg(tmp_path, vocab, **kw):
    base = dict(
        task_name="sst2",
        output_dir=str(tmp_path / "out"),
        preset="bert_tiny",
        vocab_file=str(vocab),
        max_seq_length=32,
        learning_rate=5e-5,
        num_train_epochs=1,
        max_train_examples=64,
        max_eval_examples=16,
    )
    return ClassifierArgs(**(base | kw))


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("num_train_epochs", 0, "--num_train_epochs must be > 0, got 0"),
        ("train_batch_size", 0, "--train_batch_size must be >= 1, got 0"),
        ("eval_batch_size", -1, "--eval_batch_size must be >= 1, got -1"),
        ("learning_rate", 0.0, "--learning_rate must be > 0, got 0.0"),
        ("learning_rate", -1e-3, "--learning_rate must be > 0, got -0.001"),
        ("warmup_proportion", 1.5, "--warmup_proportion must be in [0, 1], got 1.5"),
        ("num_restarts", 0, "--num_restarts must be >= 1, got 0"),
        ("evaluations_per_epoch", 0, "--evaluations_per_epoch must be >= 1, got 0"),
        ("ema_momentum", 1.0, "--ema_momentum must be in [0, 1) (0: no weight average), got 1.0"),
        ("layerwise_lr_decay", 0.0, "--layerwise_lr_decay must be in (0, 1] (1: off), got 0.0"),
        ("layerwise_lr_decay", 1.25, "--layerwise_lr_decay must be in (0, 1] (1: off), got 1.25"),
        (
            "pad_to_multiple_of",
            -8,
            "--pad_to_multiple_of must be >= 0, got -8",
        ),
        ("dropout_rate", 1.0, "--dropout_rate must be in [0, 1), got 1.0"),
        ("min_train_steps", -1, "--min_train_steps must be >= 0, got -1"),
        ("optimizer", "sgd", "--optimizer must be one of adamw, lamb, got 'sgd'"),
        ("classifier_pooling", "max", "--classifier_pooling must be one of cls, mean, got 'max'"),
    ],
)
def test_flags_are_validated_at_construction(tmp_path, uncased_vocab, flag, value, message):
    with pytest.raises(ValueError) as e:
        _cfg(tmp_path, uncased_vocab, **{flag: value})
    assert str(e.value) == message


def test_required_flags_and_two_model_sources_are_refused(tmp_path, uncased_vocab):
    with pytest.raises(ValueError) as e:
        ClassifierArgs(output_dir="o")
    assert str(e.value) == "--task_name is required"
    with pytest.raises(ValueError) as e:
        ClassifierArgs(task_name="sst2")
    assert str(e.value) == "--output_dir is required"
    with pytest.raises(
        ValueError, match="--init_checkpoint=minilm and --preset=bert_tiny both given"
    ):
        _cfg(tmp_path, uncased_vocab, init_checkpoint="minilm")
    with pytest.raises(
        ValueError, match="--init_checkpoint=minilm and --bert_config_file=c.json both given"
    ):
        _cfg(
            tmp_path,
            uncased_vocab,
            preset=None,
            init_checkpoint="minilm",
            bert_config_file="c.json",
        )
    with pytest.raises(ValueError) as e:
        _cfg(tmp_path, uncased_vocab, bert_config_file="c.json")
    assert str(e.value) == "--preset and --bert_config_file both given: pass one of them"


def _record(out, settings):
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(settings))
    return (out / "config.json").read_bytes()


def _config_json(args, uncased_vocab):
    """config.json as the driver writes it (`Prepared.write_config`)."""
    return args.settings() | {
        "vocab_file": str(uncased_vocab),
        "do_lower_case": True,
        "family": "classification",
        "num_replicas": 1,
        "given": args.given(),
        "derived": {},
    }


def _old_style_config_json(args, uncased_vocab):
    """config.json of an output_dir written before the families shared one argument set: no
    group_by_length (an older run's batches were random), `classifier_dropout`, no "given"."""
    old = {k: v for k, v in args.settings().items() if k not in ("group_by_length", "dropout_rate")}
    return old | {
        "classifier_dropout": args.dropout_rate,
        "vocab_file": str(uncased_vocab),
        "do_lower_case": True,
        "num_replicas": 1,
    }


def test_rerun_with_different_settings_is_refused(tmp_path, uncased_vocab, data_dir):
    out = tmp_path / "out"
    before = _record(
        out, _config_json(_cfg(tmp_path, uncased_vocab, data_dir=str(data_dir)), uncased_vocab)
    )
    with pytest.raises(ValueError) as e:
        trainer.prepare(
            FAMILY, _cfg(tmp_path, uncased_vocab, learning_rate=1e-3, data_dir=str(data_dir))
        )
    assert str(e.value) == (
        f"output_dir {out} holds a run with different settings (recorded -> this run): "
        f"learning_rate 5e-05 -> 0.001{TAIL}"
    )
    with pytest.raises(ValueError, match="preset bert_tiny -> bert_small"):
        trainer.prepare(
            FAMILY, _cfg(tmp_path, uncased_vocab, preset="bert_small", data_dir=str(data_dir))
        )
    with pytest.raises(ValueError, match="evaluations_per_epoch 1 -> 4"):
        trainer.prepare(
            FAMILY, _cfg(tmp_path, uncased_vocab, evaluations_per_epoch=4, data_dir=str(data_dir))
        )
    assert (out / "config.json").read_bytes() == before and sorted(out.iterdir()) == [
        out / "config.json"
    ]
    # Same settings (verbose, dynamic padding and the spelling of output_dir differ: harmless)
    # pass the check, i.e. resume; prepare writes nothing.
    prepared = trainer.prepare(
        FAMILY,
        _cfg(
            tmp_path,
            uncased_vocab,
            verbose=0,
            data_dir=str(data_dir),
            pad_to_multiple_of=0,
            output_dir=str(out) + "/",
        ),
    )
    assert len(prepared.data.train) == 64 and len(prepared.data.dev["dev"]) == 16
    assert (
        prepared.settings["learning_rate"] == 5e-05 and prepared.settings["pad_to_multiple_of"] == 0
    )
    assert (out / "config.json").read_bytes() == before and sorted(out.iterdir()) == [
        out / "config.json"
    ]


def test_no_local_data_and_no_tfds_is_a_clear_error(tmp_path, uncased_vocab, monkeypatch):
    monkeypatch.delenv("KERAS_BERT_DATA_DIR", raising=False)

    def broken(task_name, split):
        raise ModuleNotFoundError("No module named 'importlib_resources'")

    monkeypatch.setattr(glue, "load_glue_tfds", broken)
    with pytest.raises(
        FileNotFoundError,
        match=r"no local GLUE data for task 'sst2' \(looked in: .*\); pass "
        r"--data_dir or set KERAS_BERT_DATA_DIR \(tensorflow-datasets fallback failed: "
        r"ModuleNotFoundError: No module named 'importlib_resources'\)",
    ):
        trainer.prepare(FAMILY, _cfg(tmp_path, uncased_vocab))
    assert not (tmp_path / "out").exists()


def test_unknown_task_lists_own_file_tasks(tmp_path):
    with pytest.raises(
        ValueError,
        match="unknown GLUE task 'sst3'.*text_classification, "
        "text_pair_classification, text_regression",
    ):
        load_task_data(ClassifierArgs(task_name="sst3", output_dir=str(tmp_path)))


def test_random_init_needs_a_vocab_file(tmp_path, uncased_vocab):
    with pytest.raises(ValueError) as e:
        trainer.prepare(FAMILY, _cfg(tmp_path, uncased_vocab, vocab_file=None))
    assert str(e.value) == (
        "--vocab_file is required when the encoder is randomly initialised "
        "(--preset / --bert_config_file)"
    )


def test_vocab_size_against_encoder(tmp_path, uncased_vocab, monkeypatch):
    config = _cfg(tmp_path, uncased_vocab)
    assert build_encoder(config, vocab_size=30522).bert_config.vocab_size == 30522
    assert (
        build_encoder(config, vocab_size=1000).bert_config.vocab_size == 1000
    )  # random init: vocab's size
    small = keras_bert.BertEncoder(
        **(dataclasses.asdict(keras_bert.BertConfig.from_preset("bert_tiny")) | {"vocab_size": 500})
    )
    monkeypatch.setattr(model_setup.checkpoints, "load_encoder", lambda name: small)
    pretrained = _cfg(tmp_path, uncased_vocab, preset=None, init_checkpoint="tiny_ckpt")
    with pytest.raises(
        ValueError,
        match=rf"vocab file {uncased_vocab} has 30522 entries but the encoder of "
        "--init_checkpoint=tiny_ckpt has vocab_size 500",
    ):
        build_encoder(pretrained, vocab_size=30522)
    assert build_encoder(pretrained, vocab_size=500) is small


def test_glue_display_names_keep_glue_id_order(tmp_path, uncased_vocab, data_dir):
    data = load_task_data(
        _cfg(tmp_path, uncased_vocab, data_dir=str(data_dir), max_eval_examples=4)
    )
    assert data.file_labels == ["0", "1"] and data.label_names == ["negative", "positive"]
    assert glue.get_task("cola").label_names == ("unacceptable", "acceptable")
    assert glue.get_task("mrpc").label_names == ("not_equivalent", "equivalent")
    assert glue.get_task("qqp").label_names == ("not_duplicate", "duplicate")
    assert glue.get_task("rte").label_names == ("entailment", "not_entailment")
    # tensorflow-datasets SST-2 rows carry ClassLabel names; they map back to GLUE's "0"/"1".
    rows = [{"sentence": b"bad", "label": 0}, {"sentence": b"good", "label": 1}]
    assert [
        e.label for e in glue.examples_from_tfds("sst2", "dev", rows, ["negative", "positive"])
    ] == ["0", "1"]


def _check(out, settings):
    return resume_check.check_resume_settings(
        out,
        settings,
        ignored=run_config.HARMLESS_SETTINGS,
        defaults=run_config.ADDED_SETTINGS,
        view=run_config.recorded_settings,
    )


def test_an_output_dir_from_before_group_by_length_resumes_only_with_random_batches(
    tmp_path, uncased_vocab, data_dir
):
    assert run_config.ADDED_SETTINGS["group_by_length"] is False
    _record(tmp_path, {"task_name": "sst2", "seed": 42})  # old style: no "given"
    with pytest.raises(ValueError) as e:
        _check(tmp_path, {"task_name": "sst2", "seed": 42, "group_by_length": True})
    assert str(e.value) == (
        f"output_dir {tmp_path} holds a run with different settings (recorded -> "
        f"this run): group_by_length False -> True{TAIL}"
    )
    assert _check(tmp_path, {"task_name": "sst2", "seed": 42, "group_by_length": False}) == {
        "task_name": "sst2",
        "seed": 42,
    }
    _record(tmp_path, {"task_name": "sst2", "group_by_length": True})
    _check(tmp_path, {"task_name": "sst2", "group_by_length": True})
    # The same through the driver, with a whole old-style config.json.
    out = tmp_path / "out"
    args = _cfg(tmp_path, uncased_vocab, data_dir=str(data_dir), group_by_length=False)
    _record(out, _old_style_config_json(args, uncased_vocab))
    with pytest.raises(ValueError) as e:
        trainer.prepare(FAMILY, dataclasses.replace(args, group_by_length=True))
    assert str(e.value) == (
        f"output_dir {out} holds a run with different settings (recorded -> "
        f"this run): group_by_length False -> True{TAIL}"
    )
    assert trainer.prepare(FAMILY, args).settings["group_by_length"] is False


def test_an_old_classifier_dropout_resumes_as_dropout_rate(tmp_path, uncased_vocab, data_dir):
    assert run_config.RENAMED_SETTINGS["classifier_dropout"] == "dropout_rate"
    out = tmp_path / "out"
    args = _cfg(
        tmp_path, uncased_vocab, data_dir=str(data_dir), group_by_length=False, dropout_rate=0.0
    )
    record = _old_style_config_json(args, uncased_vocab)
    assert record["classifier_dropout"] == 0.0 and "dropout_rate" not in record
    _record(out, record)
    recorded = run_config.recorded_settings(record)
    assert recorded["dropout_rate"] == 0.0 and "classifier_dropout" not in recorded
    prepared = trainer.prepare(FAMILY, args)  # the recorded value under its new name: resumes
    assert prepared.settings["dropout_rate"] == 0.0
    with pytest.raises(ValueError) as e:  # the default 0.1 is not the recorded 0.0
        trainer.prepare(FAMILY, dataclasses.replace(args, dropout_rate=0.1))
    assert str(e.value) == (
        f"output_dir {out} holds a run with different settings (recorded -> "
        f"this run): dropout_rate 0.0 -> 0.1{TAIL}"
    )
