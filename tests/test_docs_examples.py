"""The Python examples of README.md and docs/tasks.md run as written and print what they say.

Each ```python block runs in a fresh interpreter (the repository on PYTHONPATH). Comment lines
"# ..." directly after a `print(...)` line are that print's expected output, compared exactly.
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/tasks.md")


def python_blocks(path: pathlib.Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def expected_output(block: str) -> list[str]:
    """The "# " comment lines that follow each print(...) line, in order."""
    out, after_print = [], False
    for line in block.splitlines():
        stripped = line.strip()
        if after_print and stripped.startswith("# "):
            out.append(stripped[2:])
            continue
        after_print = stripped.startswith("print(")
    return out


def test_blocks_are_found():
    assert len(python_blocks(REPO / "README.md")) >= 1
    assert expected_output("print(1)\n# 1\nx = 2  # not output\nprint(x)\n# 2\n# more\n") == [
        "1",
        "2",
        "more",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("doc", DOCS)
def test_examples_run_and_print_what_they_say(doc, tmp_path):
    blocks = python_blocks(REPO / doc)
    assert blocks, f"no python example in {doc}"
    for i, block in enumerate(blocks):
        env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
        proc = subprocess.run(
            [sys.executable, "-c", block],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, f"{doc} block {i}:\n{proc.stderr[-3000:]}"
        assert proc.stdout.splitlines() == expected_output(block), f"{doc} block {i}"
