"""Provenance of an evidence pack: which data, which model, which software, which command.

The model fingerprint (`model_fingerprint`) identifies the weights and graph a report measured, so
a release gate's blessing can be tied to one model (`release_gate.check_blessing`):

- a saved task (`.keras` file, or a fine-tuning output_dir's `best_model.keras`): SHA-256 of the
  file's bytes;
- a SavedModel version directory: SHA-256 over `saved_model.pb` and every file under `variables/`,
  in sorted relative-path order, each fed as its path, a NUL byte, its size in 8 little-endian
  bytes and its bytes (so renaming or moving a byte between files changes it). Assets are left
  out: they describe the model (labels, vocabulary) and are checked by the export itself.

Written as "sha256:<64 hex>" with the kind ("saved task" or "SavedModel").
"""

from __future__ import annotations

import collections
import hashlib
import importlib.metadata
import platform
import shlex

from keras_bert import fileio

CHUNK = 1 << 20
VERSIONS = ("tensorflow", "keras", "numpy", "scipy", "scikit-learn", "cleanlab", "matplotlib")
TASK_FILE = "best_model.keras"


def _feed(digest, path: str) -> None:
    with fileio.open_file(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)


def file_sha256(path: str) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    _feed(digest, path)
    return digest.hexdigest()


def _saved_model_files(version_dir: str) -> list[str]:
    """saved_model.pb and every file under variables/, as sorted paths relative to the dir."""
    files = ["saved_model.pb"]
    variables = fileio.join(version_dir, "variables")
    if fileio.isdir(variables):
        for top, _, names in fileio.walk(variables):
            rel = top[len(version_dir) :].strip("/")
            files += [f"{rel}/{n}" for n in names]
    return sorted(files)


def model_fingerprint(path) -> dict:
    """{"fingerprint": "sha256:<hex>", "kind": "saved task" | "SavedModel"} of a model path.

    Raises:
        FileNotFoundError: `path` is neither a `.keras` file, a directory holding best_model.keras,
            nor a SavedModel directory.
    """
    path = str(path).rstrip("/")
    if fileio.isfile(fileio.join(path, "saved_model.pb")):
        digest = hashlib.sha256()
        for rel in _saved_model_files(path):
            full = fileio.join(path, rel)
            digest.update(rel.encode() + b"\0" + fileio.size(full).to_bytes(8, "little"))
            _feed(digest, full)
        return {"fingerprint": f"sha256:{digest.hexdigest()}", "kind": "SavedModel"}
    task_file = fileio.join(path, TASK_FILE) if fileio.isdir(path) else path
    if not fileio.isfile(task_file):
        raise FileNotFoundError(
            f"{path}: no model to fingerprint (neither a .keras file, a directory with "
            f"{TASK_FILE}, nor a SavedModel directory)"
        )
    return {"fingerprint": f"sha256:{file_sha256(task_file)}", "kind": "saved task"}


def library_versions() -> dict:
    """Installed version of Python and of each library in VERSIONS ("not installed" if absent)."""
    out = {"python": platform.python_version()}
    for name in VERSIONS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def data_provenance(path: str, rows: int, gold_names=None) -> dict:
    """{"file", "sha256", "rows", "label_distribution": label -> rows (None for regression)}."""
    counts = None
    if gold_names is not None:
        counts = dict(sorted(collections.Counter(str(g) for g in gold_names).items()))
    return {
        "file": path,
        "sha256": file_sha256(path),
        "rows": int(rows),
        "label_distribution": counts,
    }


def pack_provenance(data, models: dict, argv) -> dict:
    """The "provenance" of a pack.

    Args:
        data: `evidence_pack.EvalData`.
        models: key ("model", "compare") -> model path as given.
        argv: the command line (list of str).

    Returns:
        {"data": `data_provenance`, "models": key -> {"path", "fingerprint", "kind"},
        "versions": `library_versions`, "command": the command line, shell-quoted}.
    """
    return {
        "data": data_provenance(data.path, len(data.examples), data.gold_names),
        "models": {k: {"path": str(p)} | model_fingerprint(p) for k, p in models.items()},
        "versions": library_versions(),
        "command": shlex.join(str(a) for a in argv),
    }
