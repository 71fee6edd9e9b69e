"""Loading a module from its file under a name of our choosing, as the import system would.

`serving.storage` loads `keras_bert/fileio.py` (and `serving.server` the table of flags that act
only with another, `keras_bert/training/flag_dependencies.py`) without running
`keras_bert/__init__.py`, and `serving.protos` loads TensorFlow's `*_pb2` files without running
`tensorflow/__init__.py`: both bypass the parent package yet must leave `sys.modules` as an ordinary
import would, so that a later real import finds (and shares) the same module object.
"""

import importlib.util
import sys


def exec_registered(spec, name: str):
    """The module of `spec`, registered in `sys.modules` as `name` before its code runs (so that
    imports inside it, and of it, find it) and removed again if its code raises, as an ordinary
    import does on failure (a half-run module is never left behind)."""
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_project_module(name: str):
    """The keras_bert module `name` (e.g. "keras_bert.fileio"), a file that imports nothing of
    keras_bert, loaded from its file without running `keras_bert/__init__.py` (which loads Keras
    and every task); the module already imported when it is.

    Raises:
        ImportError: keras_bert is not on the path.
    """
    if name in sys.modules:
        return sys.modules[name]
    package = importlib.util.find_spec("keras_bert")  # found, not imported
    if package is None or not package.submodule_search_locations:
        raise ImportError(f"keras_bert (for {name}) is not on the path")
    relative = name.split(".", 1)[1].replace(".", "/")
    location = f"{list(package.submodule_search_locations)[0]}/{relative}.py"
    return exec_registered(importlib.util.spec_from_file_location(name, location), name)
