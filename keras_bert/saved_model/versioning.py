"""Versioned SavedModel layout for TensorFlow Serving (SPEC sections 6a and 7).

`EXPORT_BASE/<model_name>/<version>/` with positive integer versions, as
`tensorflow_model_server --model_base_path=EXPORT_BASE/<model_name>` polls them. `EXPORT_BASE` is
any URI `keras_bert.fileio` handles (a local directory, `gs://`, `ram://`, ...). A version is built
in a hidden staging directory (`fileio.staging_dir`: a name that is not an integer, so servers
ignore it) and published with `fileio.publish_dir`: one rename on a local disk or HDFS; on an
object store or `ram://` a copy with `saved_model.pb` and then `fileio.COMPLETE_MARKER` last. So
a version directory is never complete-looking while half-written, and an existing version is
never overwritten (`FileExistsError`).
"""

from __future__ import annotations

import logging

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from keras_bert import fileio

logger = logging.getLogger(__name__)


def existing_versions(model_dir: str) -> list[int]:
    """Integer version directories under `model_dir`, ascending (other names, hidden staging
    directories among them, are ignored; a missing `model_dir` has none)."""
    model_dir = str(model_dir)
    if not fileio.isdir(model_dir):
        return []
    return sorted(
        int(name)
        for name in fileio.listdir(model_dir)
        if name.isdigit() and int(name) > 0 and fileio.isdir(fileio.join(model_dir, name))
    )


def next_version(model_dir: str) -> int:
    """1 + the largest existing integer version under `model_dir` (1 when there is none)."""
    versions = existing_versions(model_dir)
    return versions[-1] + 1 if versions else 1


def publish(staged: str, model_dir: str, version: int) -> str:
    """Publishes a complete export `staged` (from `fileio.staging_dir`) as `model_dir/<version>`.

    Returns:
        str: the version directory, `fileio.join(model_dir, str(version))`.

    Raises:
        FileExistsError: if `model_dir/<version>` exists (it is left untouched).
    """
    target = fileio.join(str(model_dir), str(int(version)))
    if fileio.exists(target):
        raise FileExistsError(
            f"version {version} already exists at {target}; exported versions are never overwritten"
        )
    try:
        fileio.publish_dir(str(staged), target)
    except (FileExistsError, tf.errors.AlreadyExistsError) as e:  # a racing writer took it
        raise FileExistsError(f"version {version} appeared at {target} while exporting") from e
    return target


def set_method_names(export_dir: str, method_names: dict) -> None:
    """Rewrites `signature_def[key].method_name` in `export_dir/saved_model.pb`.

    TF2's `tf.saved_model.save` writes `tensorflow/serving/predict` for every signature; the
    Classify and Regress APIs of TensorFlow Serving need `tensorflow/serving/classify` /
    `tensorflow/serving/regress`. Also rewrites `fingerprint.pb`, whose checksum covers
    saved_model.pb.

    Raises:
        KeyError: naming a signature key that is not in the SavedModel.
    """
    export_dir = str(export_dir)
    path = fileio.join(export_dir, "saved_model.pb")
    saved_model = saved_model_pb2.SavedModel.FromString(fileio.read_bytes(path))
    for meta_graph in saved_model.meta_graphs:
        for key, method in method_names.items():
            if key not in meta_graph.signature_def:
                raise KeyError(
                    f"signature {key!r} not in {path}; has {sorted(meta_graph.signature_def)}"
                )
            meta_graph.signature_def[key].method_name = method
    fileio.write_bytes(path, saved_model.SerializeToString(deterministic=True))
    fingerprint = fileio.join(export_dir, "fingerprint.pb")
    try:  # private TF API; the fingerprint is optional, a stale one is not
        from tensorflow.python.saved_model import fingerprinting_utils

        fileio.remove(fingerprint)
        fingerprinting_utils.write_fingerprint(export_dir)
    except Exception as e:
        logger.warning("could not rewrite %s (%s); removed it", fingerprint, e)
        fileio.remove(fingerprint)


def newest_complete_version(model_dir: str) -> int | None:
    """The largest integer version under `model_dir` that is complete, or None.

    The rule `serving.models.model_manager` serves by: a version holds `saved_model.pb`; on a file
    system without an atomic directory rename (object stores, `ram://`) a version of ours (with
    assets/export_config.json) also needs `fileio.COMPLETE_MARKER`, written last by
    `fileio.publish_dir` (without it, it is still being copied).
    """
    model_dir = str(model_dir)
    atomic = fileio.scheme(model_dir) in fileio.ATOMIC_RENAME_SCHEMES
    for version in reversed(existing_versions(model_dir)):
        version_dir = fileio.join(model_dir, str(version))
        if not fileio.isfile(fileio.join(version_dir, "saved_model.pb")):
            continue
        ours = fileio.exists(fileio.join(version_dir, "assets", "export_config.json"))
        if atomic or not ours or fileio.is_complete(version_dir):
            return version
    return None
