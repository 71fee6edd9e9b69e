"""Dependencies point one way (STYLE.md section 1): checked on the source with `ast`, so an import
cycle such as tasks <-> evaluation cannot come back unnoticed."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_bert"

# package -> packages of keras_bert it must never import (directly, at any depth in the module).
FORBIDDEN = {
    "tasks": ("evaluation", "training"),
    "data": ("tasks", "evaluation", "training"),
    "tokenization": ("data", "tasks", "evaluation", "training"),
}


def imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import statement in `source`, nested ones too.

    Args:
        source: Python source text.
        package: dotted package the source sits in (resolves relative imports).

    Returns:
        list of (int line, str name); `from keras_bert import evaluation` gives both
        "keras_bert" and "keras_bert.evaluation".
    """
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out.append((node.lineno, base))
            out.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return out


def test_the_parser_sees_every_import_form():
    source = (
        "import keras_bert.evaluation.metrics\nfrom keras_bert import evaluation\n"
        "def f():\n    from ..evaluation import squad\n    from . import task\n"
    )
    assert imported_modules(source, "keras_bert.tasks") == [
        (1, "keras_bert.evaluation.metrics"),
        (2, "keras_bert"),
        (2, "keras_bert.evaluation"),
        (4, "keras_bert.evaluation"),
        (4, "keras_bert.evaluation.squad"),
        (5, "keras_bert.tasks"),
        (5, "keras_bert.tasks.task"),
    ]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_forbidden_imports(package):
    bad = []
    files = sorted((PACKAGE / package).rglob("*.py"))
    assert files, f"no source files under keras_bert/{package}"
    for path in files:
        module_package = ".".join(path.relative_to(PACKAGE.parent).parts[:-1])
        for line, name in imported_modules(path.read_text(encoding="utf-8"), module_package):
            for other in FORBIDDEN[package]:
                target = f"keras_bert.{other}"
                if name == target or name.startswith(target + "."):
                    bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}")
    assert not bad, "\n".join(bad)
