"""`python -m export`'s export settings are the catalogue's flags (`keras_bert.training.args`,
the fine-tuning recipes' --export_dir, --export_dtype, --export_tflite, --export_quantize); each
older spelling of this program still works, sets the same setting to the same value and warns.

The flags are defined on a FlagValues of the test's own (the program defines them on absl's
global FLAGS beside --model_name, which serving.server defines too); `python -m export` itself runs
with both spellings in tests/serving/test_litert_export.py and tests/export/test_export_uri.py."""

import logging

import pytest
from absl import flags

from export.export_saved_model import ExportArgs
from keras_bert.training import arg_flags, args
from keras_bert.training.args import TrainingArgs


def _read(*argv):
    """The export settings `python -m export <argv>` reads: (export_dir, dtype, litert)."""
    fv = flags.FlagValues()
    arg_flags.define_flags(ExportArgs, flag_values=fv)
    fv(["export", *argv])
    settings = arg_flags.from_flags(ExportArgs, fv)
    return settings.export_dir, settings.export_dtype, args.litert_setting(settings)


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("--export_base=gs://b/models", "--export_dir=gs://b/models", {}),
        ("--dtype=bfloat16", "--export_dtype=bfloat16", {1: "bfloat16"}),
        ("--tflite", "--export_tflite", {2: "float32"}),
        ("--quantize=int8", "--export_quantize=int8", {2: "int8"}),
    ],
)
def test_an_old_spelling_sets_the_same_setting_and_warns(caplog, old, new, expected):
    base = [] if old.startswith("--export_base") else ["--export_dir=gs://b/models"]
    want = ["gs://b/models", None, None]
    for index, value in expected.items():
        want[index] = value
    with caplog.at_level(logging.WARNING, logger=arg_flags.__name__):
        assert _read(*base, new) == tuple(want)
        assert caplog.records == []
        assert _read(*base, old) == tuple(want)
    old_name, new_name = old.split("=")[0], new.split("=")[0]
    assert [r.getMessage() for r in caplog.records] == [f"{old_name} is deprecated: use {new_name}"]
    with pytest.raises(ValueError) as e:
        _read(*base, old, new)
    assert str(e.value) == (
        f"{old_name} is the deprecated spelling of {new_name}: give {new_name} only"
    )


def test_the_flags_are_the_catalogues():
    fv = flags.FlagValues()
    arg_flags.define_flags(ExportArgs, flag_values=fv)
    assert sorted(fv) == [
        "dtype",
        "export_base",
        "export_dir",
        "export_dtype",
        "export_quantize",
        "export_tflite",
        "quantize",
        "tflite",
    ]
    for name in ("export_dir", "export_dtype", "export_tflite", "export_quantize"):
        field = TrainingArgs.__dataclass_fields__[name]
        choices = field.metadata["choices"]
        enum = f"<{'|'.join(choices)}>: " if choices else ""  # absl's enum prefix
        assert (fv[name].default, fv[name].help) == (field.default, enum + field.metadata["help"])


@pytest.mark.parametrize(
    "quantize, refuse",
    [
        ("--export_quantize=int8", "--noexport_tflite"),
        ("--export_quantize=int8", "--export_tflite=false"),
        ("--quantize=int8", "--notflite"),
    ],
)
def test_a_quantization_with_no_tflite_given_is_refused(quantize, refuse):
    """The quantization writes model.tflite; the user said no model.tflite: neither wins."""
    with pytest.raises(ValueError) as e:
        _read("--export_dir=gs://b/models", quantize, refuse)
    assert str(e.value) == (
        "--export_quantize=int8 writes model.tflite, but --noexport_tflite was given: "
        "drop one of them"
    )
    assert _read("--export_dir=gs://b/models", quantize)[2] == "int8"  # implied, as documented


def test_a_fine_tuning_run_refuses_it_before_training():
    with pytest.raises(ValueError) as e:
        TrainingArgs(
            output_dir="runs/x",
            export_dir="models",
            export_quantize="int8",
            given_flags=frozenset({"output_dir", "export_dir", "export_quantize", "export_tflite"}),
        )
    assert str(e.value).startswith("--export_quantize=int8 writes model.tflite")


def test_export_dir_is_required_in_either_spelling():
    with pytest.raises(flags.IllegalFlagValueError) as e:
        _read()
    assert str(e.value) == "flags export_dir=None, export_base=None: --export_dir is required"
