"""The one table of flags that act only with (or without) another (`flag_dependencies.TABLE`): it
names only flags its programs define, and every entry is refused, by the program itself, with its
one-line message and exit code 2, before anything is prepared, read or loaded; a flag counts as
given when it is on the command line, its default value included.

Every program runs in this process: the fine-tuning recipes and pretraining through their `main`
on their own FlagValues (nothing is prepared: `trainer.prepare` fails the test), the hand-written
recipes through `recipe_process.run_recipe_main`, `serving.server` through its `main`."""

import dataclasses
import re
import runpy
import subprocess
import sys

import pytest
from absl import flags

import serving.server
from keras_bert.data import text_files
from keras_bert.training import arg_flags
from keras_bert.training import flag_dependencies, trainer
from keras_bert.training.families import classification, distillation, ner, squad, swag
from keras_bert.training.pretraining import PretrainConfig
from keras_bert.training.recipe import recipe_main
from tests.recipes.recipe_process import (
    REPO,
    recipe_env,
    run_recipe,
    run_recipe_main,
    usage_error,
)
from tests.training import tiny_family

TABLE = flag_dependencies.TABLE
FILE = str(REPO / "README.md")  # a file that exists (SQuAD's and distillation's checks look)

# Table -> (program name in the message, what runs it, the flags it needs to get that far).
FAMILIES = {
    "training": (tiny_family.FAMILY, "tiny_family.py", {"output_dir": "o"}),
    "classification": (
        classification.FAMILY,
        "run_classifier.py",
        {"output_dir": "o", "task_name": "sst2"},
    ),
    "squad": (
        squad.FAMILY,
        "run_squad.py",
        {"output_dir": "o", "train_file": FILE, "predict_file": FILE},
    ),
    "ner": (ner.FAMILY, "run_ner.py", {"output_dir": "o", "data_dir": "conll"}),
    "swag": (swag.FAMILY, "run_swag.py", {"output_dir": "o", "train_file": "t", "dev_file": "d"}),
    "distillation": (
        distillation.FAMILY,
        "distill.py",
        {"output_dir": "o", "teacher": FILE, "task_name": "sst2"},
    ),
}
PRETRAINING = {"input_file": "in", "output_dir": "o", "vocab_file": "v"}
RECIPES = {  # hand-written recipes: the flags they require
    "evaluate": {"data": "d", "output_dir": "o"},
    "batch_predict": {"model": "m", "input": "i", "output_dir": "o"},
    "create_pretraining_data": {"input_file": "i", "output_file": "o", "vocab_file": "v"},
}
EMPTY = {"create_vocab", "extract_features", "convert_checkpoint", "export"}
# A value for a flag whose default is None (or that must be a particular one).
VALUES = {
    "tpu": "local",
    "model_name": "m",
    "export_dir": "models",
    "export_dtype": "bfloat16",
    "export_quantize": "int8",
    "learning_rate": "1e-4",
    "num_train_epochs": "1",
    "max_train_examples": "4",
    "max_eval_examples": "4",
    "early_stopping_patience": "1",
    "max_train_seconds": "60",
    "null_threshold_dev_fraction": "0.2",
    "feature_mode": "last",
    "train_file": FILE,
    "predict_file": FILE,
    "dev_file": FILE,
    "task_name": "sst2",
    "text_b_column": "b",
    "data_dir": "glue",
    "layer_map": "0",
    "student_layers": "1",
    "init_checkpoint": "ckpt",
    "bert_config_file": "bert_config.json",
    "predictions": "preds",
    "model": "m",
    "compare": "c",
    "server": "localhost:8500",
    "server_model_name": "a",
    "compare_server_model_name": "b",
    "behaviour_tests": "t.jsonl",
    "machine_cost_per_hour": "1.5",
    "gate": "gate.json",
    "baseline": "report",
    "batching_parameters_file": "batching.config",
    "model_base_path": "/models/m",
    "model_config_file": "/models/models.config",
}


def entries():
    for table, rows in TABLE.items():
        for index, entry in enumerate(rows):
            yield pytest.param(table, index, id=f"{table}-{index}-{entry.flag}")


def _value(flag, default):
    """Command-line words giving `flag`: the opposite of a boolean's default, else the default
    itself (given is given, whatever the value), else a value from VALUES."""
    if isinstance(default, bool):
        return [f"--no{flag}"] if default else [f"--{flag}"]
    value = VALUES.get(flag, default) if default in (None, "") else default
    if isinstance(value, (list, tuple)):
        value = ",".join(map(str, value))
    return [f"--{flag}={value}"]


OTHER = {"runner": "DataflowRunner"}  # a value other than the default one an entry needs


def _partner(condition, holds: bool) -> dict:
    """Flags to set (a value) or unset (None) so that `condition` holds or not."""
    text = condition.text
    if text == flag_dependencies.OWN_DATA.text:
        return {"task_name": "text_classification" if holds else "sst2"}
    if text == flag_dependencies.GLUE.text:
        return {"task_name": "sst2" if holds else "text_classification"}
    if m := re.fullmatch(r"with --(\w+)=(\w+)", text):  # not held: the default, or another
        return {m[1]: m[2] if holds else OTHER.get(m[1])}
    if m := re.fullmatch(r"with --(\w+) > 0", text):
        return {m[1]: None if holds else "0"}
    if m := re.fullmatch(r"without --(\w+)", text):
        return {m[1]: None if holds else VALUES.get(m[1], "1")}
    names = re.findall(r"--(\w+)", text)
    assert text == "with " + " or ".join(f"--{n}" for n in names), text
    return {names[0]: VALUES.get(names[0], True)} if holds else dict.fromkeys(names)


def _argv(table: str, index: int, required: dict, defaults: dict) -> list[str]:
    """The command line that gives entry `index`'s flag with every earlier entry of that flag
    satisfied and its own condition not: the flags `required`, then the partners."""
    entry = TABLE[table][index]
    settings = dict(required)
    for earlier in TABLE[table][:index]:
        if earlier.flag == entry.flag:
            settings |= _partner(earlier.condition, holds=True)
    settings |= _partner(entry.condition, holds=False)
    if table == "distillation" and settings.get("task_name") is None:
        settings |= {"train_file": FILE, "dev_file": FILE}  # its data without a GLUE task
    argv = _value(entry.flag, defaults[entry.flag])
    for name, value in settings.items():
        if value is True:
            argv.append(f"--{name}")
        elif value is not None:
            argv.append(f"--{name}={value}")
    return argv


@pytest.mark.parametrize("table, index", list(entries()))
def test_each_entry_is_a_one_line_usage_error_before_anything_starts(
    table, index, capsys, monkeypatch
):
    entry = TABLE[table][index]
    expected = f"--{entry.flag} acts only {entry.condition.text} ({entry.why}); it would be ignored"
    assert entry.message() == expected
    if table in FAMILIES or table == "pretraining":
        if table == "pretraining":
            cls, program, required = PretrainConfig, "run_pretraining.py", PRETRAINING
            recipe = runpy.run_path(str(REPO / "recipes" / "run_pretraining.py"), run_name="rp")
            main_of = recipe["main_of"]
        else:
            family, program, required = FAMILIES[table]
            cls, main_of = family.Args, lambda fv: recipe_main(family, fv)

            def prepared(*args):
                raise AssertionError("prepared")

            monkeypatch.setattr(trainer, "prepare", prepared)
        fv = flags.FlagValues()
        arg_flags.define_flags(cls, flag_values=fv)
        defaults = {f.name: cls.default(f.name) for f in dataclasses.fields(cls)}
        fv([program, *_argv(table, index, required, defaults)])
        err = usage_error(capsys, monkeypatch, program, lambda: main_of(fv)([program]))
        assert err == f"{program}: error: {expected}\n"
    elif table == "serving.server":
        defaults = {name: flag.default for name, flag in _server_flags().items()}
        try:
            flags.FLAGS(["serving.server", *_argv(table, index, {}, defaults)])
            err = usage_error(capsys, monkeypatch, "server.py", lambda: serving.server.main([]))
        finally:
            flags.FLAGS.unparse_flags()
        assert err == f"serving.server: error: {expected}\n"
    else:
        defaults = _recipe_flags(table)
        argv = _argv(table, index, RECIPES[table], defaults)
        program = f"{table}.py"
        err = usage_error(capsys, monkeypatch, program, lambda: run_recipe_main(table, *argv))
        assert err == f"{program}: error: {expected}\n"


def _recipe_flags(name: str) -> dict:
    """recipes/<name>.py's flags (name -> default), defined in this process then removed."""
    module = f"flags_of_{name}"
    runpy.run_path(str(REPO / "recipes" / f"{name}.py"), run_name=module)
    defined = list(flags.FLAGS.flags_by_module_dict().get(module, []))
    try:
        return {flag.name: flag.default for flag in defined}
    finally:
        for flag in defined:
            delattr(flags.FLAGS, flag.name)


def _server_flags() -> dict:
    return {f.name: f for f in flags.FLAGS.flags_by_module_dict()["serving.server"]}


def test_the_table_names_only_flags_the_programs_define():
    assert set(TABLE) == {*FAMILIES, "pretraining", *RECIPES, "serving.server", *EMPTY}
    defined = {t: {f.name for f in dataclasses.fields(f[0].Args)} for t, f in FAMILIES.items()}
    defined["pretraining"] = {f.name for f in dataclasses.fields(PretrainConfig)}
    defined |= {name: set(_recipe_flags(name)) for name in RECIPES}
    defined["serving.server"] = set(_server_flags())
    for table in EMPTY:
        assert TABLE[table] == (), table
    for table, names in defined.items():
        assert TABLE[table], table
        assert flag_dependencies.flag_names(table) <= names, (
            table,
            flag_dependencies.flag_names(table) - names,
        )
    # Each argument set checks its own table (a family's is named as the family).
    for table, (family, _, _) in FAMILIES.items():
        assert family.Args.FLAG_TABLE == (family.name if table != "training" else "training")
    assert PretrainConfig.FLAG_TABLE == "pretraining"
    # The own-data task names the table reads are the classification reader's.
    assert flag_dependencies.OWN_DATA_TASKS == text_files.TASK_TYPES


def test_the_partner_is_read_by_its_value_and_a_call_from_python_gives_what_differs():
    # --export_dir= (empty) is refused as a path given empty, before its partners are read.
    fv = flags.FlagValues()
    arg_flags.define_flags(classification.ClassifierArgs, flag_values=fv)
    fv(["p", "--task_name=sst2", "--output_dir=o", "--export_dir=", "--export_tflite"])
    with pytest.raises(ValueError) as e:
        arg_flags.from_flags(classification.ClassifierArgs, fv)
    assert str(e.value) == "--export_dir is empty"
    # From Python a field counts as given when it is not its default.
    kept = classification.ClassifierArgs(task_name="sst2", output_dir="o", export_tflite=False)
    assert "export_tflite" not in kept.given()
    with pytest.raises(ValueError) as e:
        classification.ClassifierArgs(task_name="sst2", output_dir="o", export_tflite=True)
    assert str(e.value) == (
        "--export_tflite acts only with --export_dir (it adds model.tflite to the export); it "
        "would be ignored"
    )
    assert (
        classification.ClassifierArgs(
            task_name="sst2", output_dir="o", export_tflite=True, export_dir="models"
        ).litert
        == "float32"
    )


def test_the_first_missing_partner_of_the_table_is_the_one_named():
    values = {"export_dir": None, "strategy": "default", "tpu": "x", "model_name": "m"}
    with pytest.raises(flag_dependencies.MissingPartnerError) as e:
        flag_dependencies.check(
            "training", values | {"num_train_epochs": None}, {"model_name", "tpu"}
        )
    assert (
        str(e.value)
        == "--tpu acts only with --strategy=tpu (the TPU to connect to); it would be ignored"
    )
    flag_dependencies.check(
        "training", values | {"strategy": "tpu", "export_dir": "m"}, {"model_name", "tpu"}
    )


@pytest.mark.slow  # two fresh Pythons that import TensorFlow: about 10 s each
@pytest.mark.parametrize(
    "script, argv, message",
    [
        (
            "run_classifier.py",
            ["--task_name=sst2", "--output_dir=o", "--export_quantize=int8"],
            "--export_quantize acts only with --export_dir (it quantizes the exported "
            "model.tflite); it would be ignored",
        ),
        (
            "run_squad.py",
            [f"--train_file={FILE}", "--output_dir=o", "--early_stopping_patience=2"],
            "--early_stopping_patience acts only with --predict_file (SQuAD evaluates during "
            "training on the prediction file); it would be ignored",
        ),
    ],
)
def test_the_reported_pairs_end_the_recipe_with_one_line(tmp_path, script, argv, message):
    proc = run_recipe(script, *argv, cwd=tmp_path, timeout=300)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.strip().splitlines()[-1] == f"{script}: error: {message}"
    assert "Traceback" not in proc.stderr and list(tmp_path.iterdir()) == []


def test_the_server_refuses_a_batching_file_without_batching(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "serving.server",
            "--model_base_path=/nowhere",
            f"--batching_parameters_file={tmp_path / 'batching.config'}",
        ],
        cwd=REPO,
        env=recipe_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "serving.server: error: --batching_parameters_file acts only with --enable_batching "
        "(batched model calls); it would be ignored\n"
    )
