"""serving/ imports no model code (SPEC section 3): it serves any SavedModel from its signatures.
What it may import of keras_bert: tests/test_import_layers.py (`SERVING_MAY_USE`)."""

from tests.conftest import REPO_ROOT


def test_every_serving_module_imports_without_tensorflow_runtime():
    """Importing any serving module loads no TensorFlow runtime (`import tensorflow` is 670 MB):
    only a SavedModel load does (`servable.tensorflow()`), so a LiteRT-only server and the
    client never hold it."""
    import json
    import subprocess
    import sys

    files = (REPO_ROOT / "serving").rglob("*.py")  # the programs and every layer's modules
    dotted = (".".join(p.relative_to(REPO_ROOT).with_suffix("").parts) for p in files)
    modules = sorted({name.removesuffix(".__init__") for name in dotted})
    script = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m in ('tensorflow', 'keras')\n"
        "                        or m.startswith(('tensorflow.python', 'keras.')))))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []
    assert {"serving", "serving.server", "serving.models.servable", "serving.wire"} <= set(modules)


def test_tensorflow_set_up_runs_every_step_once_even_after_a_failure(monkeypatch):
    from serving.models import servable

    monkeypatch.setattr(servable, "_tensorflow_ready", False)
    monkeypatch.setattr(servable, "_ON_TENSORFLOW_IMPORT", [])
    ran = []

    def failing():
        ran.append("threads")
        raise RuntimeError("threads already initialised")

    servable.on_tensorflow_import(failing)
    servable.on_tensorflow_import(lambda: ran.append("custom ops"))
    import pytest

    with pytest.raises(RuntimeError, match="threads already initialised"):
        servable.tensorflow()
    assert ran == ["threads", "custom ops"]
    servable.tensorflow()  # ready: nothing runs again
    servable.on_tensorflow_import(lambda: ran.append("late"))  # runs at once
    assert ran == ["threads", "custom ops", "late"]
