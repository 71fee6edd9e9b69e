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

Local paths in a process that has not imported TensorFlow (the model server serving LiteRT
versions only, the serving client) are read and written through Python's `os` instead
(`_PosixFiles`, the same operations with the same results), so that opening a local file does not
load TensorFlow's runtime (about 670 MB resident); every URI, and every path once TensorFlow is
imported, goes through `tf.io.gfile`. Errors: a missing path raises FileNotFoundError from
`read_bytes` everywhere; other operations raise what `file_errors()` names (OSError, and
`tf.errors.OpError` where TensorFlow is loaded).

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
import stat as stat_module
import sys
import tempfile
import types
import uuid
from typing import Any, Iterator

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


class _PosixFiles:
    """The operations of `tf.io.gfile` this module uses, on local paths through Python's `os`, for
    processes without TensorFlow (module docstring); same arguments, same results."""

    @staticmethod
    def GFile(path, mode):
        if "b" in mode:
            return open(path, mode)
        return open(path, mode, encoding="utf-8", newline="")  # as GFile: no newline translation

    exists = staticmethod(os.path.exists)
    isdir = staticmethod(os.path.isdir)
    listdir = staticmethod(os.listdir)
    walk = staticmethod(os.walk)
    remove = staticmethod(os.remove)
    rmtree = staticmethod(shutil.rmtree)

    @staticmethod
    def glob(pattern):
        import glob

        return glob.glob(pattern, include_hidden=True)

    @staticmethod
    def makedirs(path):
        os.makedirs(path, exist_ok=True)

    @staticmethod
    def _check_target(dst, overwrite):
        if not overwrite and os.path.exists(dst):
            raise FileExistsError(errno.EEXIST, "File exists", dst)

    @classmethod
    def rename(cls, src, dst, overwrite=False):
        cls._check_target(dst, overwrite)
        os.replace(src, dst)

    @classmethod
    def copy(cls, src, dst, overwrite=False):
        cls._check_target(dst, overwrite)
        shutil.copyfile(src, dst)

    @staticmethod
    def stat(path):
        st = os.stat(path)
        return types.SimpleNamespace(
            length=st.st_size,
            mtime_nsec=st.st_mtime_ns,
            is_directory=stat_module.S_ISDIR(st.st_mode),
        )


def _tensorflow():
    """The `tensorflow` module if this process has imported it, else None (never imports it)."""
    return sys.modules.get("tensorflow")


def _files(path: str):
    """`tf.io.gfile` for a URI or once TensorFlow is imported; `_PosixFiles` otherwise."""
    if _tensorflow() is None and scheme(path) == "":
        return _PosixFiles
    import tensorflow as tf

    return tf.io.gfile


def file_errors() -> tuple:
    """The exception types a file operation here may raise: OSError, and `tf.errors.OpError`
    where TensorFlow is loaded (`except fileio.file_errors():`)."""
    tf = _tensorflow()
    return (OSError,) if tf is None else (OSError, tf.errors.OpError)


def not_found_errors() -> tuple:
    """FileNotFoundError, and `tf.errors.NotFoundError` where TensorFlow is loaded."""
    tf = _tensorflow()
    return (FileNotFoundError,) if tf is None else (FileNotFoundError, tf.errors.NotFoundError)


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
    path = os.fspath(path)
    return _files(path).GFile(path, mode)


def exists(path: str) -> bool:
    path = os.fspath(path)
    return _files(path).exists(path)


def isdir(path: str) -> bool:
    path = os.fspath(path)
    return _files(path).isdir(path)


def isfile(path: str) -> bool:
    path = os.fspath(path)
    files = _files(path)
    return files.exists(path) and not files.isdir(path)


def listdir(path: str) -> list[str]:
    """Names in a directory, sorted, without trailing slashes (object stores add them)."""
    path = os.fspath(path)
    names = sorted(name.rstrip("/") for name in _files(path).listdir(path))
    return _real_children(path, names)


def _real_children(path: str, names: list[str]) -> list[str]:
    """`names` without the phantoms of TensorFlow's `ram://` file system, which lists children by
    string prefix: `ram://d/assets` "holds" `.extra` when `ram://d/assets.extra/x` exists."""
    if scheme(path) != "ram":
        return names
    return [name for name in names if exists(posixpath.join(path, name))]


def glob(pattern: str) -> list[str]:
    """Paths matching a glob (`*`, `?`, `[...]`), sorted."""
    pattern = os.fspath(pattern)
    return sorted(_files(pattern).glob(pattern))


def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """(directory, sub-directory names, file names) for `top` and each directory below it."""
    top = os.fspath(top)
    for root, dirs, files in _files(top).walk(top):
        yield root, dirs, _real_children(root, files)


def makedirs(path: str) -> None:
    path = os.fspath(path)
    _files(path).makedirs(path)


def remove(path: str) -> None:
    """Deletes a file; a missing one is not an error."""
    path = os.fspath(path)
    try:
        _files(path).remove(path)
    except not_found_errors():
        pass


def rmtree(path: str) -> None:
    """Deletes a directory tree; a missing one is not an error."""
    path = os.fspath(path)
    if not exists(path):
        return
    try:
        _files(path).rmtree(path)
    except not_found_errors():
        if exists(path):  # `ram://` fails on its phantom children once all is gone
            raise


def rename(src: str, dst: str, overwrite: bool = False) -> None:
    src, dst = os.fspath(src), os.fspath(dst)
    _files(src if scheme(src) else dst).rename(src, dst, overwrite=overwrite)


def copy(src: str, dst: str, overwrite: bool = False) -> None:
    src, dst = os.fspath(src), os.fspath(dst)
    _files(src if scheme(src) else dst).copy(src, dst, overwrite=overwrite)


def size(path: str) -> int:
    return stat(path).length


def stat(path: str):
    """`length` (bytes), `mtime_nsec` and `is_directory` of a path (tf.io.gfile's FileStatistics).

    Raises:
        FileNotFoundError, or tf.errors.NotFoundError where TensorFlow is loaded: no such path.
    """
    path = os.fspath(path)
    return _files(path).stat(path)


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
    except not_found_errors():
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
    probe = pool.submit(exists, path)
    try:
        probe.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise UnreachablePathError(
            f"cannot reach {what} {path}: no answer from its file system in {timeout:g} s"
        ) from None
    except file_errors() as e:
        cause = getattr(e, "message", None) or str(e)
        raise UnreachablePathError(
            f"cannot reach {what} {path}: {' '.join(cause.split())[:300]}"
        ) from None
    finally:
        pool.shutdown(wait=False)
