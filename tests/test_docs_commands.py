"""Every command the README and docs/ show names only flags its program defines, and only
variables its script reads: a renamed or removed flag fails here, not in a user's terminal. And
the README's figures that the repository decides (how many tests the suite skips and why, what
scripts/test.sh installs, the sizes of the main job's model files) are what it decides.

Commands are read from the fenced code blocks of README.md and docs/*.md (continuation lines
joined). Programs checked: `recipes/*.py` and `python -m` modules of this repository (export,
serving, keras_bert, recipes, benchmarks); their flags come from their own `--help` output
(what a user reads; absl lists there only the program's own and declared flags), so absl and
argparse programs are read the same way. `VAR=value bash
scripts/x.sh` lines must name variables that the script reads.
"""

import ast
import concurrent.futures
import json
import math
import os
import pathlib
import re
import runpy
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
PEER_PROGRAMS = {"benchmarks/peers/hf_squad_peer.py"}


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


# ---- the README's figures that the repository itself decides -----------------------------------

TESTS = REPO / "tests"
SKIP_MARKERS = {
    "pytest.skip",
    "pytest.mark.skip",
    "pytest.mark.skipif",
    "pytest.importorskip",
    "pytest.mark.gpu",
}
# Every place in tests/ that can skip a test, and what `bash scripts/test.sh` makes of it on the
# README's machines (2-core CPUs, no GPU, run as root as .ci/run does): the reason the README
# counts its tests under, or None where that run skips nothing there (the second field says why;
# test_the_readme_counts_the_skipped_tests_the_skip_markers_give checks each why).
SKIP_SITES = {
    ("conftest.py", "pytest_collection_modifyitems", "pytest.mark.skip"): (None, "--run-slow"),
    ("conftest.py", "_skip_gpu_tests_without_a_gpu", "pytest.mark.skip"): (
        None,
        "skips the tests marked gpu: counted at their markers",
    ),
    ("test_gpu.py", "<module>", "pytest.mark.gpu"): ("gpu", "no GPU"),
    ("recipes/test_evaluate.py", "test_html_report_in_headless_chromium", "pytest.mark.skipif"): (
        None,
        "scripts/test.sh installs chromium",
    ),
    (
        "benchmarks/test_openvino_peer.py",
        "test_a_tiny_export_converts_and_matches_the_saved_model",
        "pytest.skip",
    ): ("openvino", "not in requirements.txt"),
    ("checkpoints/test_uri_paths.py", "test_keras_hub_preset_on_ram", "pytest.importorskip"): (
        None,
        "keras-hub in requirements.txt",
    ),
    ("serving/test_reflection.py", "<module>", "pytest.importorskip"): (
        None,
        "tensorflow-serving-api in requirements.txt",
    ),
}


def readme_suite_paragraph() -> str:
    """The README's paragraph on the whole test suite (up to its command's code block)."""
    text = (REPO / "README.md").read_text()
    start = text.index("**2. The whole test suite.**")
    return text[start : text.index("```", start)]


def skip_sites(root: pathlib.Path = TESTS) -> list[tuple[str, str, str]]:
    """(file under `root`, enclosing top-level function or "<module>", marker) of every use of
    SKIP_MARKERS in the Python files under `root`, read from their syntax trees."""
    sites = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for top in tree.body:
            where = top.name if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
            for node in ast.walk(top):
                if isinstance(node, ast.Attribute) and ast.unparse(node) in SKIP_MARKERS:
                    sites.append(
                        (str(path.relative_to(root)), where or "<module>", ast.unparse(node))
                    )
    return sorted(set(sites))


def collected_items(path: pathlib.Path, function: str | None = None) -> int:
    """How many tests pytest collects from the module at `path` (or from its top-level
    `function`): each test function times the lengths of its literal `parametrize` lists."""
    body = ast.parse(path.read_text()).body
    assert not any(isinstance(n, ast.ClassDef) for n in body), f"{path.name}: test classes"
    total = 0
    for node in body:
        if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test"):
            continue
        if function is not None and node.name != function:
            continue
        count = 1
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and ast.unparse(decorator.func).endswith(
                "mark.parametrize"
            ):
                values = decorator.args[1]
                assert isinstance(values, (ast.List, ast.Tuple)), (
                    f"{path.name}::{node.name}: parametrize values not a literal list; count "
                    "its tests here by hand"
                )
                count *= len(values.elts)
        total += count
    return total


def test_skip_sites_and_test_items_are_read_from_syntax(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test_a.py").write_text(
        "import pytest\n"
        "pytestmark = pytest.mark.gpu\n"
        "@pytest.mark.parametrize('a, b', [(1, 2), (3, 4), (5, 6)])\n"
        "@pytest.mark.parametrize('c', (7, 8))\n"
        "def test_x(a, b, c):\n    pass\n"
        "def test_y():\n    pytest.skip('no')\n"
        "def helper():\n    pytest.importorskip('m')\n"
    )
    assert skip_sites(tmp_path) == [
        ("sub/test_a.py", "<module>", "pytest.mark.gpu"),
        ("sub/test_a.py", "helper", "pytest.importorskip"),
        ("sub/test_a.py", "test_y", "pytest.skip"),
    ]
    assert collected_items(tmp_path / "sub" / "test_a.py") == 7
    assert collected_items(tmp_path / "sub" / "test_a.py", "test_x") == 6


def test_the_readme_counts_the_skipped_tests_the_skip_markers_give():
    """The README's "N skipped (G need a GPU; O needs the optional OpenVINO benchmark peer ...)"
    is what the skip markers in tests/ give for a run of scripts/test.sh there, and the reasons
    SKIP_SITES gives for the markers that skip nothing in that run hold."""
    sites = skip_sites()
    unclassified = sorted(set(sites) - set(SKIP_SITES))
    assert not unclassified, (
        "skip markers that SKIP_SITES does not classify (say what scripts/test.sh makes of each, "
        f"and update the README's skipped count): {unclassified}"
    )
    assert sorted(SKIP_SITES) == sites, sorted(set(SKIP_SITES) - set(sites))
    skipped = {}
    for (name, where, _), (reason, _) in SKIP_SITES.items():
        if reason:
            count = collected_items(TESTS / name, None if where == "<module>" else where)
            skipped[reason] = skipped.get(reason, 0) + count
    said = re.search(
        r"([\d,]+) tests passed and (\d+) skipped \((\d+) need a GPU; (\d+) needs the optional "
        r"OpenVINO benchmark peer",
        readme_suite_paragraph(),
    )
    assert said, readme_suite_paragraph()
    total, gpu, openvino = (int(said.group(i)) for i in (2, 3, 4))
    assert (total, gpu, openvino) == (sum(skipped.values()), skipped["gpu"], skipped["openvino"])
    # The reasons of the markers that this run does not skip, and of those it does
    test_sh = (REPO / "scripts" / "test.sh").read_text()
    requirements = (REPO / "requirements.txt").read_text()
    assert re.search(r"^exec .*pytest --run-slow", test_sh, re.M)
    assert re.search(r"apt-get install .*chromium", test_sh)
    assert re.search(r"^keras-hub==", requirements, re.M)
    assert re.search(r"^tensorflow-serving-api==", requirements, re.M)
    for module in ("openvino", "nncf", "torch"):
        assert not re.search(rf"^{module}\b", requirements, re.M), module


def test_the_readme_says_scripts_test_sh_installs_chromium_outside_the_venv():
    test_sh = (REPO / "scripts" / "test.sh").read_text()
    installs = re.search(r"apt-get install .*chromium", test_sh) is not None
    paragraph = " ".join(readme_suite_paragraph().split())
    mentioned = [
        "installs Debian's `chromium` system-wide with `apt-get`",
        "Run as root",
        "`KERAS_BERT_NO_CHROMIUM=1`",
    ]
    assert [m in paragraph for m in mentioned] == [installs] * len(mentioned), paragraph
    assert "Installs what it needs into `.venv`" not in paragraph


def test_the_readmes_model_sizes_are_the_real_checkpoints_weights_and_more():
    """The main job's `best_model.keras` and export, in the README in MB (10**6 bytes): the
    float32 weights of the real MiniLM-L6 checkpoint (its parameters counted from the header of
    its model.safetensors) with SST-2's 2-class head, plus, in best_model.keras, under 1 MB
    (config, vocabulary, zip headers: 91,434,695 bytes measured against 90,855,944 of weights),
    and in the export 5-7 MB (the graph, saved_model.pb, 5.47 MB, and the assets: 96,601,480
    bytes measured)."""
    # keras_bert's preset table, read without importing keras_bert (and TensorFlow with it)
    presets = runpy.run_path(str(REPO / "keras_bert" / "checkpoints" / "presets.py"))
    directory = pathlib.Path(presets["resolve_preset"]("minilm_l6_h384_uncased"))
    with open(directory / "model.safetensors", "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    encoder = sum(
        math.prod(t["shape"])
        for name, t in header.items()
        if name != "__metadata__" and t["dtype"] == "F32"
    )
    hidden = json.loads((directory / "config.json").read_text())["hidden_size"]
    weights_mb = (encoder + hidden * 2 + 2) * 4 / 1e6
    assert round(weights_mb, 2) == 90.86
    said = re.search(
        r"`best_model\.keras`,\s+(\d+) MB.*?the export \((\d+) MB\)",
        (REPO / "README.md").read_text(),
        re.S,
    )
    assert said
    best_model, export = int(said.group(1)), int(said.group(2))
    assert weights_mb - 0.5 <= best_model <= weights_mb + 1.5, best_model
    assert weights_mb + 4.5 <= export <= weights_mb + 7.5, export
