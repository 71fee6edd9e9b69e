"""Bad flags and reruns of run_finetuning fail fast with messages naming the problem (no training)."""
import dataclasses
import json

import pytest

import keras_bert
from keras_bert.data import glue
from keras_bert.training.classification_data import load_task_data
from keras_bert.training.finetune import run_finetuning
from keras_bert.training.finetune_config import FinetuneConfig, check_resume_settings
from keras_bert.training import model_setup
from keras_bert.training.model_setup import build_encoder


def _cfg(tmp_path, vocab, **kw):
    base = dict(task_name="sst2", output_dir=str(tmp_path / "out"), preset="bert_tiny", vocab_file=str(vocab),
                max_seq_length=32, learning_rate=5e-5, num_train_epochs=1, max_train_examples=64)
    return FinetuneConfig(**(base | kw))


@pytest.mark.parametrize("flag, value, fragment", [
    ("num_train_epochs", 0, "--num_train_epochs must be > 0, got 0"),
    ("train_batch_size", 0, "--train_batch_size must be >= 1, got 0"),
    ("eval_batch_size", -1, "--eval_batch_size must be >= 1, got -1"),
    ("learning_rate", 0.0, "--learning_rate must be > 0, got 0.0"),
    ("learning_rate", -1e-3, "--learning_rate must be > 0, got -0.001"),
    ("warmup_proportion", 1.5, r"--warmup_proportion must be in \[0, 1\], got 1.5"),
    ("num_restarts", 0, "--num_restarts must be >= 1, got 0"),
    ("evaluations_per_epoch", 0, "--evaluations_per_epoch must be >= 1, got 0"),
    ("ema_momentum", 1.0, r"--ema_momentum must be in \[0, 1\) \(0: no weight average\), got 1.0"),
    ("layerwise_lr_decay", 0.0, r"--layerwise_lr_decay must be in \(0, 1\] \(1: off\), got 0.0"),
    ("layerwise_lr_decay", 1.25, r"--layerwise_lr_decay must be in \(0, 1\] \(1: off\), got 1.25"),
    ("pad_to_multiple_of", -8, r"--pad_to_multiple_of must be >= 0 \(0: pad to max_seq_length\), got -8"),
])
def test_numeric_flags_are_validated(tmp_path, uncased_vocab, flag, value, fragment):
    with pytest.raises(ValueError, match=fragment):
        _cfg(tmp_path, uncased_vocab, **{flag: value})


def test_two_model_sources_are_refused(tmp_path, uncased_vocab):
    with pytest.raises(ValueError, match="--init_checkpoint=minilm and --preset=bert_tiny both given"):
        _cfg(tmp_path, uncased_vocab, init_checkpoint="minilm")
    with pytest.raises(ValueError, match="--init_checkpoint=minilm and --bert_config_file=c.json both given"):
        _cfg(tmp_path, uncased_vocab, preset=None, init_checkpoint="minilm", bert_config_file="c.json")


def _earlier_run(tmp_path, uncased_vocab, **kw):
    earlier = _cfg(tmp_path, uncased_vocab, **kw)
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(dataclasses.asdict(earlier) | {
        "vocab_file": str(uncased_vocab), "do_lower_case": True, "num_replicas": 1}))
    return earlier


def test_rerun_with_different_settings_is_refused(tmp_path, uncased_vocab, data_dir):
    _earlier_run(tmp_path, uncased_vocab, data_dir=str(data_dir))
    out = tmp_path / "out"
    with pytest.raises(ValueError) as e:
        run_finetuning(_cfg(tmp_path, uncased_vocab, learning_rate=1e-3, data_dir=str(data_dir)))
    assert str(e.value) == (f"output_dir {out} holds a run with different settings (recorded -> this run): "
                            "learning_rate 5e-05 -> 0.001; use a new --output_dir, or rerun with the recorded values")
    with pytest.raises(ValueError, match="preset bert_tiny -> bert_small"):
        run_finetuning(_cfg(tmp_path, uncased_vocab, preset="bert_small", data_dir=str(data_dir)))
    # Same settings (verbose, dynamic padding and the spelling of output_dir differ: harmless)
    # pass the check, i.e. resume.
    same = dataclasses.asdict(_cfg(tmp_path, uncased_vocab, verbose=0, data_dir=str(data_dir),
                                   pad_to_multiple_of=0, output_dir=str(out) + "/"))
    check_resume_settings(out, same | {"vocab_file": str(uncased_vocab), "do_lower_case": True,
                                                "num_replicas": 2})
    with pytest.raises(ValueError, match="evaluations_per_epoch 1 -> 4"):
        run_finetuning(_cfg(tmp_path, uncased_vocab, evaluations_per_epoch=4, data_dir=str(data_dir)))


def test_no_local_data_and_no_tfds_is_a_clear_error(tmp_path, uncased_vocab, monkeypatch):
    monkeypatch.delenv("KERAS_BERT_DATA_DIR", raising=False)

    def broken(task_name, split):
        raise ModuleNotFoundError("No module named 'importlib_resources'")
    monkeypatch.setattr(glue, "load_glue_tfds", broken)
    with pytest.raises(FileNotFoundError, match=r"no local GLUE data for task 'sst2' \(looked in: .*\); pass "
                       r"--data_dir or set KERAS_BERT_DATA_DIR \(tensorflow-datasets fallback failed: "
                       r"ModuleNotFoundError: No module named 'importlib_resources'\)"):
        load_task_data(_cfg(tmp_path, uncased_vocab))


def test_unknown_task_lists_own_file_tasks(tmp_path):
    with pytest.raises(ValueError, match="unknown GLUE task 'sst3'.*text_classification, "
                       "text_pair_classification, text_regression"):
        load_task_data(FinetuneConfig(task_name="sst3", output_dir=str(tmp_path)))


def test_vocab_size_against_encoder(tmp_path, uncased_vocab, monkeypatch):
    config = _cfg(tmp_path, uncased_vocab)
    assert build_encoder(config, vocab_size=30522).bert_config.vocab_size == 30522
    assert build_encoder(config, vocab_size=1000).bert_config.vocab_size == 1000   # random init: vocab's size
    small = keras_bert.BertEncoder(**(dataclasses.asdict(keras_bert.BertConfig.from_preset("bert_tiny"))
                                      | {"vocab_size": 500}))
    monkeypatch.setattr(model_setup.checkpoints, "load_encoder", lambda name: small)
    pretrained = _cfg(tmp_path, uncased_vocab, preset=None, init_checkpoint="tiny_ckpt")
    with pytest.raises(ValueError, match=rf"vocab file {uncased_vocab} has 30522 entries but the encoder of "
                       "--init_checkpoint=tiny_ckpt has vocab_size 500"):
        build_encoder(pretrained, vocab_size=30522)
    assert build_encoder(pretrained, vocab_size=500) is small


def test_glue_display_names_keep_glue_id_order(tmp_path, uncased_vocab, data_dir):
    data = load_task_data(_cfg(tmp_path, uncased_vocab, data_dir=str(data_dir), max_eval_examples=4))
    assert data.label_list == ["0", "1"] and data.label_names == ["negative", "positive"]
    assert glue.get_task("cola").label_names == ("unacceptable", "acceptable")
    assert glue.get_task("mrpc").label_names == ("not_equivalent", "equivalent")
    assert glue.get_task("qqp").label_names == ("not_duplicate", "duplicate")
    assert glue.get_task("rte").label_names == ("entailment", "not_entailment")
    # tensorflow-datasets SST-2 rows carry ClassLabel names; they map back to GLUE's "0"/"1".
    rows = [{"sentence": b"bad", "label": 0}, {"sentence": b"good", "label": 1}]
    assert [e.label for e in glue.examples_from_tfds("sst2", "dev", rows, ["negative", "positive"])] == ["0", "1"]


def test_an_output_dir_from_before_group_by_length_resumes_only_with_random_batches(tmp_path):
    import json
    (tmp_path / "config.json").write_text(json.dumps({"task_name": "sst2", "seed": 42}))
    with pytest.raises(ValueError, match=r"holds a run with different settings \(recorded -> this run\): "
                       r"group_by_length False -> True; use a new --output_dir"):
        check_resume_settings(tmp_path, {"task_name": "sst2", "seed": 42, "group_by_length": True})
    check_resume_settings(tmp_path, {"task_name": "sst2", "seed": 42, "group_by_length": False})
    (tmp_path / "config.json").write_text(json.dumps({"task_name": "sst2", "group_by_length": True}))
    check_resume_settings(tmp_path, {"task_name": "sst2", "group_by_length": True})
