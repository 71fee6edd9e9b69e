"""Must-compile (XLA) marks in a SavedModel: exports carry none (SPEC section 8).

A `tf.function(jit_compile=True)` is saved as a FunctionDef (and its call nodes) with the attr
`_XlaMustCompile: true`. Stock TensorFlow Serving cannot run such a function unless it was
started with `--xla_cpu_compilation_enabled` (tensorflow/serving#2214, #2217), so an export
holding one would load there and then fail every request. Training under `--jit_compile` XLA-compiles
only Keras's train step; the export traces the task's call afresh, so nothing is marked.
`check_no_must_compile` holds every export to that (`exporter._write_version` calls it on the
signatures before saving); `saved_model_marks` inspects a saved_model.pb (the tests use it).
"""

from __future__ import annotations

from tensorflow.core.protobuf import saved_model_pb2

from keras_bert import fileio

XLA_MUST_COMPILE_ATTR = "_XlaMustCompile"


def _marked(attrs) -> bool:
    return XLA_MUST_COMPILE_ATTR in attrs and attrs[XLA_MUST_COMPILE_ATTR].b


def must_compile_marks(graph_def) -> list[str]:
    """What in a GraphDef is marked `_XlaMustCompile: true`: "function NAME" for a FunctionDef of
    its library (listed first), "node NAME" / "node FUNCTION/NAME" for a call node (empty: none)."""
    library = graph_def.library.function
    found = [f"function {f.signature.name}" for f in library if _marked(f.attr)]
    found += [f"node {n.name}" for n in graph_def.node if _marked(n.attr)]
    for function in library:
        name = function.signature.name
        found += [f"node {name}/{n.name}" for n in function.node_def if _marked(n.attr)]
    return found


def saved_model_marks(export_dir: str) -> list[str]:
    """`must_compile_marks` of every MetaGraph in `export_dir/saved_model.pb` (any URI)."""
    path = fileio.join(str(export_dir), "saved_model.pb")
    saved_model = saved_model_pb2.SavedModel.FromString(fileio.read_bytes(path))
    return [mark for meta in saved_model.meta_graphs for mark in must_compile_marks(meta.graph_def)]


def concrete_function_marks(function) -> list[str]:
    """`must_compile_marks` of a ConcreteFunction: itself ("function NAME") and the graph it calls."""
    own = [f"function {function.name}"] if _marked(function.function_def.attr) else []
    return own + must_compile_marks(function.graph.as_graph_def())


def check_no_must_compile(signatures: dict) -> None:
    """Refuses signatures (key -> ConcreteFunction, as given to `tf.saved_model.save`) that are,
    or call, a must-compile function.

    Raises:
        ValueError: naming the signature and the marked functions / call nodes.
    """
    for key, function in sorted(signatures.items()):
        marks = concrete_function_marks(function)
        if marks:
            shown = ", ".join(marks[:4]) + (f" and {len(marks) - 4} more" if len(marks) > 4 else "")
            raise ValueError(
                f"signature {key!r} holds must-compile (XLA) functions ({shown}); stock "
                "TensorFlow Serving cannot run them without --xla_cpu_compilation_enabled: "
                "export a model whose call does not use tf.function(jit_compile=True)"
            )
