"""Reports from the peers that own command-line flags (abseil-py, Hugging Face's HfArgumentParser,
TF Serving's model server and other argument parsers), each checked against our flags: the argument
sets' absl flags (`arg_flags.define_flags` / `from_flags`), `keras_bert.cli.parse_flags` and
`fail_usage`, the partner table (`flag_dependencies`) and `serving.server`'s flags.

Each test names its report (repo#number) and the value it expects. A test marked xfail(strict)
is a report that shows a fault of ours; its reason says what the fault is.

Everything runs in this process but the one test whose point is a fresh program's exit status and
output encoding (`serving.ssl_config`, a light program: no TensorFlow)."""

import dataclasses
import subprocess
import sys

import pytest
from absl import flags

import serving.server
from keras_bert import cli
from keras_bert.training import arg_flags, args, argument_set, flag_dependencies, trainer
from keras_bert.training.families import classification
from keras_bert.training.recipe import recipe_main
from tests.recipes.recipe_process import REPO, recipe_env, usage_error

PROGRAM = "run_classifier.py"
REQUIRED = ["--task_name=sst2", "--output_dir=o"]
CLS = classification.FAMILY.Args


def _parsed(*argv, cls=CLS):
    """A fresh FlagValues with the flags of `cls`, parsed from `argv` as a program parses them
    (`cli.parse_flags`); returns (the FlagValues, the arguments left after the flags)."""
    fv = flags.FlagValues()
    arg_flags.define_flags(cls, flag_values=fv)
    return fv, cli.parse_flags([PROGRAM, *argv], fv)


def _settings(*argv):
    fv, _ = _parsed(*argv)
    return arg_flags.from_flags(CLS, fv)


def _refusal(capsys, monkeypatch, *argv) -> str:
    """The stderr of parsing `argv` (which must end as a usage error: exit 2, one line)."""
    return usage_error(capsys, monkeypatch, PROGRAM, lambda: _parsed(*argv))


def _recipe_refusal(capsys, monkeypatch, *argv) -> str:
    """The stderr of the classification recipe's `main` on `argv` (parsed first), which must end
    as a usage error before anything is prepared."""

    def prepared(*_):
        raise AssertionError("prepared")

    monkeypatch.setattr(trainer, "prepare", prepared)
    fv, left = _parsed(*argv)
    return usage_error(
        capsys, monkeypatch, PROGRAM, lambda: recipe_main(classification.FAMILY, fv)(left)
    )


# ------------------------------------------------------------------------------------- booleans
def test_abseil_84_a_boolean_given_a_separate_false_is_refused_by_a_recipe(capsys, monkeypatch):
    """abseil/abseil-py#84 (and #143): `--boolean_flag False` reads as True, the "False" left over
    as a positional argument. Expected: the recipe refuses the left-over word ("unexpected
    arguments: False", exit 2) rather than exporting a model.tflite the user turned off."""
    fv, left = _parsed(*REQUIRED, "--export_dir=models", "--export_tflite", "False")
    assert (fv.export_tflite, left) == (True, [PROGRAM, "False"])
    err = _recipe_refusal(
        capsys, monkeypatch, *REQUIRED, "--export_dir=models", "--export_tflite", "False"
    )
    assert err == f"{PROGRAM}: error: unexpected arguments: False\n"


def test_abseil_84_the_server_refuses_a_boolean_given_a_separate_false(capsys, monkeypatch):
    """abseil/abseil-py#84 on `serving.server`: `--enable_batching False` leaves "False" as a
    positional argument and batching on. Expected: "serving.server: error: unexpected arguments:
    False", exit 2, before anything starts (as the recipes' `argument_set_main`)."""
    monkeypatch.setattr(serving.server.logging, "basicConfig", lambda **_: None)
    monkeypatch.setattr(serving.server.servable, "on_tensorflow_import", lambda fn: None)
    try:
        left = flags.FLAGS(
            ["serving.server", "--enable_batching", "False", "--prefer_tflite_model"]
            + ["--rest_api_port=0"]
        )
        assert (flags.FLAGS.enable_batching, left) == (True, ["serving.server", "False"])
        err = usage_error(capsys, monkeypatch, "server.py", lambda: serving.server.main(left))
    finally:
        flags.FLAGS.unparse_flags()
    assert err == "serving.server: error: unexpected arguments: False\n"


def test_abseil_143_a_negated_boolean_given_a_value_is_one_line(capsys, monkeypatch):
    """abseil/abseil-py#143 (a maintainer: "boolean flags do not take an additional argument",
    `--notea` means False): `--nogroup_by_length=false` is a refusal. Expected, in absl's words:
    "run_classifier.py: error: --nogroup_by_length=false does not take an argument", exit 2."""
    err = _refusal(capsys, monkeypatch, *REQUIRED, "--nogroup_by_length=false")
    assert err == f"{PROGRAM}: error: --nogroup_by_length=false does not take an argument\n"


def test_abseil_143_the_supported_boolean_spellings(capsys, monkeypatch):
    """abseil/abseil-py#143: `--flag`, `--noflag` and `--flag=true|false` are the forms. Expected:
    --nogroup_by_length and --group_by_length=false both read False and count as given; a value
    that is not a boolean is refused in one line."""
    for spelling in ("--nogroup_by_length", "--group_by_length=false"):
        settings = _settings(*REQUIRED, spelling)
        assert (settings.group_by_length, "group_by_length" in settings.given()) == (False, True)
    err = _refusal(capsys, monkeypatch, *REQUIRED, "--group_by_length=yes")
    assert err == (
        f"{PROGRAM}: error: flag --group_by_length=yes: ('Non-boolean argument to boolean "
        "flag', 'yes')\n"
    )


def test_tf_models_5610_a_boolean_given_none_is_one_line(capsys, monkeypatch):
    """tensorflow/models#5610: a wrapper passed `--ml_perf=None` (a boolean whose default is
    None) and absl refused it. Expected for our boolean with a None default, --do_lower_case:
    one line, exit 2, in absl's words."""
    err = _refusal(capsys, monkeypatch, *REQUIRED, "--do_lower_case=None")
    assert err == (
        f"{PROGRAM}: error: flag --do_lower_case=None: ('Non-boolean argument to boolean flag', "
        "'None')\n"
    )


def test_transformers_43469_an_optional_boolean_without_a_value():
    """huggingface/transformers#43469 (and #9823): an Optional[bool] field must take `--flag`
    with no value as True. Expected for --do_lower_case (bool | None): True bare, False as
    --nodo_lower_case, None (the checkpoint's) and not given when absent."""
    assert _settings(*REQUIRED, "--do_lower_case").do_lower_case is True
    assert _settings(*REQUIRED, "--nodo_lower_case").do_lower_case is False
    absent = _settings(*REQUIRED)
    assert (absent.do_lower_case, "do_lower_case" in absent.given()) == (None, False)


# ------------------------------------------------------------------------ required and empty
def test_abseil_42_a_required_flag_missing_or_empty(capsys, monkeypatch):
    """abseil/abseil-py#42: a required flag is a None default plus `mark_flag_as_required`.
    Expected: --output_dir missing is "--output_dir is required" (one line, exit 2, every missing
    one named), and given empty (`--output_dir=`, an unset shell variable) reads the same."""
    err = _refusal(capsys, monkeypatch, "--task_name=sst2")
    assert err == f"{PROGRAM}: error: --output_dir is required\n"
    err = _refusal(capsys, monkeypatch)
    assert err == f"{PROGRAM}: error: --output_dir is required; --task_name is required\n"
    with pytest.raises(ValueError) as e:
        _settings("--task_name=sst2", "--output_dir=")
    assert str(e.value) == "--output_dir is required"


# ---------------------------------------------------------------------- given twice, flagfiles
def test_abseil_428_a_flag_given_twice_and_under_two_spellings():
    """abseil/abseil-py#428: a single-valued flag given twice is absl's (the later value;
    allow_overwrite=False would refuse it). Expected: --train_batch_size=8 --train_batch_size=16
    reads 16, given once; a field given under its own and its deprecated spelling is refused."""
    settings = _settings(*REQUIRED, "--train_batch_size=8", "--train_batch_size=16")
    assert (settings.train_batch_size, settings.given().count("train_batch_size")) == (16, 1)
    renamed = argument_set.fields_of(
        "Renamed", args.TrainingArgs, {"export_dir": {"deprecated_name": "export_base"}}
    )
    fv = flags.FlagValues()
    arg_flags.define_flags(renamed, flag_values=fv)
    fv(["p", "--export_dir=a", "--export_base=b"])
    with pytest.raises(ValueError) as e:
        arg_flags.from_flags(renamed, fv)
    assert str(e.value) == (
        "--export_base is the deprecated spelling of --export_dir: give --export_dir only"
    )


def test_abseil_199_flags_from_a_flagfile_count_as_given(tmp_path, capsys, monkeypatch):
    """abseil/abseil-py#199 (--flagfile not honoured by one parser). Expected: the flags of a
    --flagfile are read as given on the command line, so the partner table refuses
    --export_quantize without --export_dir from a file too; a missing flagfile is one line."""
    flagfile = tmp_path / "run.flags"
    flagfile.write_text("--export_quantize=int8\n--train_batch_size=8\n")
    fv, _ = _parsed(*REQUIRED, f"--flagfile={flagfile}")
    assert (fv.train_batch_size, fv["export_quantize"].present) == (8, 1)
    with pytest.raises(flag_dependencies.MissingPartnerError) as e:
        arg_flags.from_flags(CLS, fv)
    assert str(e.value) == (
        "--export_quantize acts only with --export_dir (it quantizes the exported model.tflite); "
        "it would be ignored"
    )
    missing = tmp_path / "none.flags"
    err = _refusal(capsys, monkeypatch, *REQUIRED, f"--flagfile={missing}")
    assert err == (
        f"{PROGRAM}: error: ERROR:: Unable to open flagfile: [Errno 2] No such file or "
        f"directory: '{missing}'\n"
    )


# --------------------------------------------------------------- unknown flags, bad values
def test_transformers_22171_an_unknown_flag_is_refused_not_ignored(capsys, monkeypatch):
    """huggingface/transformers#22171 ("Some specified arguments are not used by the
    HfArgumentParser", a traceback). Expected: a misspelt flag is one line naming it with absl's
    suggestion, exit 2."""
    err = _refusal(capsys, monkeypatch, *REQUIRED, "--train_batch_sise=8")
    assert err == (
        f"{PROGRAM}: error: Unknown command line flag 'train_batch_sise'. Did you mean: "
        "train_batch_size ?\n"
    )


def test_tyro_482_a_value_the_argument_set_refuses_is_one_line(capsys, monkeypatch):
    """brentyi/tyro#482: a ValueError from a dataclass's __post_init__ check surfaced as a
    traceback. Expected: our argument set's rule refusal ends the recipe as
    "--train_batch_size must be >= 1, got 0", one line, exit 2, nothing prepared."""
    err = _recipe_refusal(capsys, monkeypatch, *REQUIRED, "--train_batch_size=0")
    assert err == f"{PROGRAM}: error: --train_batch_size must be >= 1, got 0\n"


def test_transformers_20323_a_choice_outside_the_choices(capsys, monkeypatch):
    """huggingface/transformers#20323 (Literal / Enum fields become choices). Expected: an enum
    flag given another value is one line listing the choices; a non-string choice field
    (--verbose 0/1/2) names them too."""
    err = _refusal(capsys, monkeypatch, *REQUIRED, "--mixed_precision=FLOAT32")
    assert err == (
        f"{PROGRAM}: error: flag --mixed_precision=FLOAT32: value should be one of "
        "<float32|mixed_float16|mixed_bfloat16>\n"
    )
    with pytest.raises(ValueError) as e:
        _settings(*REQUIRED, "--verbose=3")
    assert str(e.value) == "--verbose must be one of 0, 1, 2, got 3"


def test_cli11_403_a_negative_number_after_a_space_is_the_value():
    """CLIUtils/CLI11#403 (and apple/swift-argument-parser#153): `--number -10` was read as a
    flag. Expected: `--seed -1` reads -1; `--learning_rate -1e-5` reaches the field's rule,
    which refuses it by name."""
    assert _settings(*REQUIRED, "--seed", "-1").seed == -1
    with pytest.raises(ValueError) as e:
        _settings(*REQUIRED, "--learning_rate", "-1e-5")
    assert str(e.value) == "--learning_rate must be > 0, got -1e-05"


def test_python_gflags_16_a_flag_after_the_terminator(capsys, monkeypatch):
    """google/python-gflags#16 (`--` accepted silently). Expected: after `--` a flag is a
    positional argument, and the recipe refuses it ("unexpected arguments:
    --train_batch_size=5") rather than training with the default batch."""
    settings = _settings(*REQUIRED, "--", "--train_batch_size=5")
    assert settings.train_batch_size == 32
    err = _recipe_refusal(capsys, monkeypatch, *REQUIRED, "--", "--train_batch_size=5")
    assert err == f"{PROGRAM}: error: unexpected arguments: --train_batch_size=5\n"


def test_gflags_6_non_ascii_on_an_ascii_stderr_is_one_line_and_status_2(tmp_path):
    """google/python-gflags#6: a non-ASCII character in flag output crashed with
    UnicodeEncodeError. Expected: a non-ASCII value is kept verbatim, and a refusal naming one,
    written to an ASCII-only stderr, is still one line (the character escaped) and exit 2, no
    traceback."""
    assert _settings("--task_name=sst2", "--output_dir=/tmp/输出").output_dir == "/tmp/输出"
    proc = subprocess.run(
        [sys.executable, "-m", "serving.ssl_config", "--sortie_ü=1"],
        cwd=REPO,
        env=recipe_env(PYTHONIOENCODING="ascii", LC_ALL="C"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "ssl_config.py: error: Unknown command line flag 'sortie_\\xfc'\n"


# --------------------------------------------------------------------------- TF Serving flags
def test_tf_serving_781_a_relative_model_base_path_is_made_absolute(tmp_path, monkeypatch):
    """tensorflow/serving#781: a relative --model_base_path aborted the server ("Expected model tf
    to have an absolute path or URI"). Expected: ours resolves it against the working directory;
    a URI is kept as typed."""
    monkeypatch.chdir(tmp_path)
    (config,) = serving.server.model_configs("tf", "saved_model_tf")
    assert (config.name, config.base_path) == ("tf", str(tmp_path / "saved_model_tf"))
    (uri,) = serving.server.model_configs("tf", "gs://bucket/models/tf")
    assert uri.base_path == "gs://bucket/models/tf"


def _server_check(given: dict) -> None:
    """The partner table of serving.server on flags `given` (name -> value), the others at their
    defaults."""
    values = {f.name: f.default for f in flags.FLAGS.flags_by_module_dict()["serving.server"]}
    names = flag_dependencies.flag_names("serving.server")
    flag_dependencies.check("serving.server", {n: values[n] for n in names} | given, set(given))


def test_tf_serving_main_batching_parameters_file_without_enable_batching():
    """tensorflow/serving main.cc (issues #344, #1379: batching is off by default): the model
    server dies with LOG(FATAL) "You supplied --batching_parameters_file without
    --enable_batching". Expected: ours refuses it before anything starts, naming both flags."""
    with pytest.raises(flag_dependencies.MissingPartnerError) as e:
        _server_check({"batching_parameters_file": "/models/batching.config"})
    assert str(e.value) == (
        "--batching_parameters_file acts only with --enable_batching (batched model calls); it "
        "would be ignored"
    )
    _server_check({"batching_parameters_file": "/b.config", "enable_batching": True})


def test_tf_serving_main_model_base_path_beside_a_config_file():
    """tensorflow/serving main.cc: with --model_config_file, "--model_name, --model_base_path are
    ignored" (silently). Expected: ours refuses --model_base_path beside --model_config_file."""
    with pytest.raises(flag_dependencies.MissingPartnerError) as e:
        _server_check({"model_base_path": "/models/m", "model_config_file": "/models/m.config"})
    assert str(e.value) == (
        "--model_base_path acts only without --model_config_file (the config file lists the "
        "models); it would be ignored"
    )


def test_tf_serving_836_a_tf_serving_flag_we_lack_is_refused_not_ignored(capsys, monkeypatch):
    """tensorflow/serving#836 (--platform_config_file makes --enable_batching ignored). We have no
    --platform_config_file. Expected: given to our server it is an unknown flag, one line and
    exit 2, never accepted and ignored."""
    try:
        err = usage_error(
            capsys,
            monkeypatch,
            "server.py",
            lambda: cli.parse_flags(["server.py", "--platform_config_file=/p.config"]),
        )
    finally:
        flags.FLAGS.unparse_flags()
    assert err.count("\n") == 1
    assert err.split(". Did you mean")[0].rstrip("\n") == (
        "server.py: error: Unknown command line flag 'platform_config_file'"
    )


def test_every_report_names_a_field_of_the_catalogue():
    """The fields these tests give exist in the classification recipe's argument set (a renamed
    field would make a test pass for the wrong reason)."""
    names = {f.name for f in dataclasses.fields(CLS)}
    assert {
        "export_tflite",
        "group_by_length",
        "do_lower_case",
        "train_batch_size",
        "mixed_precision",
        "verbose",
        "seed",
        "learning_rate",
        "export_quantize",
    } <= names
