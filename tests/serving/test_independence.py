"""serving/ imports no model code (SPEC section 3): it serves any SavedModel from its signatures."""

import ast

from tests.conftest import REPO_ROOT


def test_serving_imports_no_keras_bert_or_export():
    offenders = []
    for path in sorted((REPO_ROOT / "serving").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [
                f"{path.name}: {n}"
                for n in names
                if n.split(".")[0] in ("keras_bert", "export", "recipes")
            ]
    assert offenders == []
