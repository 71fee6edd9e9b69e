"""`keras_bert.fileio` for the server, without the rest of keras_bert.

The server reads base paths and config files through the project's one file-access module
(SPEC section 6a), yet imports no model code (SPEC section 3): `import keras_bert.fileio` would
first run `keras_bert/__init__.py`, which loads Keras and every task. So the module file is loaded
on its own and registered under its own name, `keras_bert.fileio`: a process that also imports
keras_bert (a test, a notebook) shares the one module object, and patches to it reach the server.
"""

import importlib.util
import sys

from serving.module_files import exec_registered

_NAME = "keras_bert.fileio"


def _load():
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    package = importlib.util.find_spec("keras_bert")  # found, not imported
    if package is None or not package.submodule_search_locations:
        raise ImportError("keras_bert (for keras_bert/fileio.py) is not on the path")
    location = f"{list(package.submodule_search_locations)[0]}/fileio.py"
    spec = importlib.util.spec_from_file_location(_NAME, location)
    return exec_registered(spec, _NAME)


fileio = _load()
