"""Loading a module from its file under a name of our choosing, as the import system would.

`serving.wire.protos` loads TensorFlow's `*_pb2` files without running `tensorflow/__init__.py`: it
bypasses the parent package yet must leave `sys.modules` as an ordinary import would, so that a
later real import finds (and shares) the same module object.
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
