"""The task kinds of the evidence pack, found by `Task.task_type` (`kind_of`).

One module per kind, named by its task_type, builds an `EvidenceKind` (how to read its held-out
file, evaluate outputs, read a training file's texts, its report sections, failure-table
columns, invariance tests, whether it takes template tests) and registers it on import. This
package imports every module in it, so importing it gives the complete registry, and a new task
kind is one more module here, with nothing else edited.
"""

import importlib
import pkgutil

from keras_bert.evaluation.kinds.evidence_kind import (
    Columns,
    EvidenceKind,
    find,
    kind_of,
    own_format,
    register,
)

for _module in pkgutil.iter_modules(__path__):  # each registers its kind on import
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["Columns", "EvidenceKind", "find", "kind_of", "own_format", "register"]
