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

Everything is written under `EXPORT_BASE/<model_name>/.tmp-<version>-<random>/` and renamed into
place (`versioning.publish`): a crash leaves at most a hidden temporary directory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import pathlib
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from keras_bert.config import check_max_seq_length
from keras_bert.faults import crash_point
from keras_bert.saved_model import litert as litert_lib
from keras_bert.saved_model import versioning, warmup
from keras_bert.saved_model.harmless_logs import quiet_harmless_export_logs
from keras_bert.saved_model.serving_module import INPUT_NAMES
from keras_bert.tokenization.bert_preprocessor import TOKENIZERS, BertPreprocessor

logger = logging.getLogger(__name__)

CONFIG_FILENAME = "export_config.json"
EXPORT_DTYPES = ("float32", "bfloat16")
DEFAULT_WARMUP_TEXTS = (
    ("a gripping , beautifully acted film .", "the film is gripping and well acted ."),
    ("it 's a dull , lifeless mess .", "the movie is boring ."),
)


def check_model_name_and_version(model_name, version) -> None:
    """Raises ValueError for a model_name that is not a plain directory name or a bad version."""
    if not model_name or os.sep in str(model_name) or str(model_name).startswith("."):
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


def find_export(export_base, model_name, fingerprint: str, litert=None) -> pathlib.Path | None:
    """The existing version of `export_base/model_name` whose weights have `fingerprint` and whose
    LiteRT file is the `litert` asked for (None: none), if any (lets a resumed recipe skip an
    export it already published)."""
    model_dir = pathlib.Path(export_base) / model_name
    for version in versioning.existing_versions(model_dir):
        config = model_dir / str(version) / "assets" / CONFIG_FILENAME
        try:
            stored = json.loads(config.read_text())
            if (
                stored.get("weights_sha256") == fingerprint
                and (stored.get("litert") or {}).get("quantize") == litert
            ):
                return model_dir / str(version)
        except (OSError, ValueError):
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


def _write_assets(staging: pathlib.Path, task, preprocessor, config: dict) -> dict:
    """Writes vocab / labels / config files to `staging`; returns name -> tf.saved_model.Asset."""
    (staging / "vocab.txt").write_text(
        "".join(f"{t}\n" for t in preprocessor.vocabulary), encoding="utf-8"
    )
    (staging / CONFIG_FILENAME).write_text(json.dumps(config, indent=2, sort_keys=True))
    assets = {
        "vocab_file": tf.saved_model.Asset(str(staging / "vocab.txt")),
        "config_file": tf.saved_model.Asset(str(staging / CONFIG_FILENAME)),
    }
    if task.label_names:
        (staging / "labels.txt").write_text(
            "".join(f"{x}\n" for x in task.label_names), encoding="utf-8"
        )
        assets["labels_file"] = tf.saved_model.Asset(str(staging / "labels.txt"))
    return assets


def _private_dir(prefix: str, parent=None) -> pathlib.Path:
    """mkdtemp with the permissions the umask allows (a server running as another user reads the
    published version; mkdtemp alone makes 0700 directories)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o777 & ~umask)
    return path


def remove_stale_temporaries(model_dir: pathlib.Path) -> list[str]:
    """Removes `.tmp-<version>-<pid>-*` directories whose writing process is gone (an export
    killed before its rename); a live writer's directory, or any other name, is left alone.
    Returns the names removed."""
    removed = []
    for path in model_dir.glob(".tmp-*-*-*"):
        parts = path.name.split("-")
        if len(parts) < 4 or not parts[2].isdigit() or int(parts[2]) == os.getpid():
            continue
        try:
            os.kill(int(parts[2]), 0)
            continue  # its writer is alive
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
        except PermissionError:
            continue  # alive, another user's
    return removed


def _publish(tmp_dir, model_dir: pathlib.Path, chosen: int, version) -> pathlib.Path:
    while True:
        try:
            return versioning.publish(tmp_dir, model_dir, chosen)
        except FileExistsError:
            if version is not None:
                raise
            chosen = versioning.next_version(model_dir)  # another writer took it: the next one


def _warmup_signature(log) -> str:
    """The signature key a PredictionLog's request names."""
    return getattr(log, log.WhichOneof("log_type")).request.model_spec.signature_name


def _litert_flatbuffer(task, preprocessor, staging, quantize) -> bytes:
    """model.tflite's bytes: the `encoded` signature of a float32 copy of the task (a task under a
    16-bit policy, such as mixed_bfloat16 training or a bfloat16 export, is copied to float32:
    LiteRT's kernels, XNNPACK's among them, take no bfloat16)."""
    module = with_dtype(task, "float32").serving_module(preprocessor)
    return litert_lib.convert_signature(
        module.signatures()["encoded"], staging, quantize, signature_key="encoded"
    )


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
) -> pathlib.Path:
    """Exports `task` as `export_base/<model_name>/<version>/`; see `Task.export` for the args.

    With `litert` ("float32" or "int8") the version also holds `model.tflite` (the `encoded`
    signature, `keras_bert.saved_model.litert`), and its warmup records are the `encoded` ones
    only, so that a server preferring the LiteRT file can replay all of them.

    Returns:
        pathlib.Path of the published version directory.

    Raises:
        ValueError: bad model_name / version / dtype / tokenizer / litert, a max_seq_length
            beyond the encoder's position table, or a model LiteRT cannot convert (no version
            directory is written).
        FileExistsError: an explicit `version` that exists (never overwritten).
    """
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
    model_dir = pathlib.Path(export_base) / model_name
    model_dir.mkdir(parents=True, exist_ok=True)
    chosen = int(version) if version is not None else versioning.next_version(model_dir)
    if (model_dir / str(chosen)).exists():
        raise FileExistsError(
            f"version {chosen} already exists at {model_dir / str(chosen)}; "
            "exported versions are never overwritten"
        )
    for name in remove_stale_temporaries(model_dir):
        logger.info("removed %s, left by an export that was killed", model_dir / name)
    staging = _private_dir("keras_bert_assets_")
    tmp_dir = _private_dir(f".tmp-{chosen}-{os.getpid()}-", model_dir)
    with quiet_harmless_export_logs():
        try:
            module = task.serving_module(preprocessor)
            config = export_config(task, module, model_name, tokenizer, extra_config)
            module.attach_assets(_write_assets(staging, task, preprocessor, config))
            tf.saved_model.save(module, str(tmp_dir), signatures=module.signatures())
            versioning.set_method_names(tmp_dir, module.method_names())
            logs = module.warmup_logs(model_name, list(warmup_texts or DEFAULT_WARMUP_TEXTS))
            if litert is not None:
                (tmp_dir / litert_lib.TFLITE_FILENAME).write_bytes(
                    _litert_flatbuffer(task, preprocessor, staging, litert)
                )
                logs = [log for log in logs if _warmup_signature(log) in litert_lib.SIGNATURES]
            warmup.write_warmup_requests(tmp_dir, logs)
            crash_point("export_publish")
            target = _publish(tmp_dir, model_dir, chosen, version)
            logger.info("exported %s version %s to %s", model_name, target.name, target)
            return target
        finally:
            shutil.rmtree(tmp_dir, ignore_errors=True)
            shutil.rmtree(staging, ignore_errors=True)


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
