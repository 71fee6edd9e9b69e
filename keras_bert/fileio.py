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

Files a user gives (data, vocabularies, label and template files, gates, configs) are read by one
rule: `read_user_text` decodes UTF-8 and drops a leading byte-order mark (Excel and Notepad write
one), so every reader gives the same result with and without it; bytes that are not UTF-8 are a
`UserFileError` (a ValueError, one line naming the file, the byte offset and the line), except in
batch prediction, which refuses such a row alone. Line-oriented files (JSON Lines, one text per
line, vocab.txt) split at "\n" only (`text_lines`; "\r\n" accepted), never at the other line
breaks of `str.splitlines()`, which JSON allows raw inside strings; JSON Lines are read by
`jsonl_lines` / `read_jsonl` and written by `jsonl_line` / `write_jsonl`. JSON is parsed by
`parse_json` (at most `MAX_JSON_DEPTH` levels), CSV / TSV by `csv_records` (fields of any length).

Schemes: this TensorFlow build (2.20, pip) registers `gs://` and `ram://`; `s3://`, `hdfs://`
and others answer "File system scheme ... not implemented" until a plugin registers them
(`pip install tensorflow-io`, then `import tensorflow_io` before use).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import csv
import errno
import io
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
    """A JSON file (a config, a labels file, a record): `parse_json` of `read_user_text`.

    Raises:
        FileNotFoundError: as `read_bytes`.
        UserFileError: not UTF-8, not JSON, or nested deeper than `MAX_JSON_DEPTH` (naming it).
    """
    path = os.fspath(path)
    return parse_json(read_user_text(path), path)


def _temporary_name(path: str) -> str:
    return join(parent(path), f".{basename(path)}.tmp-{uuid.uuid4().hex[:8]}")


def write_bytes(path: str, data: bytes) -> None:
    """Writes `data` so that `path` holds either its old content or all of `data`, never part.

    Local: a temporary file beside it, flushed to disk (fsync), then `os.replace`. An object store:
    the upload (an object is visible only when whole). Other URIs: a temporary name, then rename.
    A write that fails (a full disk) removes its temporary file before the error goes on, naming
    `path` when the system's error names no file.
    """
    path = os.fspath(path)
    if is_object_store(path):
        with open_file(path, "wb") as f:
            f.write(data)
        return
    tmp = _temporary_name(path)
    try:
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
    except BaseException as e:
        remove(tmp)
        if isinstance(e, OSError) and e.errno and e.filename is None:  # "File too large": which?
            raise OSError(e.errno, f"{e.strerror}: writing {path}") from None
        raise


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
    """`write_text` of `obj` as JSON (keys sorted), ending with a newline: `path` holds the old
    JSON or all of the new, never part."""
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


# Files a user gives: one decoding rule, one line rule, one JSON Lines form (module docstring).

BYTE_ORDER_MARK = b"\xef\xbb\xbf"
# Deepest nesting of arrays and objects a JSON file or line may have. Our formats nest at most
# about 10 levels (SQuAD: 9); Python's parser, and the pickling and printing of what it returns,
# stop at the interpreter's recursion limit (about 1,000 levels) with a RecursionError instead.
MAX_JSON_DEPTH = 100


class UserFileError(ValueError):
    """A file a user gave that cannot be read as its format says: bytes that are not UTF-8, a line
    that is not JSON, JSON nested too deep, a CSV record the csv module refuses. One line:
    "<where>: <problem>", where names the file (and line) as typed.

    Attributes:
        where: str, the file (`path`, or `path:line`).
        problem: str, what is wrong, without `where` (a batch prediction's row reason).
    """

    def __init__(self, where: str, problem: str):
        super().__init__(f"{where}: {problem}")
        self.where, self.problem = where, problem


def decode_user_text(data: bytes, where: str, errors: str = "strict") -> str:
    """The one decoding rule for a file a user gives: UTF-8, one leading byte-order mark (which
    Excel and Notepad write) dropped, so a file reads the same with and without it.

    Args:
        data: the file's bytes.
        where: the file as the user typed it, for the error message.
        errors: "strict" (a whole file: bytes that are not UTF-8 are an error) or
            "surrogateescape" (a reader that refuses row by row, batch prediction: each bad byte
            becomes U+DC80..U+DCFF, for the row holding it to be refused).

    Raises:
        UserFileError: "<where>: not UTF-8 text: byte 0xff at byte offset 1234 (line 5) ...".
    """
    body = data[len(BYTE_ORDER_MARK) :] if data.startswith(BYTE_ORDER_MARK) else data
    try:
        return body.decode("utf-8", errors)
    except UnicodeDecodeError as e:
        offset = e.start + len(data) - len(body)
        line = data.count(b"\n", 0, offset) + 1
        raise UserFileError(
            where,
            f"not UTF-8 text: byte 0x{data[offset]:02x} at byte offset {offset} (line {line}) "
            f"({e.reason}); save the file as UTF-8",
        ) from None


def read_user_text(path: str) -> str:
    """A file a user gave (data, vocabulary, labels, templates, gate, config) as text, by
    `decode_user_text`'s rule; no newline translation.

    Raises:
        FileNotFoundError: as `read_bytes`.
        UserFileError: bytes that are not UTF-8, naming the file, the byte offset and the line.
    """
    path = os.fspath(path)
    return decode_user_text(read_bytes(path), path)


def text_lines(text: str, where: str | None = None) -> list[str]:
    """The lines of a line-oriented file (JSON Lines, one text per line, vocab.txt, a corpus):
    split at "\\n" only, a "\\r" before it dropped (Windows line ends); text after the last "\\n" is
    a last line, an empty one is not.

    With `where` (the file as typed), a file whose lines end in "\\r" alone (old Mac line ends:
    no "\\n" anywhere, a "\\r" inside) is refused, where it would read as one line (a GLUE file
    as its header alone, a CoNLL file as one token).

    Raises:
        UserFileError: with `where`, lines ended by "\\r" alone.

    Never `str.splitlines()`: it also splits at U+2028, U+2029, U+0085, \\v, \\f and \\x1c-\\x1e,
    which JSON allows raw inside a string and which our writers write raw (`jsonl_line`).
    """
    if where is not None and "\n" not in text and "\r" in text.rstrip("\r"):
        raise UserFileError(
            where,
            'its lines end in "\\r" alone (old Mac line ends): save it with "\\n" or "\\r\\n" '
            "line ends",
        )
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in a parsed JSON value (0 for a scalar), counted
    without recursion."""
    deepest, stack = 0, [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def parse_json(text: str, where: str) -> Any:
    """A user's JSON text (a file, or one line of a JSON Lines file) as Python values.

    Raises:
        UserFileError: "<where>: not JSON: <the parser's message>", or "<where>: not JSON:
            arrays or objects nested deeper than MAX_JSON_DEPTH levels".
    """
    too_deep = f"not JSON: arrays or objects nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        value = json.loads(text)
    except RecursionError:
        raise UserFileError(where, too_deep) from None
    except json.JSONDecodeError as e:
        raise UserFileError(where, f"not JSON: {e}") from None
    # Counting brackets bounds the depth from above: most texts need no walk.
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and json_depth(value) > MAX_JSON_DEPTH:
        raise UserFileError(where, too_deep)
    return value


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number from 1, line) of each non-blank line of JSON Lines text (`text_lines`)."""
    for number, line in enumerate(text_lines(text), 1):
        if line.strip():
            yield number, line


def parse_jsonl(text: str, where: str) -> list:
    """Every value of JSON Lines text (one JSON value per line; blank lines skipped).

    Raises:
        UserFileError: a line that is not JSON ("<where>:<line>: not JSON: ...").
    """
    return [parse_json(line, f"{where}:{n}") for n, line in jsonl_lines(text)]


def read_jsonl(path: str) -> list:
    """`parse_jsonl` of a JSON Lines file.

    Raises:
        FileNotFoundError: as `read_bytes`.
        UserFileError: not UTF-8, or a line that is not JSON ("<path>:<line>: not JSON: ...").
    """
    path = os.fspath(path)
    return parse_jsonl(read_user_text(path), path)


def jsonl_line(value: Any) -> str:
    """One line of a JSON Lines file, without its "\\n": `value` as compact JSON, non-ASCII text
    raw (U+2028 included: readers split at "\\n" only), a lone surrogate (which UTF-8 cannot
    encode) as its `\\\\udXXX` escape."""
    line = json.dumps(value, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return line


def jsonl_text(values) -> str:
    """The text of a JSON Lines file holding `values`: `jsonl_line` of each, each ending in "\\n"."""
    return "".join(jsonl_line(value) + "\n" for value in values)


def write_jsonl(path: str, values) -> None:
    """`write_text` of `jsonl_text(values)`: the file appears whole or not at all."""
    write_text(path, jsonl_text(values))


def _csv_field_limit(text: str) -> None:
    """Lets the csv module read any field of `text`: no field is longer than the text holding it
    (the module refuses fields over 131,072 characters by default; the limit is process-wide and
    only ever raised here)."""
    if len(text) >= csv.field_size_limit():
        csv.field_size_limit(len(text) + 1)


def csv_records(
    text: str, where: str, delimiter: str = ","
) -> tuple[list[str], Iterator[tuple[int, dict]]]:
    """The header and records of CSV / TSV text with a header row (RFC 4180 quoting; any field
    length).

    Args:
        text: the file's text (`read_user_text`).
        where: the file as typed, for errors.
        delimiter: "," or "\\t".

    Returns:
        (column names, [] for an empty file; an iterator of (line number where the record ends,
        `csv.DictReader` row: fields past the header under the key None, missing ones None)).

    Raises (from the iterator):
        UserFileError: a record the csv module refuses, "<where>:<line>: not CSV: ...".
    """
    _csv_field_limit(text)
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = list(reader.fieldnames or [])
    except csv.Error as e:
        raise UserFileError(f"{where}:1", f"not CSV: {e}") from None
    _check_unique_columns(header, where)

    def records():
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise UserFileError(f"{where}:{reader.line_num}", f"not CSV: {e}") from None
            yield reader.line_num, row

    return header, records()


def _check_unique_columns(header: list[str], where: str) -> None:
    """Refuses a header that names a column twice: `csv.DictReader` would keep the last column
    of the name, silently (pandas #14704: "text,label,text" read its second text)."""
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise UserFileError(
            f"{where}:1",
            f"the header names column(s) {twice} more than once: rename all but one",
        )


def csv_header(path: str, delimiter: str = ",") -> list[str]:
    """The header row of a CSV / TSV file exactly as `csv_records` reads it from the whole file
    (undecodable bytes kept as U+DC80..U+DCFF), reading only as much of the file as the header
    spans: a check before a long run need not read a large file. Not `GFile.readline`, which drops
    every "\\r" byte inside the line it returns.

    Raises:
        UserFileError: a header the csv module refuses, "<path>:1: not CSV: ...".
    """
    data, size = b"", 1 << 16
    with open_file(path, "rb") as f:
        while True:
            chunk = f.read(size)
            data, size = data + chunk, size * 2  # doubling: linear in the header's length
            text = decode_user_text(data, path, "surrogateescape")
            if not chunk:  # the whole file: its own reading decides
                return csv_records(text, path, delimiter)[0]
            _csv_field_limit(text)
            stream = io.StringIO(text, newline="")
            try:
                header = next(csv.reader(stream, delimiter=delimiter), [])
            except csv.Error:
                continue
            if stream.tell() < len(text):  # its line end is followed by more: nothing after it
                _check_unique_columns(header, path)  # can change it (a split "\\r\\n" or a
                return header  # character at the end)


def record_width_problem(row: dict) -> str | None:
    """What is wrong with the width of a `csv_records` row, or None for a whole one: a record
    with more fields than its header (an unquoted delimiter in a text: the texts would be cut)
    or fewer (the missing texts would be silently empty).

    Returns:
        "N more field(s) than the header" / "fewer fields than the header", or None.
    """
    if row.get(None):
        return f"{len(row[None])} more field(s) than the header"
    if any(value is None for key, value in row.items() if key is not None):
        return "fewer fields than the header"
    return None
