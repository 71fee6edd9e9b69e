"""A path flag given empty (`--output_dir=`, an unset shell variable) is refused before any work,
in every program that takes one: one line naming the flag, exit status 2, nothing written in the
working directory. A required flag empty is "--<flag> is required" (the catalogue's rule,
`keras_bert.cli.check_not_empty`); an optional one given empty is "--<flag> is empty".

The recipes and `serving.server` run in process (`recipe_process.run_recipe_main`, the server's
`main`): the check fires before any file is read or any model is loaded, so the other flags name
paths that need not exist. `python -m export` runs as a subprocess: its --model_name is also the
server's flag, so the two cannot be defined in one process.
"""

import os
import subprocess
import sys

import pytest
from absl import flags

import serving.server
from keras_bert import cli
from keras_bert.training import arg_flags, trainer
from keras_bert.training.families import classification, squad
from keras_bert.training.recipe import recipe_main
from tests.recipes.recipe_process import REPO, recipe_env, run_recipe_main

# Each program's flags with every required one given; the case's flag is then given empty.
PROGRAMS = {
    "batch_predict": ["--model=m", "--input=in.tsv", "--text_column=sentence", "--output_dir=o"],
    "evaluate": ["--model=m", "--data=d.tsv", "--text_column=sentence", "--output_dir=o"],
    "extract_features": ["--input_file=in.txt", "--output_file=o.jsonl", "--init_checkpoint=c"],
    "create_vocab": ["--input_file=in.txt", "--vocab_file=v.txt"],
    "create_pretraining_data": [
        "--input_file=in.txt",
        "--output_file=o.tfrecord",
        "--vocab_file=v.txt",
    ],
    "convert_checkpoint": ["--init_checkpoint=c", "--output_dir=o"],
}
# A flag that acts only with another is given with it.
PARTNERS = {"baseline": ["--gate=g.json"]}

CASES = [
    ("batch_predict", "model", "is required"),
    ("batch_predict", "input", "is required"),
    ("batch_predict", "output_dir", "is required"),
    ("evaluate", "data", "is required"),
    ("evaluate", "output_dir", "is required"),
    ("evaluate", "model", "is empty"),
    ("evaluate", "compare", "is empty"),
    ("evaluate", "predictions", "is empty"),
    ("evaluate", "train_data", "is empty"),
    ("evaluate", "gate", "is empty"),
    ("evaluate", "baseline", "is empty"),
    ("evaluate", "behaviour_tests", "is empty"),
    ("extract_features", "input_file", "is required"),
    ("extract_features", "output_file", "is required"),
    ("extract_features", "init_checkpoint", "is required"),  # a catalogue field
    ("create_vocab", "input_file", "is required"),
    ("create_vocab", "vocab_file", "is required"),
    ("create_pretraining_data", "input_file", "is required"),
    ("create_pretraining_data", "output_file", "is required"),
    ("create_pretraining_data", "vocab_file", "is required"),  # a catalogue field
    ("convert_checkpoint", "output_dir", "is required"),
    ("convert_checkpoint", "init_checkpoint", "is required"),  # a catalogue field
]


@pytest.mark.parametrize("program, flag, refusal", CASES)
@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_path_flag_is_refused_before_any_work(
    tmp_path, monkeypatch, capsys, program, flag, refusal, empty
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", [f"{program}.py"])
    argv = [a for a in PROGRAMS[program] if not a.startswith(f"--{flag}=")]
    argv += PARTNERS.get(flag, [])
    with pytest.raises(SystemExit) as e:
        run_recipe_main(program, *argv, f"--{flag}={empty}")
    assert e.value.code == 2
    assert capsys.readouterr().err == f"{program}.py: error: --{flag} {refusal}\n"
    assert os.listdir(tmp_path) == []


# The catalogue's path fields (`argument_set.arg(path=True)`), in the training recipes.
FAMILY_CASES = [
    (classification.FAMILY, "run_classifier", ["--task_name=sst2", "--output_dir=o"], flag, refusal)
    for flag, refusal in [
        ("output_dir", "is required"),
        ("data_dir", "is empty"),
        ("train_file", "is empty"),
        ("dev_file", "is empty"),
        ("export_dir", "is empty"),
        ("init_checkpoint", "is empty"),
        ("bert_config_file", "is empty"),
        ("vocab_file", "is empty"),
    ]
] + [
    (squad.FAMILY, "run_squad", ["--output_dir=o", "--init_checkpoint=c"], flag, "is empty")
    for flag in ("train_file", "predict_file")
]


@pytest.mark.parametrize("family, program, required, flag, refusal", FAMILY_CASES)
def test_an_empty_path_flag_of_a_training_recipe_is_refused_before_any_work(
    tmp_path, monkeypatch, capsys, family, program, required, flag, refusal
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", [f"{program}.py"])
    monkeypatch.setattr(trainer, "prepare", lambda *a: pytest.fail("prepared"))
    fv = flags.FlagValues()
    arg_flags.define_flags(family.Args, flag_values=fv)
    fv([program, *[a for a in required if not a.startswith(f"--{flag}=")], f"--{flag}="])
    with pytest.raises(SystemExit) as e:
        recipe_main(family, fv)([program])
    assert e.value.code == 2
    assert capsys.readouterr().err == f"{program}.py: error: --{flag} {refusal}\n"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("flag", serving.server.PATH_FLAGS)
def test_an_empty_path_flag_of_the_server_is_refused_before_it_starts(
    tmp_path, monkeypatch, capsys, flag
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["server.py"])
    try:
        flags.FLAGS(["serving.server", "--model_base_path=models/sst2", f"--{flag}="])
        with pytest.raises(SystemExit) as e:
            serving.server.main([])
    finally:
        flags.FLAGS.unparse_flags()
    assert e.value.code == 2
    assert capsys.readouterr().err == f"serving.server: error: --{flag} is empty\n"
    assert os.listdir(tmp_path) == []


@pytest.mark.slow  # each starts a Python that imports TensorFlow: 7-20 s on 2 CPU cores
@pytest.mark.parametrize(
    "flag, refusal", [("model_dir", "is required"), ("require_blessing", "is empty")]
)
def test_an_empty_path_flag_of_export_is_refused_before_any_work(tmp_path, flag, refusal):
    argv = {"model_dir": "runs/sst2", "model_name": "sst2", "export_dir": "models", flag: ""}
    proc = subprocess.run(
        [sys.executable, "-m", "export", *(f"--{name}={value}" for name, value in argv.items())],
        cwd=tmp_path,
        env=recipe_env() | {"PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stderr == f"export: error: --{flag} {refusal}\n"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "value, required, message",
    [
        ("", True, "--output_dir is required"),
        (None, True, "--output_dir is required"),
        ("  ", False, "--output_dir is empty"),
        ("", False, "--output_dir is empty"),
    ],
)
def test_check_not_empty_refuses(value, required, message):
    with pytest.raises(ValueError) as e:
        cli.check_not_empty("output_dir", value, required)
    assert str(e.value) == message


@pytest.mark.parametrize("value, required", [(None, False), ("o", True), ("gs://b/o", False)])
def test_check_not_empty_passes(value, required):
    assert cli.check_not_empty("output_dir", value, required) is None
