"""Every user path goes through `keras_bert.fileio` (SPEC section 6a): a grep of the library,
recipes, export and serving code for the local-only file calls that break on a URI (`open(`,
`os.path.`, `os.makedirs`, `os.listdir`, `os.replace`, `os.rename`, `glob.glob`, `pathlib`,
`shutil.`; pathlib folds `gs://b` into `gs:/b`). keras_bert/fileio.py is the one module allowed
them. Tests, benchmarks and scripts are not searched: they make their own local files.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEARCHED = ("keras_bert", "recipes", "export", "serving")
FORBIDDEN = re.compile(
    r"(?<![\w])open\(|os\.path\.|os\.makedirs|os\.listdir|os\.replace|os\.rename|glob\.glob"
    r"|pathlib|shutil\."
)
# The one module that touches the file systems.
FILE_ACCESS_MODULE = "keras_bert/fileio.py"

# Places that are not a user path: file -> the exact stripped lines allowed there, each with why.
ALLOWED = {
    # The program's own file name for the "<program>: error: ..." line (sys.argv[0]).
    "keras_bert/cli.py": {
        'program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "keras_bert"',
        "program = os.path.basename(os.path.dirname(os.path.abspath(sys.argv[0])))",
    },
    # TLS certificate files: Python's ssl module loads them only from local files, and the
    # The CPU model of this machine, recorded with a latency: a fact of the machine, no user path.
    "keras_bert/evaluation/latency.py": {'with open("/proc/cpuinfo", encoding="utf-8") as f:'},
    # client does not import TensorFlow (tf.io.gfile) by design.
    "serving/client.py": {
        'with open(path, "rb") as f:  # a local file, as the ssl module needs it'
    },
}


def offending_lines():
    found = []
    for top in SEARCHED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == FILE_ACCESS_MODULE:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if FORBIDDEN.search(line) and line.strip() not in ALLOWED.get(rel, ()):
                    found.append(f"{rel}:{number}: {line.strip()}")
    return found


def test_no_local_file_access_outside_fileio():
    assert offending_lines() == []


def test_the_allow_list_names_only_lines_that_exist():
    for rel, lines in ALLOWED.items():
        text = {line.strip() for line in (ROOT / rel).read_text(encoding="utf-8").splitlines()}
        assert lines <= text, f"{rel}: allowed lines no longer there: {lines - text}"


@pytest.mark.parametrize(
    "line",
    [
        "with open(path) as f:",
        "x = io.open(path)",
        "os.path.join(a, b)",
        "os.makedirs(d, exist_ok=True)",
        "os.listdir(d)",
        "os.replace(a, b)",
        "os.rename(a, b)",
        "glob.glob(p)",
        "import pathlib",
        "from pathlib import Path",
        "shutil.copyfile(a, b)",
    ],
)
def test_the_grep_catches(line):
    assert FORBIDDEN.search(line)


@pytest.mark.parametrize(
    "line", ["safe_open(p, framework='numpy')", "fileio.open_file(p)", "os.fspath(p)"]
)
def test_the_grep_lets_pass(line):
    assert not FORBIDDEN.search(line)
