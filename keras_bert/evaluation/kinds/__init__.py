"""The task kinds of the evidence pack, found by `Task.task_type` (`kind_of`).

One module per kind, named by its task_type, builds an `EvidenceKind` (how to read its held-out
file, evaluate outputs, read a training file's texts, its report sections, failure-table
columns, invariance tests, whether it takes template tests) and registers it on import. This
package imports the built-in ones, so importing it gives the complete registry; a new task kind
is one more module here, imported below.
"""

from keras_bert.evaluation.kinds.evidence_kind import (
    Columns,
    EvidenceKind,
    find,
    kind_of,
    own_format,
    register,
)
from keras_bert.evaluation.kinds import (  # noqa: F401  (each registers its kind on import)
    classification,
    multiple_choice,
    span_question_answering,
    token_classification,
)

__all__ = ["Columns", "EvidenceKind", "find", "kind_of", "own_format", "register"]
