"""Running a recipe as a person does, in a fresh CPU-only Python (shared by the recipe tests).

`run_recipe("run_ner.py", *flags)` runs recipes/run_ner.py with the repository on PYTHONPATH,
TensorFlow's C++ logs quiet and no GPU visible, and returns the finished process (text output);
`recipe_env()` is that environment, for tests that start the process themselves.
`run_module("benchmarks.bench_rest", *flags)` runs any program of the repository as a module in
that environment; `refusal_lines(module, *flags)` is what one that must refuse its flags (exit 2,
no traceback) wrote to stderr.
`run_recipe_main("evaluate", *flags)` runs an absl recipe's `main` in this process instead (ram://
paths, monkeypatched library code); `usage_error(...)` is the one line a `main` that must end as a
usage error wrote.
`tiny_run_flags(vocab, ...)` are the flags every fine-tuning recipe test starts from: a bert_tiny
encoder over `vocab`, short sequences, small batches; `exported_run_flags(...)` where the run
writes and exports to.
"""

import os
import pathlib
import runpy
import subprocess
import sys

import pytest
from absl import flags

from keras_bert.cli import parse_flags
from keras_bert.faults import ENV as CRASH_ENV

REPO = pathlib.Path(__file__).resolve().parents[2]


def recipe_env(tf_log_level: str = "3", crash_at: str | None = None, **extra: str) -> dict:
    """os.environ with the repository on PYTHONPATH, TF_CPP_MIN_LOG_LEVEL=`tf_log_level`, no
    visible GPU and `extra`; a crash point (`keras_bert.faults`) only where `crash_at` names one,
    so an outer setting never kills a run by surprise."""
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        TF_CPP_MIN_LOG_LEVEL=tf_log_level,
        CUDA_VISIBLE_DEVICES="",
        **extra,
    )
    env.pop(CRASH_ENV, None)
    if crash_at:
        env[CRASH_ENV] = crash_at
    return env


def run_recipe(
    script: str,
    *args,
    crash_at: str | None = None,
    tf_log_level: str = "3",
    timeout: int = 600,
    cwd=None,
) -> subprocess.CompletedProcess:
    """`python recipes/<script> <args>` in `recipe_env(tf_log_level, crash_at)`, in `cwd` (None:
    this process's); `crash_at`: the run SIGKILLs itself at that point. Waits at most `timeout`
    seconds."""
    return subprocess.run(
        [sys.executable, str(REPO / "recipes" / script), *map(str, args)],
        cwd=cwd,
        env=recipe_env(tf_log_level, crash_at),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_module(module: str, *args, timeout: int = 300, **env: str) -> subprocess.CompletedProcess:
    """`python -m <module> <args>` from the repository root in `recipe_env(**env)`, its output
    captured as text; waits at most `timeout` seconds."""
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        cwd=REPO,
        env=recipe_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def refusal_lines(module: str, *args, **env: str) -> list[str]:
    """The stderr lines of `run_module(module, *args, **env)`, which must end as a usage error:
    exit status 2, no traceback."""
    proc = run_module(module, *args, **env)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stderr.strip().splitlines()


def run_recipe_main(name: str, *argv: str) -> None:
    """Runs recipes/<name>.py's `main` in this process with `argv` as its flags, then removes
    the flags it defined (each recipe defines its own into absl's global FLAGS)."""
    run_program_main(REPO / "recipes" / f"{name}.py", *argv)


def run_program_main(path, *argv: str) -> None:
    """`run_recipe_main` of any absl program of this repository (`path`: its file)."""
    name = pathlib.Path(path).stem
    module = f"recipe_{name}"
    program = runpy.run_path(str(path), run_name=module)
    try:
        parse_flags([name, *argv])  # as the program's `cli.run` parses them
        program["main"]([name])
    finally:
        for flag in list(flags.FLAGS.flags_by_module_dict().get(module, [])):
            delattr(flags.FLAGS, flag.name)
        flags.FLAGS.unparse_flags()


def usage_error(capsys, monkeypatch, program: str, main) -> str:
    """The stderr of `main()` run as `program` (sys.argv[0], the name in the message), which must
    end as a usage error: exit status 2, nothing on stdout."""
    monkeypatch.setattr(sys, "argv", [program])
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 2
    out = capsys.readouterr()
    assert out.out == ""
    return out.err


def tiny_run_flags(
    vocab_file,
    max_seq_length: int,
    train_batch_size: int,
    max_examples: int | None = None,
    bert_config_file=None,
) -> list[str]:
    """The encoder and size flags of a tiny fine-tuning run: bert_tiny (or the BertConfig JSON
    `bert_config_file`) over `vocab_file`, `max_seq_length` pieces,
    batches of `train_batch_size`; with `max_examples`, at most that many train and eval examples."""
    encoder = f"--bert_config_file={bert_config_file}" if bert_config_file else "--preset=bert_tiny"
    flags = [
        encoder,
        f"--vocab_file={vocab_file}",
        f"--max_seq_length={max_seq_length}",
        f"--train_batch_size={train_batch_size}",
    ]
    if max_examples is not None:
        flags += [f"--max_train_examples={max_examples}", f"--max_eval_examples={max_examples}"]
    return flags


def exported_run_flags(output_dir, export_base, model_name: str) -> list[str]:
    """The flags of a run into `output_dir` whose kept model is then exported as
    <export_base>/<model_name>/<version>."""
    return [
        f"--output_dir={output_dir}",
        f"--export_dir={export_base}",
        f"--model_name={model_name}",
    ]
