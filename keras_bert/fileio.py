"""File access for every path a user gives: any URI `tf.io.gfile` handles.

Data, outputs, checkpoints, vocabularies, exports, reports, the server's base paths: a user may
give a local path or a URI (`gs://`, `hdfs://`, `s3://` with its plugin, TensorFlow's in-memory
`ram://`). This module is the one place that touches them; the rest of the project calls it
instead of `open()`, `os.path`, `os` or `pathlib` on a user's path (a test greps for those).

Paths stay strings as the user typed them: `pathlib` folds the `//` of a URI (`gs://b/x` becomes
`gs:/b/x`), so `join` and `parent` keep a URI's scheme and bucket intact.

Nothing is visible under its final name until it is complete:
- A file (`write_text`, `write_bytes`, `write_json`) is written whole under a temporary name in
  the same directory, then renamed: atomic on a local disk and on HDFS. On an object store
  (`gs://`, `s3://`) an object becomes visible only when its upload is complete, and a rename is
  a copy; there the file is written in place.
- A directory (an export, a model) is built under a temporary name and published with
  `publish_dir`: one rename on a local disk or HDFS; elsewhere a copy in which
  `PUBLISH_LAST` files come last and the `COMPLETE_MARKER` file last of all, so a reader that
  waits for the marker (`is_complete`) never takes a half-copied directory.

Schemes: this TensorFlow build (2.20, pip) registers `gs://` and `ram://`; `s3://`, `hdfs://`
and others answer "File system scheme ... not implemented" until a plugin registers them
(`pip install tensorflow-io`, then `import tensorflow_io` before use).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import json
import os
import posixpath
import shutil
import tempfile
import uuid
from typing import Any, Iterator

import tensorflow as tf

# Written last into a published directory; its presence means the directory is complete.
COMPLETE_MARKER = ".keras_bert_complete"
# Copied after every other file of a directory published on an object store (TF Serving takes a
# version whose saved_model.pb it can read).
PUBLISH_LAST = ("saved_model.pb",)
# Object stores: an object appears whole when its upload completes; a rename is a copy.
OBJECT_STORE_SCHEMES = ("gs", "s3")
# File systems whose directory rename is one atomic step (elsewhere, `ram://` included, a
# directory is published by copying its files).
ATOMIC_RENAME_SCHEMES = ("", "file", "hdfs")
# How long `check_reachable` waits for a remote file system before it gives up (seconds).
REACH_TIMEOUT_SECONDS = 60.0


class UnreachablePathError(FileNotFoundError):
    """A user path whose file system cannot be reached (or does not exist): the message names the
    URI as typed and the cause in one line."""


def scheme(path: str) -> str:
    """ "gs" for gs://bucket/x, "" for a local path."""
    path = str(path)
    return path.split("://", 1)[0].lower() if "://" in path else ""


def is_local(path: str) -> bool:
    return scheme(path) in ("", "file")


def is_object_store(path: str) -> bool:
    return scheme(path) in OBJECT_STORE_SCHEMES


def join(base: str, *parts: str) -> str:
    """`os.path.join` for local paths; `/`-joined for URIs, keeping `scheme://authority` intact."""
    base = os.fspath(base)
    if is_local(base):
        return os.path.join(base, *parts)
    return posixpath.join(base, *parts)


def parent(path: str) -> str:
    """The directory holding `path` ("gs://b/run" for "gs://b/run/config.json")."""
    path = os.fspath(path)
    if is_local(path):
        return os.path.dirname(path)
    head, rest = path.split("://", 1)
    return f"{head}://{posixpath.dirname(rest.rstrip('/'))}"


def basename(path: str) -> str:
    path = os.fspath(path)
    return os.path.basename(path) if is_local(path) else posixpath.basename(path.rstrip("/"))


def open_file(path: str, mode: str = "r"):
    """A file object (`tf.io.gfile.GFile`) for reading or writing; text unless `mode` has "b"."""
    return tf.io.gfile.GFile(os.fspath(path), mode)


def exists(path: str) -> bool:
    return tf.io.gfile.exists(os.fspath(path))


def isdir(path: str) -> bool:
    return tf.io.gfile.isdir(os.fspath(path))


def isfile(path: str) -> bool:
    path = os.fspath(path)
    return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)


def listdir(path: str) -> list[str]:
    """Names in a directory, sorted, without trailing slashes (object stores add them)."""
    path = os.fspath(path)
    names = sorted(name.rstrip("/") for name in tf.io.gfile.listdir(path))
    return _real_children(path, names)


def _real_children(path: str, names: list[str]) -> list[str]:
    """`names` without the phantoms of TensorFlow's `ram://` file system, which lists children by
    string prefix: `ram://d/assets` "holds" `.extra` when `ram://d/assets.extra/x` exists."""
    if scheme(path) != "ram":
        return names
    return [name for name in names if tf.io.gfile.exists(posixpath.join(path, name))]


def glob(pattern: str) -> list[str]:
    """Paths matching a glob (`*`, `?`, `[...]`), sorted."""
    return sorted(tf.io.gfile.glob(os.fspath(pattern)))


def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """(directory, sub-directory names, file names) for `top` and each directory below it."""
    for root, dirs, files in tf.io.gfile.walk(os.fspath(top)):
        yield root, dirs, _real_children(root, files)


def makedirs(path: str) -> None:
    tf.io.gfile.makedirs(os.fspath(path))


def remove(path: str) -> None:
    """Deletes a file; a missing one is not an error."""
    try:
        tf.io.gfile.remove(os.fspath(path))
    except tf.errors.NotFoundError:
        pass


def rmtree(path: str) -> None:
    """Deletes a directory tree; a missing one is not an error."""
    path = os.fspath(path)
    if not tf.io.gfile.exists(path):
        return
    try:
        tf.io.gfile.rmtree(path)
    except tf.errors.NotFoundError:
        if tf.io.gfile.exists(path):  # `ram://` fails on its phantom children once all is gone
            raise


def rename(src: str, dst: str, overwrite: bool = False) -> None:
    tf.io.gfile.rename(os.fspath(src), os.fspath(dst), overwrite=overwrite)


def copy(src: str, dst: str, overwrite: bool = False) -> None:
    tf.io.gfile.copy(os.fspath(src), os.fspath(dst), overwrite=overwrite)


def size(path: str) -> int:
    return tf.io.gfile.stat(os.fspath(path)).length


def stat(path: str):
    """`length` (bytes), `mtime_nsec` and `is_directory` of a path (tf.io.gfile's FileStatistics).

    Raises:
        tf.errors.NotFoundError: no such path.
    """
    return tf.io.gfile.stat(os.fspath(path))


def absolute(path: str) -> str:
    """A local path made absolute (against the working directory); a URI as typed."""
    path = os.fspath(path)
    return os.path.abspath(path) if scheme(path) == "" else path


@contextlib.contextmanager
def local_temp_dir(prefix: str = "keras_bert_") -> Iterator[str]:
    """A private local scratch directory, deleted on exit: for a tool that only writes local files
    (the LiteRT converter), whose result is then copied to the user's path."""
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def read_bytes(path: str) -> bytes:
    """The whole file.

    Raises:
        FileNotFoundError: no such file (naming it as typed), on every file system.
    """
    try:
        with open_file(path, "rb") as f:
            return f.read()
    except tf.errors.NotFoundError:
        raise FileNotFoundError(errno.ENOENT, "No such file", os.fspath(path)) from None


def read_text(path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
    """The whole file decoded (`encoding="utf-8-sig"` drops a BOM); no newline translation.

    Raises:
        FileNotFoundError: as `read_bytes`.
    """
    return read_bytes(path).decode(encoding, errors)


def read_json(path: str) -> Any:
    return json.loads(read_text(path))


def _temporary_name(path: str) -> str:
    return join(parent(path), f".{basename(path)}.tmp-{uuid.uuid4().hex[:8]}")


def write_bytes(path: str, data: bytes) -> None:
    """Writes `data` so that `path` holds either its old content or all of `data`, never part.

    Local: a temporary file beside it, flushed to disk (fsync), then `os.replace`. An object store:
    the upload (an object is visible only when whole). Other URIs: a temporary name, then rename.
    """
    path = os.fspath(path)
    if is_object_store(path):
        with open_file(path, "wb") as f:
            f.write(data)
        return
    tmp = _temporary_name(path)
    if is_local(path):
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return
    with open_file(tmp, "wb") as f:
        f.write(data)
    rename(tmp, path, overwrite=True)


@contextlib.contextmanager
def writing_local_file(path: str, suffix: str = "") -> Iterator[str]:
    """Yields a local file name for a writer that only takes local files (h5py, `model.save`);
    on leaving the block, that file becomes `path` (any URI) whole-or-nothing.

    A plain local `path`: the file (named with `suffix`, for writers that check it) is written in
    a hidden temporary directory beside it, flushed to disk, then renamed: nothing is copied. Any
    other URI: written in a private local directory, then `write_bytes(path, ...)`. On an error
    the partial file is removed and `path` keeps its old content.
    """
    path = os.fspath(path)
    if scheme(path) != "":
        with local_temp_dir(prefix="keras_bert_write_") as local_dir:
            local = join(local_dir, "file" + suffix)
            yield local
            write_bytes(path, read_bytes(local))
        return
    tmp_dir = _temporary_name(path)  # a hidden directory: no glob of the target's kind sees it
    os.makedirs(tmp_dir)
    tmp = os.path.join(tmp_dir, "file" + suffix)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def writing_path(path: str) -> str:
    """Where a streamed writer (`tf.io.TFRecordWriter`, h5py on a local copy) writes the file
    that `commit_write` then moves to `path`: a hidden temporary name beside it, or `path`
    itself on an object store (an object is visible only when its upload is complete)."""
    path = os.fspath(path)
    return path if is_object_store(path) else _temporary_name(path)


def commit_write(written: str, path: str) -> None:
    """Publishes a file written at `writing_path(path)` under `path` (replacing an old one)."""
    written, path = os.fspath(written), os.fspath(path)
    if written != path:
        rename(written, path, overwrite=True)


def copy_tree(src: str, dst: str) -> list[str]:
    """Copies every file under directory `src` into `dst` (created; files there replaced), for a
    tool that reads or writes only local directories (a keras-hub preset) and a URI on the other
    side. Each file is copied whole; the directory is not published atomically (`publish_dir`).

    Returns:
        the copied files' paths relative to `src`, sorted.
    """
    src, dst = os.fspath(src), os.fspath(dst)
    copied = []
    for root, _, names in walk(src):
        rel_root = root[len(src) :].strip("/")
        for name in names:
            rel = posixpath.join(rel_root, name) if rel_root else name
            makedirs(parent(join(dst, rel)))
            copy(join(src, rel), join(dst, rel), overwrite=True)
            copied.append(rel)
    return sorted(copied)


def write_text(path: str, text: str) -> None:
    """`write_bytes` of UTF-8 text."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str, obj: Any, indent: int | None = 2) -> None:
    """`write_text` of `obj` as JSON (keys sorted), ending with a newline."""
    write_text(path, json.dumps(obj, indent=indent, sort_keys=True) + "\n")


def is_complete(directory: str) -> bool:
    """Whether a directory was published whole: it holds `COMPLETE_MARKER`."""
    return exists(join(directory, COMPLETE_MARKER))


def staging_dir(final: str) -> str:
    """A new temporary directory beside `final` to build it in (hidden; not a version number, so
    TF Serving and our server ignore it), for `publish_dir`."""
    tmp = join(parent(final), f".{basename(final)}.tmp-{uuid.uuid4().hex[:8]}")
    makedirs(tmp)
    return tmp


def publish_dir(staged: str, final: str) -> None:
    """Moves a complete directory `staged` to `final` (which must not exist), marking it complete.

    Local disk and HDFS: `COMPLETE_MARKER` is written into `staged`, then one rename. Elsewhere
    (object stores, `ram://`): every file copied to `final`, `PUBLISH_LAST` files after the rest and the marker last,
    then `staged` deleted; a reader that requires the marker never sees a partial directory.

    Raises:
        FileExistsError: `final` exists.
    """
    staged, final = os.fspath(staged), os.fspath(final)
    if exists(final):
        raise FileExistsError(f"{final} exists; not overwriting it")
    if scheme(final) in ATOMIC_RENAME_SCHEMES:
        write_bytes(join(staged, COMPLETE_MARKER), b"")
        rename(staged, final)
        return
    files = []
    for root, _, names in walk(staged):
        rel_root = root[len(staged) :].lstrip("/")
        files += [posixpath.join(rel_root, n) if rel_root else n for n in names]
    files.sort(key=lambda rel: (basename(rel) in PUBLISH_LAST, rel))
    for rel in files:
        target = join(final, rel)
        makedirs(parent(target))
        copy(join(staged, rel), target, overwrite=True)
    write_bytes(join(final, COMPLETE_MARKER), b"")
    rmtree(staged)


def check_reachable(path: str, what: str = "path", timeout: float = REACH_TIMEOUT_SECONDS) -> None:
    """Fails fast when the file system of a remote `path` cannot be reached.

    Asks for the path's existence (or, for a path still to be written, its parent's) in a
    worker thread and waits at most `timeout` seconds: a remote file system that retries for
    minutes (no network, no credentials) ends here with one line. Local paths are not probed.

    Raises:
        UnreachablePathError: "cannot reach <what> gs://b/x: <cause>" (the URI as typed).
    """
    path = os.fspath(path)
    if is_local(path):
        return
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    probe = pool.submit(tf.io.gfile.exists, path)
    try:
        probe.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise UnreachablePathError(
            f"cannot reach {what} {path}: no answer from its file system in {timeout:g} s"
        ) from None
    except (tf.errors.OpError, OSError) as e:
        cause = getattr(e, "message", None) or str(e)
        raise UnreachablePathError(
            f"cannot reach {what} {path}: {' '.join(cause.split())[:300]}"
        ) from None
    finally:
        pool.shutdown(wait=False)
