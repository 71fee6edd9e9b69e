"""Every command the README and docs/ show names only flags its program defines, and only
variables its script reads: a renamed or removed flag fails here, not in a user's terminal.

Commands are read from the fenced code blocks of README.md and docs/*.md (continuation lines
joined). Programs checked: `recipes/*.py` and `python -m` modules of this repository (export,
serving, keras_bert, recipes, benchmarks); their flags come from their own `--help` output
(what a user reads; absl lists there only the program's own and declared flags), so absl and
argparse programs are read the same way. `VAR=value bash
scripts/x.sh` lines must name variables that the script reads.
"""

import concurrent.futures
import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
PROGRAM = re.compile(
    r"(?:(?<=\s)|^)(recipes/\w+\.py|-m\s+(?:export|serving|keras_bert|recipes|benchmarks)"
    r"(?:\.\w+)*)\b(.*)"
)
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9_]*)")
SCRIPT_VARS = re.compile(r"((?:[A-Z][A-Z0-9_]*=\S*\s+)+)bash\s+(scripts/\w+\.sh)")
# Programs that need a peer's own environment (PyTorch, transformers): not importable here.
PEER_PROGRAMS = {"benchmarks/hf_squad_peer.py"}


def command_lines(text: str):
    """The lines of each fenced block with `\\`-continued lines joined, comments dropped."""
    for block in FENCE.findall(text):
        joined = re.sub(r"\s*\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                yield line


def documented_uses():
    """{program: {flag: [where, ...]}} and [(variables, script, where)] from the docs."""
    flags, scripts = {}, []
    for doc in DOCS:
        for line in command_lines(doc.read_text()):
            for part in re.split(r"\s*(?:\|\||&&|;|\|)\s*", line):
                match = PROGRAM.search(part)
                if match:
                    program = re.sub(r"^-m\s+", "", match.group(1))
                    if program in PEER_PROGRAMS:
                        continue
                    uses = flags.setdefault(program, {})
                    for flag in FLAG.findall(match.group(2)):
                        uses.setdefault(flag, []).append(doc.name)
                for assignments, script in SCRIPT_VARS.findall(part):
                    names = re.findall(r"([A-Z][A-Z0-9_]*)=", assignments)
                    scripts.append((names, script, doc.name))
    return flags, scripts


def defined_flags(program: str) -> tuple[str, set]:
    """(program, the flag names its --help prints); absl `--[no]name` gives name and noname."""
    command = (
        [sys.executable, str(REPO / program)]
        if program.endswith(".py")
        else [sys.executable, "-m", program]
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(REPO))
    # --help, not --helpfull: a user reads --help, and absl lists there only the flags it counts
    # as the program's own (a flag defined by a shared module must be declared for the program).
    proc = subprocess.run(
        command + ["--help"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    text = proc.stdout + proc.stderr
    names = set()
    for negatable, name in re.findall(r"--(\[no\])?([a-z][a-z0-9_]*)", text):
        names.add(name)
        if negatable:
            names.add("no" + name)
    return program, names


def test_command_parser_reads_programs_flags_and_script_variables():
    text = (
        "intro\n```bash\nMAX_TRAIN_EXAMPLES=20000 SEED=43 bash scripts/main_job.sh\n"
        "python recipes/run_squad.py --init_checkpoint=x \\\n  --learning_rate=1e-4  # a note --not_a_flag\n"
        "python -m export --model_dir=runs/a | tee log\n# python recipes/gone.py --old\n```\n"
        "--outside_a_block\n"
    )
    assert list(command_lines(text)) == [
        "MAX_TRAIN_EXAMPLES=20000 SEED=43 bash scripts/main_job.sh",
        "python recipes/run_squad.py --init_checkpoint=x --learning_rate=1e-4",
        "python -m export --model_dir=runs/a | tee log",
    ]
    match = PROGRAM.search("python recipes/run_squad.py --init_checkpoint=x --learning_rate=1e-4")
    assert match.group(1) == "recipes/run_squad.py"
    assert FLAG.findall(match.group(2)) == ["init_checkpoint", "learning_rate"]
    assert SCRIPT_VARS.findall("MAX_TRAIN_EXAMPLES=20000 SEED=43 bash scripts/main_job.sh") == [
        ("MAX_TRAIN_EXAMPLES=20000 SEED=43 ", "scripts/main_job.sh")
    ]


@pytest.mark.slow  # one --help per documented program, each importing TensorFlow: ~1 min
def test_every_documented_flag_exists():
    uses, _ = documented_uses()
    assert {"recipes/run_classifier.py", "recipes/run_squad.py", "export", "serving.server"} <= set(
        uses
    )
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        defined = dict(pool.map(defined_flags, sorted(uses)))
    unknown = {
        f"{program} --{flag} ({', '.join(sorted(set(where)))})"
        for program, flags in uses.items()
        for flag, where in flags.items()
        if flag not in defined[program] and flag not in {"help", "helpfull"}
    }
    assert not unknown, "documented flags that the program does not define:\n" + "\n".join(
        sorted(unknown)
    )


def test_every_documented_script_variable_is_read_by_the_script():
    _, scripts = documented_uses()
    assert any(script == "scripts/main_job.sh" for _, script, _ in scripts)
    missing = [
        f"{name} for {script} ({where})"
        for names, script, where in scripts
        for name in names
        if not re.search(rf"\b{name}\b", (REPO / script).read_text())
    ]
    assert not missing, "documented variables that the script never reads:\n" + "\n".join(missing)
