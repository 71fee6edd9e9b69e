"""The one argument set (`keras_bert.training.args`): one flag per field for every family, the
usage errors with their messages, `given()` from the command line, and the derived epochs of
`batches.Schedule.of`."""

import dataclasses
import typing

import pytest
from absl import flags

from keras_bert.training import arg_flags
from keras_bert.training import batches
from keras_bert.training.args import FinetuneArgs, TrainingArgs
from keras_bert.training.argument_set import Resolution, fields_of
from keras_bert.training.families import classification, distillation, ner, squad, swag
from keras_bert.training.families.classification import ClassifierArgs

FAMILIES = {
    "classification": classification.FAMILY,
    "ner": ner.FAMILY,
    "swag": swag.FAMILY,
    "squad": squad.FAMILY,
    "distillation": distillation.FAMILY,
}


def _flag_values(cls, argv=None):
    fv = flags.FlagValues()
    arg_flags.define_flags(cls, flag_values=fv)
    if argv is not None:
        fv(["prog", *argv])
    return fv


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_field_is_one_flag_with_the_fields_default(name):
    family = FAMILIES[name]
    assert family.name == name
    fv = _flag_values(family.Args)
    fields = dataclasses.fields(family.Args)
    assert sorted(fv) == sorted(f.name for f in fields)  # one flag per field, no other
    for f in fields:
        expected = None if f.metadata["derived"] else f.default
        assert fv[f.name].default == expected, f.name
        choices = f.metadata["choices"]
        if choices is not None and isinstance(choices[0], str):  # an enum flag: absl adds <a|b>:
            assert fv[f.name].help == f"<{'|'.join(choices)}>: {f.metadata['help']}", f.name
        else:
            assert fv[f.name].help == f.metadata["help"], f.name
    common = FinetuneArgs if name != "distillation" else TrainingArgs
    assert {f.name for f in dataclasses.fields(common)} <= set(fv)
    assert {f.name for f in dataclasses.fields(common) if f.metadata["derived"]} == {
        "learning_rate",
        "num_train_epochs",
    }


def test_a_family_default_is_the_flags_default():
    assert _flag_values(swag.SwagArgs)["train_batch_size"].default == 16
    assert _flag_values(swag.SwagArgs)["eval_batch_size"].default == 32
    assert _flag_values(squad.SquadArgs)["max_seq_length"].default == 384
    # NER trains on batches of random lengths (grouping cost it ~1 dev F1 on CoNLL-2003); the
    # other families group by length.
    assert _flag_values(ner.NerArgs)["group_by_length"].default is False
    assert _flag_values(ClassifierArgs)["group_by_length"].default is True
    assert _flag_values(squad.SquadArgs)["group_by_length"].default is True
    assert _flag_values(ClassifierArgs)["train_batch_size"].default == 32
    assert _flag_values(ClassifierArgs)["max_seq_length"].default == 128
    assert (
        swag.SwagArgs.default("train_batch_size"),
        TrainingArgs.default("train_batch_size"),
    ) == (16, 32)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"train_batch_size": 0}, "--train_batch_size must be >= 1, got 0"),
        ({"ema_momentum": 1.0}, "--ema_momentum must be in [0, 1) (0: no weight average), got 1.0"),
        (
            {"init_checkpoint": "minilm_l6_h384_uncased", "preset": "bert_tiny"},
            "--init_checkpoint=minilm_l6_h384_uncased and --preset=bert_tiny both given: use "
            "--init_checkpoint for a pretrained encoder, or --preset (with --vocab_file) for a randomly "
            "initialised one, not both",
        ),
        (
            {"mixed_precision": "float16"},
            "--mixed_precision must be one of float32, mixed_float16, mixed_bfloat16, got 'float16'",
        ),
        ({"max_train_examples": 0}, "--max_train_examples must be >= 1, got 0"),
        # the field's rule (every program's), then fine-tuning's own check
        ({"max_seq_length": 0}, "--max_seq_length must be >= 1, got 0"),
        (
            {"max_seq_length": 1},
            "--max_seq_length must be >= 2 for single texts ([CLS] [SEP]), got 1",
        ),
    ],
)
def test_usage_errors_name_the_flag_and_its_rule(kw, message):
    with pytest.raises(ValueError) as e:
        ClassifierArgs(task_name="sst2", output_dir="o", **kw)
    assert str(e.value) == message


def test_a_bad_value_on_the_command_line_fails_in_from_flags():
    fv = _flag_values(ClassifierArgs, ["--task_name=sst2", "--output_dir=o", "--ema_momentum=1"])
    with pytest.raises(ValueError) as e:
        arg_flags.from_flags(ClassifierArgs, fv)
    assert str(e.value) == "--ema_momentum must be in [0, 1) (0: no weight average), got 1.0"
    fv = _flag_values(
        distillation.DistillArgs, ["--teacher=t", "--output_dir=o", "--layer_map=0,x"]
    )
    with pytest.raises(ValueError) as e:
        arg_flags.from_flags(distillation.DistillArgs, fv)
    assert str(e.value) == "--layer_map must be integers separated by commas, got 0,x"


def test_pretraining_flags_are_its_config_fields_with_the_same_checks():
    from keras_bert.training.pretraining import PretrainConfig

    fv = _flag_values(PretrainConfig)
    assert sorted(fv) == sorted(
        [f.name for f in dataclasses.fields(PretrainConfig)] + ["random_seed"]
    )
    assert (fv["seed"].default, fv["preset"].default, fv["optimizer"].default) == (
        12345,
        "bert_tiny",
        "adamw",
    )
    required = ["--input_file=a", "--output_dir=o", "--vocab_file=v"]
    config = arg_flags.from_flags(
        PretrainConfig, _flag_values(PretrainConfig, required + ["--ltr"])
    )
    assert (config.ltr, config.use_nsp, config.given()) == (
        True,
        False,
        ["input_file", "ltr", "output_dir", "vocab_file"],
    )
    with pytest.raises(ValueError) as e:
        arg_flags.from_flags(
            PretrainConfig, _flag_values(PretrainConfig, required + ["--train_batch_size=0"])
        )
    assert str(e.value) == "--train_batch_size must be >= 1, got 0"
    with pytest.raises(ValueError) as e:
        PretrainConfig(input_file="a", output_dir="o", vocab_file=None)
    assert str(e.value) == "--vocab_file is required"


def test_a_deprecated_spelling_is_read_as_its_flag_with_a_warning(caplog):
    from keras_bert.training.pretraining import PretrainConfig

    required = ["--input_file=a", "--output_dir=o", "--vocab_file=v"]
    with caplog.at_level("WARNING", logger=arg_flags.__name__):
        config = arg_flags.from_flags(
            PretrainConfig, _flag_values(PretrainConfig, required + ["--random_seed=7"])
        )
    assert (config.seed, config.given()) == (7, ["input_file", "output_dir", "seed", "vocab_file"])
    assert [r.getMessage() for r in caplog.records] == ["--random_seed is deprecated: use --seed"]
    with pytest.raises(ValueError) as e:
        arg_flags.from_flags(
            PretrainConfig, _flag_values(PretrainConfig, required + ["--random_seed=7", "--seed=8"])
        )
    assert str(e.value) == "--random_seed is the deprecated spelling of --seed: give --seed only"
    caplog.clear()
    config = arg_flags.from_flags(PretrainConfig, _flag_values(PretrainConfig, required))
    assert (config.seed, "seed" in config.given(), caplog.records) == (12345, False, [])


# The settings pretraining shares with fine-tuning, with pretraining's defaults.
PRETRAINING_DEFAULTS = {
    "output_dir": None,  # required
    "vocab_file": None,  # required
    "do_lower_case": True,
    "preset": "bert_tiny",
    "bert_config_file": None,
    "init_checkpoint": None,
    "max_seq_length": 128,
    "train_batch_size": 32,
    "learning_rate": 1e-4,
    "optimizer": "adamw",
    "gradient_accumulation_steps": 1,
    "save_checkpoints_steps": 100,
    "seed": 12345,
}


def test_pretraining_takes_the_settings_it_shares_from_the_catalogue():
    from keras_bert.training.args import RuntimeArgs
    from keras_bert.training.pretraining import PretrainConfig

    own = {f.name: f for f in dataclasses.fields(PretrainConfig)}
    catalogue = {f.name: f for f in dataclasses.fields(FinetuneArgs)}
    runtime = {f.name for f in dataclasses.fields(RuntimeArgs)}
    assert set(own) & set(catalogue) == set(PRETRAINING_DEFAULTS) | runtime
    own_hints = typing.get_type_hints(PretrainConfig)
    catalogue_hints = typing.get_type_hints(FinetuneArgs)
    fv = _flag_values(PretrainConfig)
    for name, default in PRETRAINING_DEFAULTS.items():
        mine, theirs = own[name].metadata, catalogue[name].metadata
        for key in ("help", "choices", "rule", "check"):
            assert mine[key] == theirs[key], (name, key)
        assert own_hints[name] == catalogue_hints[name], name
        assert (PretrainConfig.default(name), fv[name].default) == (default, default), name
        assert mine["required"] is (name in ("output_dir", "vocab_file")), name
        assert mine["derived"] is False, name
        assert mine["deprecated_name"] == ("random_seed" if name == "seed" else None), name
    # What fine-tuning derives when not given has pretraining's concrete value.
    config = arg_flags.from_flags(
        PretrainConfig,
        _flag_values(PretrainConfig, ["--input_file=a", "--output_dir=o", "--vocab_file=v"]),
    )
    assert {
        name: getattr(config, name) for name in PRETRAINING_DEFAULTS
    } == PRETRAINING_DEFAULTS | {
        "output_dir": "o",
        "vocab_file": "v",
    }
    with pytest.raises(ValueError) as e:  # the catalogue's rule
        PretrainConfig(input_file="a", output_dir="o", vocab_file="v", max_seq_length=0)
    assert str(e.value) == "--max_seq_length must be >= 1, got 0"


def test_given_is_exactly_the_flags_on_the_command_line():
    argv = [
        "--task_name=sst2",
        "--output_dir=o",
        "--train_batch_size=32",
        "--learning_rate=3e-5",
        "--nogroup_by_length",
    ]
    args = arg_flags.from_flags(ClassifierArgs, _flag_values(ClassifierArgs, argv))
    # --train_batch_size=32 is the default, yet the user gave it.
    assert args.given() == [
        "group_by_length",
        "learning_rate",
        "output_dir",
        "task_name",
        "train_batch_size",
    ]
    assert (args.train_batch_size, args.learning_rate, args.group_by_length) == (32, 3e-5, False)
    assert args.num_train_epochs is None and args.dropout_rate == 0.1
    # From Python (no command line): the fields that differ from their defaults.
    same = ClassifierArgs(
        task_name="sst2",
        output_dir="o",
        train_batch_size=32,
        learning_rate=3e-5,
        group_by_length=False,
    )
    assert same.given() == ["group_by_length", "learning_rate", "output_dir", "task_name"]
    listed = arg_flags.from_flags(
        distillation.DistillArgs,
        _flag_values(
            distillation.DistillArgs,
            ["--teacher=.", "--output_dir=o", "--task_name=sst2", "--layer_map=0,2"],
        ),
    )
    assert listed.layer_map == (0, 2) and listed.given() == [
        "layer_map",
        "output_dir",
        "task_name",
        "teacher",
    ]


def test_schedule_raises_not_given_epochs_to_min_train_steps():
    args = ClassifierArgs(task_name="sst2", output_dir="o", train_batch_size=32)
    resolution = Resolution()
    schedule = batches.Schedule.of(args, 64, classification.FAMILY.epochs, resolution)
    # 64 rows / batch 32 = 2 steps an epoch; the family's 3 epochs give 6 < 100 steps.
    assert schedule == batches.Schedule(
        steps_per_epoch=2, epochs=50, total_batches=100, num_train_steps=100, num_train_epochs=50.0
    )
    assert resolution.derived == {
        "num_train_epochs": {
            "value": 50.0,
            "why": "not given: 64 examples give 6 optimizer steps in 3 epochs, raised to "
            "50 epochs to reach --min_train_steps=100",
        }
    }


def test_schedule_never_changes_given_epochs():
    # The example: a given value is never changed by another flag's default.
    args = ClassifierArgs(task_name="sst2", output_dir="o", train_batch_size=32, num_train_epochs=1)
    resolution = Resolution()
    schedule = batches.Schedule.of(args, 64, classification.FAMILY.epochs, resolution)
    assert schedule == batches.Schedule(
        steps_per_epoch=2, epochs=1, total_batches=2, num_train_steps=2, num_train_epochs=1.0
    )
    assert resolution.derived == {}


def test_schedule_of_the_family_epochs_and_accumulation():
    resolution = Resolution()
    args = ClassifierArgs(
        task_name="sst2",
        output_dir="o",
        train_batch_size=32,
        min_train_steps=0,
        gradient_accumulation_steps=2,
    )
    # 9 batches make 4 whole updates of 2: the 9th would end the run inside an update.
    assert batches.Schedule.of(args, 65, 3.0, resolution) == batches.Schedule(
        steps_per_epoch=3,
        epochs=3,
        total_batches=8,
        num_train_steps=4,
        num_train_epochs=3.0,
        accumulation=2,
    )
    assert resolution.derived == {
        "num_train_epochs": {"value": 3.0, "why": "not given: the family's 3 epochs"}
    }
    # --min_train_steps acts only without --num_train_epochs: back to its default beside it.
    fractional = dataclasses.replace(
        args, num_train_epochs=1.5, min_train_steps=TrainingArgs.default("min_train_steps")
    )
    assert batches.Schedule.of(fractional, 64, 3.0) == batches.Schedule(
        steps_per_epoch=2,
        epochs=2,
        total_batches=2,
        num_train_steps=1,
        num_train_epochs=1.5,
        accumulation=2,
    )
    with pytest.raises(ValueError, match="^no training examples$"):
        batches.Schedule.of(args, 0, 3.0)
    # Fewer batches than one update: refused, naming both flags (it trained nothing before).
    short = dataclasses.replace(fractional, num_train_epochs=1.0)
    with pytest.raises(ValueError) as refused:
        batches.Schedule.of(short, 20, 3.0)
    assert str(refused.value) == (
        "--num_train_epochs=1 of 20 examples gives 1 batch of 32, fewer than the 2 of one "
        "optimizer update (--gradient_accumulation_steps=2): train more epochs or accumulate "
        "fewer batches"
    )


def test_fields_of_takes_catalogue_fields_with_a_programs_changes():
    taken = fields_of(
        "Taken",
        FinetuneArgs,
        {
            "init_checkpoint": {"required": True},
            "eval_batch_size": {"default": 8, "deprecated_name": "batch_size"},
        },
    )
    assert [f.name for f in dataclasses.fields(taken)] == ["init_checkpoint", "eval_batch_size"]
    fv = _flag_values(taken)
    assert sorted(fv) == ["batch_size", "eval_batch_size", "init_checkpoint"]
    catalogue = FinetuneArgs.__dataclass_fields__["eval_batch_size"].metadata
    assert (fv["eval_batch_size"].default, fv["eval_batch_size"].help) == (8, catalogue["help"])
    with pytest.raises(ValueError) as e:  # the catalogue's rule, under the catalogue's name
        arg_flags.from_flags(taken, _flag_values(taken, ["--init_checkpoint=c", "--batch_size=0"]))
    assert str(e.value) == "--eval_batch_size must be >= 1, got 0"
    # The catalogue itself is unchanged.
    assert FinetuneArgs.default("eval_batch_size") == 64
    assert FinetuneArgs.__dataclass_fields__["init_checkpoint"].metadata["required"] is False
    assert FinetuneArgs.__dataclass_fields__["eval_batch_size"].metadata["deprecated_name"] is None


def test_a_required_field_may_be_given_by_its_deprecated_spelling():
    required = fields_of(
        "Required",
        TrainingArgs,
        {"export_dir": {"required": True, "deprecated_name": "export_base"}},
    )
    with pytest.raises(flags.IllegalFlagValueError) as e:
        _flag_values(required, [])
    assert str(e.value) == "flags export_dir=None, export_base=None: --export_dir is required"
    by_old = arg_flags.from_flags(required, _flag_values(required, ["--export_base=gs://b/m"]))
    assert (by_old.export_dir, by_old.given()) == ("gs://b/m", ["export_dir"])
