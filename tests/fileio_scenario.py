"""One sequence of `keras_bert.fileio` operations on a local directory, returning what each gave:
run in a process without TensorFlow (`_PosixFiles`) and in one with it (`tf.io.gfile`) by
tests/test_fileio.py, which compares the two. Imports nothing but the standard library, so that
the process without TensorFlow stays without it."""

# TensorFlow's errors and the OSError each corresponds to (`fileio.not_found_errors()`).
_TENSORFLOW_KINDS = {"NotFoundError": "FileNotFoundError", "AlreadyExistsError": "FileExistsError"}


def _error(fn):
    """The kind of error `fn()` raised (None: none), not its wording (the backends word it
    apart)."""
    try:
        fn()
    except Exception as e:
        for kind in (FileExistsError, FileNotFoundError, IsADirectoryError, OSError):
            if isinstance(e, kind):
                return kind.__name__
        return _TENSORFLOW_KINDS.get(type(e).__name__, type(e).__name__)
    return None


def scenario(fileio, base: str) -> dict:
    j = fileio.join
    out = {}
    fileio.makedirs(j(base, "a", "b"))
    fileio.makedirs(j(base, "a", "b"))  # again: no error
    fileio.write_json(j(base, "a", "config.json"), {"b": 2, "a": 1})
    fileio.write_text(j(base, "a", ".hidden"), "x\r\ny\n")
    fileio.write_bytes(j(base, "a", "b", "data.bin"), bytes(range(256)))
    out["listdir"] = fileio.listdir(j(base, "a"))
    out["glob"] = [p[len(base) :] for p in fileio.glob(j(base, "a", "*"))]
    out["walk"] = [
        (root[len(base) :], sorted(dirs), sorted(files)) for root, dirs, files in fileio.walk(base)
    ]
    out["text"] = fileio.read_text(j(base, "a", ".hidden"))
    with fileio.open_file(j(base, "a", ".hidden")) as f:
        out["open_text"] = f.read()
    out["json"] = fileio.read_json(j(base, "a", "config.json"))
    out["exists"] = [fileio.exists(j(base, n)) for n in ("a", "a/config.json", "none")]
    out["isdir"] = [fileio.isdir(j(base, n)) for n in ("a", "a/config.json", "none")]
    out["isfile"] = [fileio.isfile(j(base, n)) for n in ("a", "a/config.json", "none")]
    st = fileio.stat(j(base, "a", "b", "data.bin"))
    out["stat"] = [st.length, st.is_directory, st.mtime_nsec > 0, fileio.size(j(base, "a", "b"))]
    out["stat_dir"] = fileio.stat(j(base, "a")).is_directory
    src, dst = j(base, "a", "config.json"), j(base, "a", "copy.json")
    fileio.copy(src, dst)
    out["copy_again"] = _error(lambda: fileio.copy(src, dst))
    fileio.copy(src, dst, overwrite=True)
    out["rename_onto"] = _error(lambda: fileio.rename(dst, src))
    fileio.rename(dst, j(base, "a", "moved.json"))
    out["after_rename"] = fileio.listdir(j(base, "a"))
    out["read_missing"] = _error(lambda: fileio.read_bytes(j(base, "none")))
    out["stat_missing"] = _error(lambda: fileio.stat(j(base, "none")))
    out["listdir_missing"] = _error(lambda: fileio.listdir(j(base, "none")))
    fileio.remove(j(base, "none"))  # a missing file: no error
    fileio.remove(j(base, "a", "moved.json"))
    final = j(base, "export", "1")
    staged = fileio.staging_dir(final)
    fileio.write_text(j(staged, "saved_model.pb"), "pb")
    fileio.publish_dir(staged, final)
    out["published"] = [fileio.listdir(j(base, "export")), fileio.listdir(final)]
    out["complete"] = fileio.is_complete(final)
    fileio.rmtree(j(base, "a"))
    fileio.rmtree(j(base, "a"))  # a missing tree: no error
    out["left"] = fileio.listdir(base)
    return out
