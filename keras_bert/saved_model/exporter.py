"""`export_task`: any `keras_bert.tasks.Task` as a versioned SavedModel (SPEC section 7).

Layout written (what `tensorflow_model_server --model_base_path=EXPORT_BASE/<model_name>` and
`serving.server` poll):

    EXPORT_BASE/<model_name>/<version>/      version: positive integer, next free one by default
        saved_model.pb, fingerprint.pb, variables/
        assets/vocab.txt                      the task's vocabulary (from the task, not a file)
        assets/labels.txt                     label names in id order (tasks with labels)
        assets/export_config.json             what the task is, tokenizer, BertConfig, signatures
        assets.extra/tf_serving_warmup_requests   TFRecord of tensorflow.serving.PredictionLog
        model.tflite                          with `litert=`: the `encoded` signature for LiteRT
                                              (keras_bert.saved_model.litert)

`EXPORT_BASE` is any URI `keras_bert.fileio` handles (local, `gs://`, `ram://`, ...). Everything
is written into a hidden staging directory beside the version (`fileio.staging_dir`) and published
as `<version>/` with `fileio.publish_dir` (`versioning.publish`): one rename on a local disk, or a
copy with saved_model.pb and `fileio.COMPLETE_MARKER` last on an object store. A crash leaves at
most a hidden staging directory, which the next export from the same host removes once its
writer is gone (`remove_stale_temporaries`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import socket

import numpy as np
import tensorflow as tf

from keras_bert import fileio
from keras_bert.config import check_max_seq_length
from keras_bert.faults import crash_point
from keras_bert.layers.self_attention import portable_attention
from keras_bert.saved_model import litert as litert_lib
from keras_bert.saved_model import versioning, warmup
from keras_bert.saved_model.xla_marks import check_no_must_compile
from keras_bert.saved_model.harmless_logs import quiet_harmless_export_logs
from keras_bert.saved_model.serving_module import INPUT_NAMES
from keras_bert.tokenization.bert_preprocessor import TOKENIZERS, BertPreprocessor

logger = logging.getLogger(__name__)

CONFIG_FILENAME = "export_config.json"
# In a staging directory while it is written: {"host", "pid"} of the exporting process.
WRITER_FILENAME = ".keras_bert_writer"
# In a staging directory: the asset files `tf.saved_model.save` copies into assets/.
_SOURCES_DIRNAME = ".asset_sources"
EXPORT_DTYPES = ("float32", "bfloat16")
DEFAULT_WARMUP_TEXTS = (
    ("a gripping , beautifully acted film .", "the film is gripping and well acted ."),
    ("it 's a dull , lifeless mess .", "the movie is boring ."),
)


def check_model_name_and_version(model_name, version) -> None:
    """Raises ValueError for a model_name that is not a plain directory name or a bad version."""
    name = str(model_name or "")
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"model_name must be a plain directory name, got {model_name!r}")
    if version is not None and (
        isinstance(version, bool) or int(version) != version or int(version) < 1
    ):
        raise ValueError(f"version must be a positive integer, got {version!r}")


def with_dtype(task, dtype: str):
    """The same task under Keras dtype policy `dtype`, with the same weights (cast).

    Returns `task` itself when its policy already is `dtype`; otherwise rebuilds it from its config
    (the nested encoder's policy replaced too) and copies the weights, so a task trained under
    `mixed_bfloat16` (float32 variables) exports with bfloat16 variables.

    Raises:
        ValueError: dtype not in EXPORT_DTYPES.
    """
    if dtype not in EXPORT_DTYPES:
        raise ValueError(f"dtype must be one of {list(EXPORT_DTYPES)}, got {dtype!r}")
    if dtype == getattr(task.dtype_policy, "name", None):
        return task
    config = task.get_config()
    config["dtype"] = dtype
    config["encoder"]["config"]["dtype"] = dtype
    rebuilt = task.__class__.from_config(config)
    rebuilt.build_for_export()
    rebuilt.set_weights(task.get_weights())
    return rebuilt


def preprocessor_for(task, tokenizer: str) -> BertPreprocessor:
    """The task's own preprocessor, or the same vocabulary, casing and length with `tokenizer`.

    Raises:
        ValueError: unknown tokenizer.
    """
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer must be one of {TOKENIZERS}, got {tokenizer!r}")
    p = task.preprocessor
    if p.tokenizer == tokenizer:
        return p
    return BertPreprocessor(
        vocabulary=p.vocabulary,
        do_lower_case=p.do_lower_case,
        max_seq_length=p.max_seq_length,
        tokenizer=tokenizer,
    )


def weights_fingerprint(task) -> str:
    """sha256 (hex) of the task's weights in order: tells whether two exports hold the same model."""
    digest = hashlib.sha256()
    for weight in task.get_weights():
        digest.update(str(weight.dtype).encode() + str(weight.shape).encode())
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()


def find_export(export_base, model_name, fingerprint: str, litert=None) -> str | None:
    """The existing version of `export_base/model_name` whose weights have `fingerprint` and whose
    LiteRT file is the `litert` asked for (None: none), if any (lets a resumed recipe skip an
    export it already published). Returns its directory (a str, as `export_task`)."""
    model_dir = fileio.join(str(export_base), model_name)
    for version in versioning.existing_versions(model_dir):
        version_dir = fileio.join(model_dir, str(version))
        try:
            stored = fileio.read_json(fileio.join(version_dir, "assets", CONFIG_FILENAME))
            if (
                stored.get("weights_sha256") == fingerprint
                and (stored.get("litert") or {}).get("quantize") == litert
            ):
                return version_dir
        except (OSError, ValueError, tf.errors.OpError):
            continue
    return None


def export_config(task, module, model_name, tokenizer, extra_config=None) -> dict:
    """The JSON written to assets/export_config.json."""
    return {
        "model_name": model_name,
        **task.export_metadata(),
        "tokenizer": tokenizer,
        "weights_sha256": weights_fingerprint(task),
        "requires_tensorflow_text": tokenizer == "tf_text",
        "input_id_dtype": "int32",
        "dtype_policy": task.dtype_policy.name,
        "bert_config": dataclasses.asdict(task.encoder.bert_config),
        "signatures": module.signature_summary(),
        **(extra_config or {}),
    }


def _write_assets(sources: str, task, preprocessor, config: dict) -> dict:
    """Writes vocab / labels / config files to `sources`; returns name -> tf.saved_model.Asset
    (`tf.saved_model.save` copies each into the SavedModel's assets/)."""
    fileio.makedirs(sources)
    files = {
        "vocab_file": ("vocab.txt", "".join(f"{t}\n" for t in preprocessor.vocabulary)),
        "config_file": (CONFIG_FILENAME, json.dumps(config, indent=2, sort_keys=True)),
    }
    if task.label_names:
        files["labels_file"] = ("labels.txt", "".join(f"{x}\n" for x in task.label_names))
    assets = {}
    for key, (name, text) in files.items():
        path = fileio.join(sources, name)
        fileio.write_text(path, text)
        assets[key] = tf.saved_model.Asset(path)
    return assets


def _claim(staged: str) -> None:
    """Records this process as the writer of `staged` (see `remove_stale_temporaries`)."""
    fileio.write_json(
        fileio.join(staged, WRITER_FILENAME), {"host": socket.gethostname(), "pid": os.getpid()}
    )


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True


def remove_stale_temporaries(model_dir: str) -> list[str]:
    """Removes the staging directories under `model_dir` whose writer (`WRITER_FILENAME`) was a
    process on this host that is gone (an export killed before it published). A live writer's
    directory, one written from another host, and any other name are left alone.

    Returns:
        list of str: the names removed.
    """
    removed = []
    for name in fileio.listdir(model_dir):
        if not name.startswith("."):
            continue
        staged = fileio.join(model_dir, name)
        try:
            writer = fileio.read_json(fileio.join(staged, WRITER_FILENAME))
            host, pid = writer["host"], int(writer["pid"])
        except (OSError, ValueError, KeyError, TypeError, tf.errors.OpError):
            continue  # not a staging directory of ours, or one being published
        if host != socket.gethostname() or pid == os.getpid() or _process_alive(pid):
            continue
        fileio.rmtree(staged)
        removed.append(name)
    return removed


def _publish(staged: str, model_dir: str, chosen: int, version) -> str:
    while True:
        try:
            return versioning.publish(staged, model_dir, chosen)
        except FileExistsError:
            if version is not None:
                raise
            chosen = versioning.next_version(model_dir)  # another writer took it: the next one


def _warmup_signature(log) -> str:
    """The signature key a PredictionLog's request names."""
    return getattr(log, log.WhichOneof("log_type")).request.model_spec.signature_name


def _litert_flatbuffer(task, preprocessor, quantize) -> bytes:
    """model.tflite's bytes: the `encoded` signature of a float32 copy of the task (a task under a
    16-bit policy, such as mixed_bfloat16 training or a bfloat16 export, is copied to float32:
    LiteRT's kernels, XNNPACK's among them, take no bfloat16). The converter reads a local
    SavedModel: it is written to a local scratch directory, whatever the export's URI. Attention
    is traced in the form XNNPACK runs best (`portable_attention`)."""
    module = with_dtype(task, "float32").serving_module(preprocessor)
    with portable_attention():
        encoded = module.signatures()["encoded"]
    with fileio.local_temp_dir("keras_bert_litert_") as scratch:
        return litert_lib.convert_signature(encoded, scratch, quantize, signature_key="encoded")


def export_task(
    task,
    export_base,
    model_name,
    version=None,
    dtype=None,
    tokenizer="core",
    warmup_texts=None,
    extra_config=None,
    litert=None,
) -> str:
    """Writes `export_base/<model_name>/<version>/` (SPEC section 7), atomically; `Task.export`.

    Args:
        task: the task to export (it must have its preprocessor).
        export_base: directory (any `keras_bert.fileio` URI) holding one sub-directory per
            model name (created if missing).
        model_name: str, the name servers serve it under; a plain directory name.
        version: positive int, or None for the next free integer version.
        dtype: None (as trained), "float32" or "bfloat16" (variables stored in bfloat16).
        tokenizer: "core" (core TF ops: loads with plain TensorFlow) or "tf_text".
        warmup_texts: optional list of (text, text_b) pairs for the warmup records.
        extra_config: optional JSON-able dict merged into assets/export_config.json.
        litert: None, "float32" or "int8": also write `model.tflite`, the `encoded` signature
            for the LiteRT runtime (int8: dynamic-range quantized weights), which
            `serving.server --prefer_tflite_model` serves; see docs/export.md. Its warmup
            records are then the `encoded` ones only, so that a server preferring the LiteRT
            file can replay all of them.

    Returns:
        str: the published version directory, `export_base/<model_name>/<version>` joined as
            `fileio.join` does (a URI kept as typed).

    Raises:
        ValueError: no preprocessor, bad model_name / version / dtype / tokenizer / litert, a
            max_seq_length beyond the encoder's position table, a model LiteRT cannot convert,
            or a traced call holding a must-compile (XLA) function (`xla_marks`; no version
            directory is written).
        FileExistsError: an explicit `version` that exists (never overwritten).
        fileio.UnreachablePathError: `export_base` on a file system that cannot be reached.
    """
    task.require_preprocessor("export")
    check_model_name_and_version(model_name, version)
    preprocessor = preprocessor_for(task, tokenizer)
    check_max_seq_length(
        preprocessor.max_seq_length,
        task.encoder.bert_config.max_sequence_length,
        is_pair=task.is_pair,
    )
    if litert is not None:
        extra_config = {**(extra_config or {}), "litert": litert_lib.config_entry(litert)}
    if dtype is not None:
        task = with_dtype(task, dtype)
    model_dir = fileio.join(str(export_base), model_name)
    fileio.check_reachable(model_dir, "export base")
    fileio.makedirs(model_dir)
    chosen = int(version) if version is not None else versioning.next_version(model_dir)
    if fileio.exists(fileio.join(model_dir, str(chosen))):
        raise FileExistsError(
            f"version {chosen} already exists at {fileio.join(model_dir, str(chosen))}; "
            "exported versions are never overwritten"
        )
    for name in remove_stale_temporaries(model_dir):
        logger.info("removed %s, left by an export that was killed", fileio.join(model_dir, name))
    staged = fileio.staging_dir(fileio.join(model_dir, str(chosen)))
    with quiet_harmless_export_logs():
        try:
            _claim(staged)
            _write_version(
                staged,
                task,
                preprocessor,
                model_name,
                tokenizer,
                extra_config,
                litert,
                warmup_texts,
            )
            crash_point("export_publish")
            fileio.remove(fileio.join(staged, WRITER_FILENAME))  # not published with it
            target = _publish(staged, model_dir, chosen, version)
            logger.info("exported %s version %s to %s", model_name, fileio.basename(target), target)
            return target
        finally:
            fileio.rmtree(staged)


def _write_version(
    staged, task, preprocessor, model_name, tokenizer, extra_config, litert, warmup_texts
) -> None:
    """Writes the whole version into the staging directory `staged` (any URI)."""
    module = task.serving_module(preprocessor)
    config = export_config(task, module, model_name, tokenizer, extra_config)
    sources = fileio.join(staged, _SOURCES_DIRNAME)
    module.attach_assets(_write_assets(sources, task, preprocessor, config))
    signatures = module.signatures()
    check_no_must_compile(signatures)  # stock TF Serving cannot run XLA-marked functions
    tf.saved_model.save(module, staged, signatures=signatures)
    fileio.rmtree(sources)  # copied into assets/
    versioning.set_method_names(staged, module.method_names())
    logs = module.warmup_logs(model_name, list(warmup_texts or DEFAULT_WARMUP_TEXTS))
    if litert is not None:
        fileio.write_bytes(
            fileio.join(staged, litert_lib.TFLITE_FILENAME),
            _litert_flatbuffer(task, preprocessor, litert),
        )
        logs = [log for log in logs if _warmup_signature(log) in litert_lib.SIGNATURES]
    warmup.write_warmup_requests(staged, logs)


__all__ = [
    "CONFIG_FILENAME",
    "DEFAULT_WARMUP_TEXTS",
    "EXPORT_DTYPES",
    "INPUT_NAMES",
    "check_model_name_and_version",
    "export_config",
    "export_task",
    "find_export",
    "preprocessor_for",
    "weights_fingerprint",
    "with_dtype",
]
