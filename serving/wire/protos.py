"""TensorFlow Serving's protos and stubs without TensorFlow's runtime (for `serving.client`).

The tensorflow-serving-api modules (`predict_pb2`, ...) import TensorFlow's own generated protos
(`from tensorflow.core.framework import tensor_pb2`, `tensorflow.core.protobuf`,
`tensorflow.core.example`, `tensorflow.compiler.xla.tsl.protobuf`). Those are plain `_pb2` files,
but Python imports a package's parents first, so the first such import runs
`tensorflow/__init__.py`: the whole runtime (about 5.6 s and 760 MB resident for a one-line client
call; docs/results/serving.md, "Serving client start-up").

When TensorFlow is not imported yet, `install()` registers those packages (and their parents up
to `tensorflow.core` / `tensorflow.compiler`; every `__init__.py` there is empty) in `sys.modules`
as the same module objects an ordinary import would make, each bound on its parent, and gives
them a module `__getattr__` (PEP 562) that loads a `*_pb2` submodule from its file on first use.
`from tensorflow.core.framework import tensor_pb2` then finds the attribute and never reaches the
`tensorflow` package itself. Nothing is copied or vendored: the files are the installed ones.
A later `import tensorflow` in the same process works as usual and reuses these modules (so each
proto file is registered once): TensorFlow's top-level module does not expose `core` or
`compiler` as attributes either way. When TensorFlow is already imported, `install()` does nothing.
"""

import importlib.machinery
import importlib.util
import sys

from serving.wire.module_files import exec_registered

# Packages whose `_pb2` files the tensorflow_serving protos import, parents first.
_PACKAGES = (
    "core",
    "core/framework",
    "core/protobuf",
    "core/example",
    "compiler",
    "compiler/xla",
    "compiler/xla/tsl",
    "compiler/xla/tsl/protobuf",
)


def _proto_package(name: str, directory: str):
    """The package `name` (its real, empty `__init__.py`) with a lazy `*_pb2` `__getattr__`."""
    spec = importlib.util.spec_from_file_location(
        name, f"{directory}/__init__.py", submodule_search_locations=[directory]
    )
    package = importlib.util.module_from_spec(spec)

    def __getattr__(attr):
        full = f"{name}.{attr}"
        if full in sys.modules:
            return sys.modules[full]
        sub = importlib.machinery.PathFinder.find_spec(full, [directory])  # no parent import
        if not attr.endswith("_pb2") or sub is None:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        module = exec_registered(sub, full)
        setattr(package, attr, module)
        return module

    package.__getattr__ = __getattr__
    spec.loader.exec_module(package)
    return package


def install() -> bool:
    """Makes TensorFlow's proto packages importable without TensorFlow (module docstring).

    Returns:
        True if it registered them; False if TensorFlow (or the packages) were already imported,
        or TensorFlow is not installed (then the imports below fail as they would anyway).
    """
    if "tensorflow" in sys.modules or "tensorflow.core.framework" in sys.modules:
        return False
    spec = importlib.util.find_spec("tensorflow")  # finds the package; does not import it
    if spec is None or not spec.submodule_search_locations:
        return False
    root = list(spec.submodule_search_locations)[0]
    for relative in _PACKAGES:
        name = "tensorflow." + relative.replace("/", ".")
        parent, _, child = name.rpartition(".")
        package = _proto_package(name, f"{root}/{relative}")
        sys.modules[name] = package
        if parent in sys.modules:
            setattr(sys.modules[parent], child, package)
    return True


install()

# The imports below must follow install(): they are what it makes light.
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2  # noqa: E402
from tensorflow_serving.apis import (  # noqa: E402
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

__all__ = [
    "get_model_status_pb2",
    "install",
    "model_service_pb2_grpc",
    "predict_pb2",
    "prediction_service_pb2_grpc",
    "tensor_pb2",
    "tensor_shape_pb2",
    "types_pb2",
]
