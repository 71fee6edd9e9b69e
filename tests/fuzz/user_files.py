"""What every file-reading fuzz target shares: the bytes written to a scratch file, read by the
function under test, and its outcome checked.

A finding (raised as `serving_targets.Finding`) is an error outside the reader's documented
types, a documented error whose message is not one line, or a file read differently with a
leading byte-order mark or with Windows line ends (one decoding rule and one line rule for every
file a user gives: docs/cloud.md, keras_bert.fileio).
"""

import functools
import logging
import pathlib
import tempfile

from tests.fuzz.serving_targets import Finding

BOM = b"\xef\xbb\xbf"


@functools.cache
def scratch() -> pathlib.Path:
    """A scratch directory, in memory where the machine has one (a file written per input)."""
    memory = pathlib.Path("/dev/shm")
    return pathlib.Path(
        tempfile.mkdtemp(prefix="file-fuzz-", dir=memory if memory.is_dir() else None)
    )


def outcome(read, data: bytes, documented: tuple, name: str = "input.txt"):
    """("ok", value) or ("error", type name) of `read(path)` on a file `name` holding `data`;
    raises Finding for an error that is not documented or not one line."""
    path = scratch() / name
    path.write_bytes(data)
    logging.disable(logging.WARNING)  # the readers' warnings on dropped rows, once per input
    try:
        return "ok", read(str(path))
    except documented as e:
        message = str(e)
        if "\n" in message.strip() or not message.strip():
            raise Finding(f"documented {type(e).__name__} without a one-line message: {e!r}")
        return "error", type(e).__name__
    except Exception as e:
        raise Finding(f"not a documented error: {type(e).__name__}: {e}") from e
    finally:
        logging.disable(logging.NOTSET)


def comparable(value):
    """Protos (alone or in a list) as their serialized bytes, to compare outcomes."""
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if hasattr(value, "SerializeToString"):
        return value.SerializeToString(deterministic=True)
    return value


def same_with_bom_and_crlf(read, data: bytes, documented: tuple, name: str = "input.txt"):
    """The outcome of `data`, checked equal with a byte-order mark before it and (for text
    without "\\r" or quotes of its own) with "\\r\\n" line ends."""
    first = outcome(read, data, documented, name)
    variants = [] if data.startswith(BOM) else [("a byte-order mark", BOM + data)]  # one is dropped
    if b"\r" not in data and b"\n" in data and b'"' not in data:  # line ends outside strings
        variants.append(("Windows line ends", data.replace(b"\n", b"\r\n")))
    for what, variant in variants:
        other = outcome(read, variant, documented, name)
        if (first[0], comparable(first[1])) != (other[0], comparable(other[1])):
            raise Finding(f"read differently with {what}: {first} against {other}")
    return first
