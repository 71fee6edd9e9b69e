"""Versioned SavedModel layout for TensorFlow Serving (SPEC section 7).

`EXPORT_BASE/<model_name>/<version>/` with positive integer versions, as
`tensorflow_model_server --model_base_path=EXPORT_BASE/<model_name>` polls them. A version is
written under a hidden temporary name and renamed into place with one `os.rename` (atomic on a
POSIX file system), so a crash never leaves a half-written version; an existing version is never
overwritten (`FileExistsError`).
"""

from __future__ import annotations

import logging
import os
import pathlib

from tensorflow.core.protobuf import saved_model_pb2

logger = logging.getLogger(__name__)


def existing_versions(model_dir: str | os.PathLike) -> list[int]:
    """Integer version directories under `model_dir`, ascending (other names are ignored)."""
    path = pathlib.Path(model_dir)
    if not path.is_dir():
        return []
    return sorted(
        int(p.name) for p in path.iterdir() if p.is_dir() and p.name.isdigit() and int(p.name) > 0
    )


def next_version(model_dir: str | os.PathLike) -> int:
    """1 + the largest existing integer version under `model_dir` (1 when there is none)."""
    versions = existing_versions(model_dir)
    return versions[-1] + 1 if versions else 1


def publish(tmp_dir: str | os.PathLike, model_dir: str | os.PathLike, version: int) -> pathlib.Path:
    """Atomically renames a complete export `tmp_dir` to `model_dir/<version>`.

    Raises:
        FileExistsError: if `model_dir/<version>` exists (it is left untouched).
    """
    target = pathlib.Path(model_dir) / str(int(version))
    if target.exists():
        raise FileExistsError(
            f"version {version} already exists at {target}; exported versions are never overwritten"
        )
    try:
        os.rename(tmp_dir, target)  # fails on an existing non-empty dir (a racing writer)
    except OSError as e:
        if target.exists():
            raise FileExistsError(f"version {version} appeared at {target} while exporting") from e
        raise
    return target


def set_method_names(export_dir: str | os.PathLike, method_names: dict) -> None:
    """Rewrites `signature_def[key].method_name` in `export_dir/saved_model.pb`.

    TF2's `tf.saved_model.save` writes `tensorflow/serving/predict` for every signature; the
    Classify and Regress APIs of TensorFlow Serving need `tensorflow/serving/classify` /
    `tensorflow/serving/regress`. Also rewrites `fingerprint.pb`, whose checksum covers
    saved_model.pb.

    Raises:
        KeyError: naming a signature key that is not in the SavedModel.
    """
    path = pathlib.Path(export_dir) / "saved_model.pb"
    saved_model = saved_model_pb2.SavedModel.FromString(path.read_bytes())
    for meta_graph in saved_model.meta_graphs:
        for key, method in method_names.items():
            if key not in meta_graph.signature_def:
                raise KeyError(
                    f"signature {key!r} not in {path}; has {sorted(meta_graph.signature_def)}"
                )
            meta_graph.signature_def[key].method_name = method
    path.write_bytes(saved_model.SerializeToString(deterministic=True))
    fingerprint = pathlib.Path(export_dir) / "fingerprint.pb"
    try:  # private TF API; the fingerprint is optional, a stale one is not
        from tensorflow.python.saved_model import fingerprinting_utils

        fingerprint.unlink(missing_ok=True)
        fingerprinting_utils.write_fingerprint(str(export_dir))
    except Exception as e:
        logger.warning("could not rewrite %s (%s); removed it", fingerprint, e)
        fingerprint.unlink(missing_ok=True)
