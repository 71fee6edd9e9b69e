"""A LiteRT (TensorFlow Lite) copy of an export's id signature: `model.tflite` in the version dir.

Why: at batch 1 a BERT forward pass in the TensorFlow runtime is dominated by per-op overhead
(about 900 graph ops for MiniLM-L6, each dispatched by the executor), not by its ~0.7 GFLOP of
matrix products. The LiteRT interpreter runs the same computation as ~400 flat-buffer ops through
XNNPACK, whose fully-connected and batch-matmul kernels are at the compute floor of this CPU
(docs/results/export-litert.md, "bench_litert"). Dynamic-range quantization (`quantize="int8"`) stores the
dense and embedding weights as int8 with one float scale per output channel and quantizes the
activations of each product at run time (per row), so the products run as int8 x int8 -> int32;
LayerNorm, softmax, GELU and the attention products stay float32 (TensorFlow Lite,
"Post-training dynamic range quantization").

Layout, the one `tensorflow_model_server --prefer_tflite_model` reads:

    EXPORT_BASE/<model_name>/<version>/
        saved_model.pb, variables/, assets/ ...   the float32 SavedModel, every signature
        model.tflite                              `encoded` only (int32 ids in, the same outputs)

Only `encoded` is converted: the text signatures tokenize with TensorFlow string and ragged ops
that LiteRT's builtin op set does not have. Clients of the LiteRT path tokenize themselves (the
vocabulary is in `assets/vocab.txt`), as with any id-input BERT deployment.

The run-time id checks of the SavedModel's `encoded` (`ServingModule.checked_ids`) are Assert ops,
which the converter drops: out-of-range ids still fail (LiteRT's GATHER checks its indices), a
sequence longer than the position table fails when the interpreter resizes, and mask values other
than 0 / 1 are refused by `serving.server`, not by the flatbuffer (docs/export.md, "LiteRT").
"""

from __future__ import annotations

import gc

import tensorflow as tf

from keras_bert import fileio
from keras_bert.layers.self_attention import portable_attention

TFLITE_FILENAME = "model.tflite"  # the name tensorflow_model_server --prefer_tflite_model loads
QUANTIZATIONS = ("float32", "int8")
SIGNATURES = ("encoded",)


def _converter_for(converter, quantize: str):
    if quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize must be one of {list(QUANTIZATIONS)}, got {quantize!r}")
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantize == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]  # dynamic range: no calibration set
    return converter


def _convert(converter, what: str) -> bytes:
    try:
        return converter.convert()
    except Exception as e:
        lines = [line for line in str(e).splitlines() if "error:" in line] or str(e).splitlines()
        raise ValueError(
            f"{what} cannot be converted to LiteRT builtin ops: "
            f"{lines[0].strip() if lines else type(e).__name__}"
        ) from e


def convert_signature(
    function, staging_dir, quantize: str = "float32", signature_key: str = "encoded"
) -> bytes:
    """Converts one signature function to a LiteRT flatbuffer, its variables frozen to constants.

    The function is frozen (`convert_variables_to_constants_v2`), saved under `staging_dir` as a
    variable-free SavedModel with the one signature `signature_key`, and converted from there, so
    the flatbuffer keeps the signature key and its input / output names. Converting the exported
    SavedModel directly would keep resource variables (READ_VARIABLE ops) that LiteRT's
    interpreter leaves uninitialised.

    Args:
        function: a `tf.types.experimental.ConcreteFunction` with named TensorSpec inputs and
            a dict output.
        staging_dir: an existing, writable local directory (a sub-directory is written there:
            the converter reads a local SavedModel; `fileio.local_temp_dir` makes one).
        quantize: "float32" (weights as stored, float32 compute) or "int8" (dynamic range).
        signature_key: the key the signature gets in the flatbuffer.

    Returns:
        bytes: the flatbuffer (what `model.tflite` holds).

    Raises:
        ValueError: an unknown `quantize`, or ops outside LiteRT's builtins.
    """
    path = fileio.join(str(staging_dir), f"frozen_{signature_key}")
    _save_frozen(function, path, signature_key)
    # The frozen graphs (each a copy of the weights as constants) are cycles of objects: collect
    # them now, before the converter loads its own copies (MiniLM-L6 LiteRT export: 650 MiB less
    # peak resident memory; docs/results/memory.md, "bench_memory").
    gc.collect()
    converter = tf.lite.TFLiteConverter.from_saved_model(path, signature_keys=[signature_key])
    return _convert(_converter_for(converter, quantize), f"signature {signature_key!r}")


def _save_frozen(function, path: str, signature_key: str) -> None:
    """Saves `function` with its variables frozen to constants as a SavedModel at `path` whose one
    signature is `signature_key`; nothing it builds outlives the call."""
    from tensorflow.python.framework import convert_to_constants

    frozen = convert_to_constants.convert_variables_to_constants_v2(function)
    specs = [
        spec
        for spec in tf.nest.flatten(function.structured_input_signature)
        if isinstance(spec, tf.TensorSpec)
    ]  # in call order, each named
    module = tf.Module()
    module.signature = tf.function(  # the frozen function returns a flat list: name its outputs
        lambda *args: tf.nest.pack_sequence_as(function.structured_outputs, frozen(*args)),
        input_signature=specs,
    ).get_concrete_function()
    tf.saved_model.save(module, path, signatures={signature_key: module.signature})


def convert_encoder(encoder, quantize: str = "float32") -> bytes:
    """A `BertEncoder`'s `sequence_output` as a LiteRT flatbuffer (for benchmarks and tests).

    Inputs `input_word_ids`, `input_mask`, `input_type_ids`: int32 [B, T] (resized at run time);
    output: float32 [B, T, H]. Variables are frozen into constants first.

    Raises:
        ValueError: as `convert_signature`.
    """
    from tensorflow.python.framework import convert_to_constants

    specs = [
        tf.TensorSpec([None, None], tf.int32, name=n)
        for n in ("input_word_ids", "input_mask", "input_type_ids")
    ]

    @tf.function(input_signature=specs)
    def forward(input_word_ids, input_mask, input_type_ids):
        return encoder(
            {
                "input_word_ids": input_word_ids,
                "input_mask": input_mask,
                "input_type_ids": input_type_ids,
            },
            training=False,
        )["sequence_output"]

    with portable_attention():  # the form XNNPACK runs best
        function = forward.get_concrete_function()
    frozen = convert_to_constants.convert_variables_to_constants_v2(function)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([frozen])
    return _convert(_converter_for(converter, quantize), "the encoder")


def litert_option(tflite: bool, quantize: str | None, tflite_refused: bool = False) -> str | None:
    """The `litert` argument of `Task.export` from the command-line flags `--export_tflite` and
    `--export_quantize` (`--export_quantize=int8` implies `--export_tflite`): None, "float32" or
    "int8".

    Raises:
        ValueError: `tflite_refused` (the user gave `--noexport_tflite`) with a quantization, which
            would write the model.tflite they said no to.
    """
    if quantize is not None and tflite_refused:
        raise ValueError(
            f"--export_quantize={quantize} writes model.tflite, but --noexport_tflite was given: "
            "drop one of them"
        )
    if quantize is not None:
        return quantize
    return "float32" if tflite else None


def config_entry(quantize: str) -> dict:
    """What assets/export_config.json records about the LiteRT file."""
    if quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize must be one of {list(QUANTIZATIONS)}, got {quantize!r}")
    return {
        "file": TFLITE_FILENAME,
        "quantize": quantize,
        "signatures": list(SIGNATURES),
        "serve_with": "python -m serving.server --prefer_tflite_model (or "
        "tensorflow_model_server --prefer_tflite_model=true)",
    }


__all__ = [
    "QUANTIZATIONS",
    "SIGNATURES",
    "TFLITE_FILENAME",
    "config_entry",
    "convert_encoder",
    "convert_signature",
    "litert_option",
]
