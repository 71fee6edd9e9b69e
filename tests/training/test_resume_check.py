"""The one rerun check (`resume_check.check_resume_settings`): its rules, and that every recipe
family writing into an output_dir (pretraining, classification, SQuAD, NER, SWAG, distillation)
refuses a changed setting with its message before writing anything."""

import dataclasses
import json

import pytest

from keras_bert.config import BertConfig
from keras_bert.training import resume_check, trainer
from keras_bert.training.families import classification, distillation, ner, squad, swag
from keras_bert.training.pretraining import PretrainConfig, recorded_settings, run_pretraining

TAIL = "; use a new --output_dir, or rerun with the recorded values"


def _record(out, settings):
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(settings))
    return (out / "config.json").read_bytes()


def _refusal(out, changes):
    return f"output_dir {out} holds a run with different settings (recorded -> this run): {changes}{TAIL}"


def test_the_check_names_every_changed_setting_and_passes_the_others(tmp_path):
    assert resume_check.check_resume_settings(tmp_path, {"a": 1}) is None  # no earlier run
    _record(tmp_path, {"a": 1, "b": "x", "c": [0, 2], "verbose": 2, "old": 5})
    with pytest.raises(ValueError) as e:
        resume_check.check_resume_settings(
            tmp_path, {"a": 2, "b": "y", "c": (0, 2), "verbose": 0}, ignored={"verbose"}
        )
    assert str(e.value) == _refusal(tmp_path, "a 1 -> 2, b x -> y")
    # A tuple is the JSON list it was recorded as; an ignored setting may differ; a setting only
    # one side has is not compared unless it has a default for the older side.
    recorded = resume_check.check_resume_settings(
        tmp_path, {"a": 1, "b": "x", "c": (0, 2), "verbose": 0, "new": True}, ignored={"verbose"}
    )
    assert recorded == {"a": 1, "b": "x", "c": [0, 2], "verbose": 2, "old": 5}
    with pytest.raises(ValueError) as e:
        resume_check.check_resume_settings(tmp_path, {"a": 1, "new": True}, defaults={"new": False})
    assert str(e.value) == _refusal(tmp_path, "new False -> True")


def _pretrain_config(tmp_path, vocab, **kw):
    shard = tmp_path / "wiki.tfrecord-00000-of-00001"
    shard.write_bytes(b"")  # never read: the check comes first
    return PretrainConfig(
        **(
            {
                "input_file": str(shard),
                "output_dir": str(tmp_path / "out"),
                "vocab_file": str(vocab),
                "max_seq_length": 64,
                "train_batch_size": 8,
                "num_train_steps": 4,
                "num_warmup_steps": 1,
            }
            | kw
        )
    )


def test_pretraining_refuses_other_settings_and_another_model_before_writing(
    tmp_path, uncased_vocab
):
    earlier = _pretrain_config(tmp_path, uncased_vocab)
    out = tmp_path / "out"
    tiny = dataclasses.asdict(BertConfig.from_preset("bert_tiny")) | {"vocab_size": 30522}
    before = _record(
        out,
        {
            "flags": dataclasses.asdict(earlier),
            "bert_config": tiny,
            "use_nsp": True,
            "causal": False,
        },
    )
    with pytest.raises(ValueError) as e:
        run_pretraining(
            _pretrain_config(
                tmp_path, uncased_vocab, preset="bert_mini", train_batch_size=4, learning_rate=1e-3
            )
        )
    assert str(e.value) == _refusal(
        out,
        (
            "preset bert_tiny -> bert_mini, train_batch_size 8 -> 4, learning_rate 0.0001 -> 0.001, "
            "bert_config.hidden_size 128 -> 256, bert_config.num_layers 2 -> 4, "
            "bert_config.num_heads 2 -> 4, bert_config.intermediate_size 512 -> 1024"
        ),
    )
    assert (out / "config.json").read_bytes() == before and sorted(out.iterdir()) == [
        out / "config.json"
    ]
    # Where the run lives and how its batches are computed may change (HARMLESS_SETTINGS).
    again = _pretrain_config(tmp_path, uncased_vocab, output_dir=str(out) + "/", jit_compile=True)
    settings = recorded_settings({"flags": dataclasses.asdict(again), "bert_config": tiny})
    recorded = resume_check.check_resume_settings(
        out,
        settings,
        ignored={"output_dir", "strategy", "tpu", "jit_compile"},
        view=recorded_settings,
    )
    assert recorded["train_batch_size"] == 8 and recorded["bert_config.num_layers"] == 2


def test_an_old_pretraining_config_with_random_seed_reads_as_seed(tmp_path, uncased_vocab):
    out, tiny = tmp_path / "out", dataclasses.asdict(BertConfig.from_preset("bert_tiny"))
    flags_ = dataclasses.asdict(_pretrain_config(tmp_path, uncased_vocab, seed=7))
    flags_["random_seed"] = flags_.pop("seed")  # config.json before --random_seed became --seed
    _record(out, {"flags": flags_, "bert_config": tiny})
    assert recorded_settings({"flags": flags_, "bert_config": tiny})["seed"] == 7

    def check(seed):
        new = dataclasses.asdict(_pretrain_config(tmp_path, uncased_vocab, seed=seed))
        settings = recorded_settings({"flags": new, "bert_config": tiny})
        return resume_check.check_resume_settings(out, settings, view=recorded_settings)

    assert check(7)["seed"] == 7 and "random_seed" not in check(7)
    with pytest.raises(ValueError) as e:
        check(8)
    assert str(e.value) == _refusal(out, "seed 7 -> 8")


def _driver_record(args, family, **resolved):
    """config.json as the driver writes it: every setting, the resolved ones, given / derived."""
    return (
        args.settings()
        | resolved
        | {"family": family.name, "num_replicas": 1, "given": args.given(), "derived": {}}
    )


def test_classification_ner_swag_and_squad_refuse_with_the_same_message(
    tmp_path, uncased_vocab, data_dir
):
    model = {"preset": "bert_tiny", "vocab_file": str(uncased_vocab), "do_lower_case": True}
    squad_file = tmp_path / "train.json"
    squad_file.write_text(json.dumps({"version": "1.1", "data": []}))
    cases = [  # (family, required fields)
        (classification.FAMILY, {"task_name": "sst2", "data_dir": str(data_dir)}),
        (ner.FAMILY, {"data_dir": "conll2003"}),
        (swag.FAMILY, {"train_file": "train.csv", "dev_file": "val.csv"}),
        (squad.FAMILY, {"train_file": str(squad_file)}),
    ]
    for family, required in cases:
        out = tmp_path / family.name
        earlier = family.Args(output_dir=str(out), **required, **model, train_batch_size=8)
        before = _record(
            out, _driver_record(earlier, family, vocab_file=str(uncased_vocab), do_lower_case=True)
        )
        with pytest.raises(ValueError) as e:  # the data is not read: the check comes first
            trainer.prepare(
                family, family.Args(output_dir=str(out), **required, **model, train_batch_size=4)
            )
        assert str(e.value) == _refusal(out, "train_batch_size 8 -> 4"), family.name
        assert (out / "config.json").read_bytes() == before and len(list(out.iterdir())) == 1


def test_distillation_refuses_to_replace_a_run_with_other_settings(tmp_path):
    out = tmp_path / "student"
    teacher = tmp_path / "runs" / "sst2"
    teacher.mkdir(parents=True)  # an empty teacher dir: never loaded, the check comes first
    earlier = distillation.DistillArgs(
        teacher=str(teacher), output_dir=str(out), task_name="sst2", layer_map=(0,), temperature=2.0
    )
    before = _record(out, _driver_record(earlier, distillation.FAMILY))
    with pytest.raises(ValueError) as e:
        trainer.prepare(
            distillation.FAMILY, dataclasses.replace(earlier, temperature=4.0, alpha=0.9)
        )
    assert str(e.value) == _refusal(out, "temperature 2.0 -> 4.0, alpha 0.5 -> 0.9")
    assert (out / "config.json").read_bytes() == before and len(list(out.iterdir())) == 1


def test_an_old_config_with_the_default_epochs_stands_for_not_given():
    from keras_bert.training.run_config import recorded_settings

    old = {"num_train_epochs": 3.0, "classifier_dropout": 0.1, "train_batch_size": 32}
    assert recorded_settings(old, family_epochs=3.0) == {
        "num_train_epochs": None,
        "dropout_rate": 0.1,
        "train_batch_size": 32,
    }
    # another value was given explicitly (old runs recorded the flag), so it stays
    assert recorded_settings(old | {"num_train_epochs": 1.0}, 3.0)["num_train_epochs"] == 1.0
    # a config written by the driver records "given" and is read as it is
    new = {"num_train_epochs": 3.0, "given": ["num_train_epochs"]}
    assert recorded_settings(new, 3.0) == new


def test_an_old_ner_config_with_window_stride_reads_as_doc_stride():
    from keras_bert.training.run_config import recorded_settings

    old = {"window_stride": 64, "max_seq_length": 128}  # NER's config.json before the rename
    assert recorded_settings(old) == {"doc_stride": 64, "max_seq_length": 128}
