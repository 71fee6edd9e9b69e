"""docs/ARCHITECTURE.md is read from the code: every module and package its layout names exists
where the layout puts it, every package of the tree appears there with each of its modules, and
every dotted `keras_bert.*` name the document gives is a module or a name defined in one."""

import ast
import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "ARCHITECTURE.md"
# Where the layout's descriptions start; a line indented this far continues the entry above.
DESCRIPTION_COLUMN = 27
# The packages whose every module the layout must name (tests/ only "mirrors the packages").
LISTED = ("keras_bert", "serving", "export", "benchmarks", "tools")


def layout_lines() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    return [line for line in block.splitlines() if line.strip()]


def parse_layout(lines) -> tuple[dict, dict]:
    """(named, words): path named by an entry -> its line; folder -> the words of the entries
    and descriptions inside it. An entry is `<indent><names>  <description>`, two spaces of indent
    per level; names are comma-separated, a folder ends with "/", a module may drop its ".py"."""
    named, words, folders, current = {}, {}, [], ""
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if indent >= DESCRIPTION_COLUMN:  # a continuation: words of the last entry's folder
            words.setdefault(current, set()).update(re.findall(r"[a-z_][a-z0-9_]*", line))
            continue
        depth = indent // 2
        folders = folders[:depth]
        names_text, _, description = line.strip().partition("  ")
        parent = "/".join(folders)
        for name in (n.strip() for n in names_text.split(",")):
            if not name:
                continue
            if name.endswith("/"):
                path = f"{parent}/{name[:-1]}".strip("/")
                named[path] = line
            else:
                path = f"{parent}/{name if '.' in name else name + '.py'}".strip("/")
                named[path] = line
        if names_text.endswith("/") and "," not in names_text:
            folders = folders + [names_text[:-1]]
        current = "/".join(folders)
        words.setdefault(current, set()).update(re.findall(r"[a-z_][a-z0-9_]*", line))
    return named, words


def top_level_names(tree: ast.Module) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments, imports)."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def packages() -> list[pathlib.Path]:
    found = []
    for top in LISTED:
        found += sorted(p.parent for p in (REPO / top).rglob("__init__.py"))
    return [p for p in found if "__pycache__" not in p.parts]


def test_the_parser_reads_entries_folders_and_continuations():
    lines = [
        "pkg/".ljust(DESCRIPTION_COLUMN) + "a, b_module (the words)",
        "  sub/".ljust(DESCRIPTION_COLUMN) + "one",
        "    mod.py".ljust(DESCRIPTION_COLUMN) + "what it does",
        " " * DESCRIPTION_COLUMN + "more words",
        "  x.py, y".ljust(DESCRIPTION_COLUMN) + "two modules",
        "top/".ljust(DESCRIPTION_COLUMN) + "another",
    ]
    named, words = parse_layout(lines)
    assert set(named) == {"pkg", "pkg/sub", "pkg/sub/mod.py", "pkg/x.py", "pkg/y.py", "top"}
    assert {"a", "b_module", "the", "words"} <= words["pkg"]
    assert {"mod", "what", "more"} <= words["pkg/sub"]


def test_every_module_and_package_the_layout_names_exists():
    named, _ = parse_layout(layout_lines())
    missing = [
        f"{path}  <- {line.strip()}" for path, line in named.items() if not (REPO / path).exists()
    ]
    assert missing == []


@pytest.mark.parametrize("package", packages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_package_appears_with_each_of_its_modules(package):
    named, words = parse_layout(layout_lines())
    folder = package.relative_to(REPO).as_posix()
    assert folder in named, f"{folder}/ is not in the layout"
    absent = [
        p.name
        for p in sorted(package.glob("*.py"))
        if p.stem != "__init__"
        and f"{folder}/{p.name}" not in named
        and p.stem not in words.get(folder, set())
    ]
    assert absent == []


def test_every_dotted_name_the_document_gives_is_defined():
    text = DOC.read_text(encoding="utf-8")
    undefined = []
    for dotted in sorted(set(re.findall(r"keras_bert(?:\.[A-Za-z_]\w*)+", text))):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):  # the longest prefix that is a module or package
            base = REPO.joinpath(*parts[:cut])
            source = base.with_suffix(".py")
            if (base / "__init__.py").exists():
                source = base / "__init__.py"
            if source.exists():
                break
        rest = parts[cut:]
        if not source.exists() or len(rest) > 2:
            undefined.append(dotted)
        elif rest:
            defined = top_level_names(ast.parse(source.read_text(encoding="utf-8")))
            if rest[0] not in defined:
                undefined.append(dotted)
    assert undefined == []
