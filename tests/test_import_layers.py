"""Dependencies point one way (STYLE.md section 1), checked on the source with `ast` over every
package of the product (keras_bert and each of its subpackages, serving, export, the recipes):
the layer order is written once (LAYERS); a module may import its own unit and the layers below
it, never a layer above or a neighbour in its own layer, and the graph of modules has no cycle.
Imports inside functions count: a deferred import is still a dependency."""

import ast
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]

# Bottom to top. A unit is a package or a module (dotted name); `keras_bert` is the package's
# own __init__ (its public names, imported lazily), `serving` the server's programs (server,
# client, request_log, ssl_config) above its layers, `recipes` the scripts of recipes/.
LAYERS = (
    ("keras_bert.fileio", "keras_bert.progress", "keras_bert.faults", "keras_bert.features"),
    ("keras_bert.cli", "keras_bert.config"),
    ("keras_bert.beam", "keras_bert.beam_worker", "keras_bert.tokenization"),
    ("keras_bert.layers",),
    ("keras_bert.heads",),
    ("keras_bert.models",),
    ("keras_bert.checkpoints", "keras_bert.data"),
    ("keras_bert.saved_model", "keras_bert.metrics"),
    ("keras_bert.batch_prediction", "keras_bert.tasks"),
    ("keras_bert.evaluation",),
    ("keras_bert.training",),
    ("keras_bert",),
    ("serving.wire",),
    ("serving.monitoring",),
    ("serving.models",),
    ("serving.dispatch",),
    ("serving.protocol",),
    ("serving", "export"),
    ("recipes",),
)
# serving/ serves any SavedModel from its signatures (SPEC section 3): of keras_bert each of its
# layers may use only what loads no model code.
SERVING_MAY_USE = {"keras_bert.fileio", "keras_bert.cli", "keras_bert.training.flag_dependencies"}


def modules() -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every source file of the product."""
    found = {}
    for top in ("keras_bert", "serving", "export", "recipes"):
        for path in sorted((REPO / top).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imported_modules(source: str, name: str, is_package: bool, known) -> list[tuple[int, str]]:
    """(line, module) of every import of a module in `known` by the module `name`'s `source`,
    nested ones too; `from a import b` counts `a.b` when that is a module, else `a`.

    Args:
        source: Python source text.
        name: the dotted name of the module holding it (resolves relative imports).
        is_package: whether it is a package's __init__.
        known: the dotted names of the modules that count.
    """
    package = name if is_package else name.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                names.append((node.lineno, full if full in known else base))
    out = []
    for line, imported in names:
        while imported and imported not in known:  # `import a.b.c` of a name inside a module
            imported = imported.rpartition(".")[0]
        if imported and imported != name:
            out.append((line, imported))
    return out


def unit_of(name: str) -> str:
    """The unit of LAYERS that holds the module `name` (the longest that is a prefix)."""
    units = [u for layer in LAYERS for u in layer if name == u or name.startswith(u + ".")]
    if name.startswith("keras_bert.") and units == ["keras_bert"]:
        return ""  # a module of keras_bert that LAYERS does not place
    return max(units, key=len, default="")


LEVEL = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def graph() -> dict[str, list[tuple[int, str]]]:
    known = modules()
    return {
        name: imported_modules(
            path.read_text(encoding="utf-8"), name, path.name == "__init__.py", known
        )
        for name, path in known.items()
    }


def test_the_parser_sees_every_import_form():
    known = {"keras_bert.metrics", "keras_bert.metrics.classification", "keras_bert.tasks"}
    known |= {"keras_bert.tasks.task", "keras_bert.metrics.squad", "keras_bert"}
    source = (
        "import keras_bert.metrics.classification\nfrom keras_bert import metrics\n"
        "def f():\n    from ..metrics import squad\n    from . import task\n"
        "    from .task import Task\nimport numpy\nimport keras_bert.tasks.task.Thing\n"
    )
    assert imported_modules(source, "keras_bert.tasks.loading", False, known) == [
        (1, "keras_bert.metrics.classification"),
        (2, "keras_bert.metrics"),
        (8, "keras_bert.tasks.task"),
        (4, "keras_bert.metrics.squad"),
        (5, "keras_bert.tasks.task"),
        (6, "keras_bert.tasks.task"),
    ]


def test_every_package_and_module_has_a_layer():
    placed = {name: unit_of(name) for name in modules()}
    assert [name for name, unit in placed.items() if not unit] == []
    top_level = {p.name for p in (REPO / "keras_bert").iterdir() if p.suffix == ".py" or p.is_dir()}
    top_level = {
        n.removesuffix(".py") for n in top_level if n not in ("__init__.py", "__pycache__")
    }
    assert {f"keras_bert.{n}" for n in top_level} <= set(LEVEL)


def test_every_import_points_down():
    bad = []
    for name, imports in graph().items():
        mine = unit_of(name)
        for line, imported in imports:
            theirs = unit_of(imported)
            if theirs != mine and LEVEL[theirs] >= LEVEL[mine]:
                bad.append(f"{name}:{line} imports {imported} ({theirs} is not below {mine})")
    assert bad == []


def test_the_module_graph_has_no_cycle():
    edges = {name: {m for _, m in imports} for name, imports in graph().items()}
    cycles, done, path = [], set(), []

    def visit(node):  # depth first; a node met again on the current path closes a cycle
        if node in path:
            cycles.append(path[path.index(node) :] + [node])
            return
        if node in done:
            return
        path.append(node)
        for other in sorted(edges[node]):
            visit(other)
        path.pop()
        done.add(node)

    for node in sorted(edges):
        visit(node)
    assert cycles == []


@pytest.mark.parametrize(
    "source, name, expected",
    [
        ("from keras_bert.cli import fail_usage\n", "keras_bert.fileio", "keras_bert.cli"),
        ("def f():\n    from keras_bert.training import trainer\n", "keras_bert.cli", "training"),
        ("from serving.dispatch import inference\n", "serving.models.servable", "dispatch"),
        ("from serving import server\n", "serving.protocol.rest", "serving.server"),
    ],
)
def test_an_upward_import_is_seen(source, name, expected):
    known = modules()
    (imported,) = [m for _, m in imported_modules(source, name, False, known)]
    assert expected in imported and LEVEL[unit_of(imported)] > LEVEL[unit_of(name)]


def test_serving_uses_of_keras_bert_only_what_loads_no_model_code():
    used = {
        imported
        for name, imports in graph().items()
        if name == "serving" or name.startswith("serving.")
        for _, imported in imports
        if imported.startswith("keras_bert")
    }
    assert used <= SERVING_MAY_USE, used - SERVING_MAY_USE
