"""The hand-written recipes take the settings they share with the fine-tuning and pretraining
recipes from the one catalogue (`argument_set.fields_of`): the flag's name, help text, type and choices
are the catalogue field's, its default the field's or the program's own stated one; each older
spelling of the program still works, sets the same setting to the same value and warns.

Each recipe's flags are defined in this process (runpy) and removed after the test; only the flag
reading is under test."""

import dataclasses
import logging
import runpy
import sys
import typing

import pytest
from absl import flags

from keras_bert.training import arg_flags
from keras_bert.training.args import FinetuneArgs, TrainingArgs
from keras_bert.training.pretraining import PretrainConfig
from tests.recipes.recipe_process import REPO, run_recipe_main

# recipe -> (its argument set's name, the catalogue, the fields with a default of their own,
# the flags it requires).
RECIPES = {
    "evaluate": (
        "EvaluateArgs",
        TrainingArgs,
        {"eval_batch_size": 32},
        ["--data=d", "--output_dir=o"],
    ),
    "batch_predict": (
        "BatchPredictArgs",
        TrainingArgs,
        {},
        ["--model=m", "--input=i", "--output_dir=o"],
    ),
    "extract_features": (
        "FeatureArgs",
        FinetuneArgs,
        {"eval_batch_size": 8},
        ["--input_file=i", "--output_file=o", "--init_checkpoint=c"],
    ),
    "convert_checkpoint": (
        "SourceArgs",
        FinetuneArgs,
        {},
        ["--init_checkpoint=c", "--output_dir=o"],
    ),
    "create_pretraining_data": (
        "PretrainingDataArgs",
        PretrainConfig,
        {},
        ["--input_file=i", "--output_file=o", "--vocab_file=v"],
    ),
}


@pytest.fixture
def recipe_flags():
    """define(name) -> the argument set of recipes/<name>.py, its flags defined on absl's FLAGS."""
    defined = []

    def define(name):
        module = f"catalogue_flags_of_{name}"
        defined.append(module)
        return runpy.run_path(str(REPO / "recipes" / f"{name}.py"), run_name=module)[
            RECIPES[name][0]
        ]

    yield define
    flags.FLAGS.unparse_flags()
    for module in defined:
        for flag in list(flags.FLAGS.flags_by_module_dict().get(module, [])):
            delattr(flags.FLAGS, flag.name)


def _read(cls, name, *argv):
    flags.FLAGS.unparse_flags()
    flags.FLAGS([name, *RECIPES[name][3], *argv])
    return arg_flags.from_flags(cls)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_the_shared_flags_are_the_catalogues(recipe_flags, name):
    cls = recipe_flags(name)
    _, catalogue, own_defaults, _ = RECIPES[name]
    for field in dataclasses.fields(cls):
        base = catalogue.__dataclass_fields__[field.name]
        flag = flags.FLAGS[field.name]
        assert flag.help == base.metadata["help"], field.name
        assert flag.default == own_defaults.get(field.name, base.default), field.name
        assert field.type == typing.get_type_hints(catalogue)[field.name], field.name
    assert flags.FLAGS[field.name].help  # the loop ran


@pytest.mark.parametrize(
    "name, old, new, field, value",
    [
        ("evaluate", "--batch_size=5", "--eval_batch_size=5", "eval_batch_size", 5),
        ("batch_predict", "--batch_size=4", "--eval_batch_size=4", "eval_batch_size", 4),
        ("extract_features", "--batch_size=2", "--eval_batch_size=2", "eval_batch_size", 2),
        ("create_pretraining_data", "--random_seed=9", "--seed=9", "seed", 9),
    ],
)
def test_an_old_spelling_sets_the_same_setting_and_warns(
    recipe_flags, caplog, name, old, new, field, value
):
    cls = recipe_flags(name)
    with caplog.at_level(logging.WARNING, logger=arg_flags.__name__):
        by_new = _read(cls, name, new)
        assert caplog.records == []
        by_old = _read(cls, name, old)
    assert getattr(by_new, field) == getattr(by_old, field) == value
    assert by_old == by_new and field in by_old.given()
    old_name, new_name = old.split("=")[0], new.split("=")[0]
    assert [r.getMessage() for r in caplog.records] == [f"{old_name} is deprecated: use {new_name}"]
    with pytest.raises(ValueError) as e:
        _read(cls, name, old, new)
    assert str(e.value) == (
        f"{old_name} is the deprecated spelling of {new_name}: give {new_name} only"
    )


def test_an_old_spelling_counts_as_given_for_the_flags_that_act_only_with_another(
    capsys, monkeypatch
):
    monkeypatch.setattr(sys, "argv", ["evaluate.py"])  # the program named in the message
    argv = ["--data=d", "--output_dir=o", "--predictions=p", "--batch_size=4"]
    with pytest.raises(SystemExit) as e:
        run_recipe_main("evaluate", *argv)
    assert e.value.code == 2
    assert capsys.readouterr().err == (
        "evaluate.py: error: --eval_batch_size acts only without --predictions (it runs a model; "
        "--predictions scores recorded outputs); it would be ignored\n"
    )
