"""TFRecord files (warmup requests, request logs) read and written without TensorFlow's runtime.

A record is: its length (uint64, little-endian), the masked CRC-32C of those 8 bytes (uint32), the
data, the masked CRC-32C of the data (uint32): TensorFlow's `core/lib/io/record_writer.cc`. Files
are uncompressed, as TF Serving reads warmup files and as the request logger writes. The CRC and
the writer are TensorBoard's TensorFlow-free ones (`tensorboard.compat.tensorflow_stub`,
`tensorboard.summary.writer.record_writer`; TensorBoard is pinned in the one set); paths go
through `keras_bert.fileio`, so any URI works and a local one needs no TensorFlow.
"""

from __future__ import annotations

import struct
from typing import Iterator

from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
from tensorboard.summary.writer.record_writer import RecordWriter

from keras_bert import fileio

_HEADER = struct.Struct("<QI")  # length, masked CRC of the length
_FOOTER = struct.Struct("<I")  # masked CRC of the data
# Per record in a TFRecord file: length (8 bytes) + its CRC (4) + the data's CRC (4).
RECORD_OVERHEAD_BYTES = _HEADER.size + _FOOTER.size


class RecordError(ValueError):
    """A TFRecord file that cannot be read to its end: the message names the file, the record
    and why."""


class TruncatedRecordError(RecordError):
    """The file ends inside a record (still being written, or cut short)."""


def open_records(path: str) -> RecordWriter:
    """A writer of records (`write(bytes)`, `flush()`, `close()`) to a new file at `path`, written
    as it goes (a request log; use `write_records` for a file that must appear whole)."""
    return RecordWriter(fileio.open_file(path, "wb"))


def iter_records(path: str) -> Iterator[bytes]:
    """Each record's data in order, both CRCs checked.

    Raises (after yielding every complete record before the fault):
        TruncatedRecordError: the file ends inside a record.
        RecordError: a CRC that does not match (a corrupt file).
        FileNotFoundError: no such file.
    """
    content = fileio.read_bytes(path)
    at, index = 0, 0
    while at < len(content):
        if len(content) - at < _HEADER.size:
            raise TruncatedRecordError(f"{path}: record {index} ends inside its header")
        length, length_crc = _HEADER.unpack_from(content, at)
        if masked_crc32c(content[at : at + 8]) != length_crc:
            raise RecordError(f"{path}: record {index} has a corrupt length (CRC mismatch)")
        start = at + _HEADER.size
        end = start + length
        if end + _FOOTER.size > len(content):
            raise TruncatedRecordError(
                f"{path}: record {index} ends after {len(content) - start} of its {length} bytes"
            )
        data = content[start:end]
        if masked_crc32c(data) != _FOOTER.unpack_from(content, end)[0]:
            raise RecordError(f"{path}: record {index} is corrupt (data CRC mismatch)")
        yield data
        at, index = end + _FOOTER.size, index + 1


def write_records(records, path: str) -> None:
    """`records` (bytes each) as a TFRecord file at `path`, which appears only when complete."""
    fileio.makedirs(fileio.parent(path))
    written = fileio.writing_path(path)
    writer = open_records(written)
    try:
        for data in records:
            writer.write(data)
        writer.close()
    except BaseException:
        writer.close()
        fileio.remove(written)
        raise
    fileio.commit_write(written, path)
