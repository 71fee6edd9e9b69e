"""A --vocab_file that is not there is refused up front by every program that takes one (the
catalogue's `vocab_file`, `arg_flags.INPUT_FILE_FIELDS`): one line naming the flag and the path,
exit code 2, before anything is read, loaded, trained or written.

Every program runs in this process: the fine-tuning recipes and pretraining through their `main`
on their own FlagValues (`trainer.prepare` fails the test), the hand-written recipes through
`recipe_process.run_recipe_main`."""

import dataclasses
import runpy

import pytest
from absl import flags

from keras_bert.training import arg_flags, pretraining, trainer
from keras_bert.training.families import classification, ner, squad, swag
from keras_bert.training.pretraining import PretrainConfig
from keras_bert.training.recipe import recipe_main
from keras_bert.checkpoints import save_encoder
from tests.recipes.recipe_process import REPO, run_program_main, run_recipe_main, usage_error
from tests.tiny import tiny_encoder, tiny_vocab

FILE = str(REPO / "README.md")  # a file that exists (SQuAD's checks read it)

# Program -> (family, the flags it needs to get that far); family None: a hand-written recipe.
PROGRAMS = {
    "run_classifier": (classification.FAMILY, {"task_name": "sst2"}),
    "run_squad": (squad.FAMILY, {"train_file": FILE, "predict_file": FILE}),
    "run_ner": (ner.FAMILY, {"data_dir": "conll"}),
    "run_swag": (swag.FAMILY, {"train_file": "t", "dev_file": "d"}),
    "run_pretraining": (None, {"input_file": "in"}),
    "create_pretraining_data": (None, {"input_file": FILE, "output_file": "{out}/data.tfrecord"}),
    "convert_checkpoint": (None, {"init_checkpoint": "minilm_l6_h384_uncased"}),
    "extract_features": (
        None,
        {"input_file": FILE, "output_file": "{out}/f.jsonl", "init_checkpoint": "c"},
    ),
}


def _reached(*args):
    raise AssertionError("the run started")


def _run(name: str, vocab: str, out, monkeypatch, capsys) -> str:
    """recipes/<name>.py with --vocab_file=`vocab` and --output_dir=`out` (where it has one)
    beside the flags it needs; its stderr (it must end as a usage error)."""
    family, needed = PROGRAMS[name]
    given = {k: v.format(out=out) for k, v in needed.items()} | {"vocab_file": vocab}
    if "output_file" not in given:
        given["output_dir"] = str(out)
    argv, program = [f"--{k}={v}" for k, v in given.items()], f"{name}.py"
    if family is None and name != "run_pretraining":
        return usage_error(capsys, monkeypatch, program, lambda: run_recipe_main(name, *argv))
    monkeypatch.setattr(trainer, "prepare", _reached)
    monkeypatch.setattr(pretraining, "run_pretraining", _reached)
    if family is None:
        cls = PretrainConfig
        main_of = runpy.run_path(str(REPO / "recipes" / program), run_name="rp")["main_of"]
    else:
        cls = family.Args
        assert "vocab_file" in {f.name for f in dataclasses.fields(cls)}, name

        def main_of(fv):
            return recipe_main(family, fv)

    fv = flags.FlagValues()
    arg_flags.define_flags(cls, flag_values=fv)
    fv([program, *argv])
    return usage_error(capsys, monkeypatch, program, lambda: main_of(fv)([program]))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_missing_vocab_file_is_one_line_naming_the_flag_before_anything_runs(
    name, tmp_path, monkeypatch, capsys
):
    vocab, out = str(tmp_path / "nonexistent" / "vocab.txt"), tmp_path / "out"
    err = _run(name, vocab, out, monkeypatch, capsys)
    assert err == f"{name}.py: error: --vocab_file={vocab}: no such file\n"
    assert not out.exists()  # nothing written


@pytest.mark.parametrize("name", ["run_pretraining", "create_pretraining_data"])
def test_a_directory_as_vocab_file_is_refused_the_same_way(name, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    err = _run(name, str(tmp_path), out, monkeypatch, capsys)
    assert err == f"{name}.py: error: --vocab_file={tmp_path}: a directory, not a file\n"
    assert not out.exists()


def test_the_check_passes_a_file_and_probes_uris(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n")
    assert arg_flags.check_input_file("vocab_file", str(vocab)) is None
    with pytest.raises(FileNotFoundError) as e:
        arg_flags.check_input_file("vocab_file", "ram://absent/vocab.txt")
    assert str(e.value) == "--vocab_file=ram://absent/vocab.txt: no such file"
    settings = PretrainConfig(input_file="in", output_dir="o", vocab_file=str(tmp_path / "v.txt"))
    with pytest.raises(FileNotFoundError) as e:
        arg_flags.check_input_files(settings)
    assert str(e.value) == f"--vocab_file={tmp_path / 'v.txt'}: no such file"
    arg_flags.check_input_files(dataclasses.replace(settings, vocab_file=str(vocab)))


def test_a_checkpoint_without_its_vocab_or_casing_is_one_line_in_convert_checkpoint(
    tmp_path, monkeypatch, capsys
):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab(" ".join(f"w{i}" for i in range(19)))) + "\n")
    source = tmp_path / "source"
    save_encoder(tiny_encoder(), str(source), str(vocab), do_lower_case=True)
    (source / "vocab.txt").unlink()
    out = tmp_path / "out"

    def convert(*argv):
        args = (f"--init_checkpoint={source}", f"--output_dir={out}", *argv)
        return usage_error(
            capsys,
            monkeypatch,
            "convert_checkpoint.py",
            lambda: run_recipe_main("convert_checkpoint", *args),
        )

    assert convert() == (
        f"convert_checkpoint.py: error: vocab file not found: {source / 'vocab.txt'}\n"
    )
    (source / "keras_bert_checkpoint.json").unlink()  # where do_lower_case was recorded
    assert convert(f"--vocab_file={vocab}") == (
        f"convert_checkpoint.py: error: cannot tell whether {source} is cased or uncased; set "
        "do_lower_case (--do_lower_case) explicitly\n"
    )
    assert not out.exists()


def test_the_tools_refuse_a_missing_vocab_file_in_one_line(tmp_path, monkeypatch, capsys):
    """tools/fast_tokenizer_parity.py and tools/fuzz_live_server.py, before anything runs."""
    from tools import fuzz_live_server

    vocab, out = str(tmp_path / "nonexistent" / "vocab.txt"), tmp_path / "out"
    tool = REPO / "tools" / "fast_tokenizer_parity.py"
    err = usage_error(
        capsys,
        monkeypatch,
        "fast_tokenizer_parity.py",
        lambda: run_program_main(tool, f"--vocab_file={vocab}"),
    )
    assert err == f"fast_tokenizer_parity.py: error: --vocab_file={vocab}: no such file\n"
    monkeypatch.setattr("sys.argv", ["fuzz_live_server.py"])
    with pytest.raises(SystemExit) as exit_:
        fuzz_live_server.main([f"--vocab_file={vocab}", f"--out={out}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith(f"\nfuzz_live_server.py: error: --vocab_file={vocab}: no such file\n")
    assert not out.exists()  # nothing written
