"""`serving.wire.tfrecords` reads what `tf.io.TFRecordWriter` writes and writes what
`tf.data.TFRecordDataset` reads, byte for byte; a cut or corrupted file gives every record before
the fault, then an error naming the file and the record."""

import pytest
import tensorflow as tf

from serving.wire import tfrecords

RECORDS = [b"", b"one", bytes(range(256)) * 40, "unicode é".encode()]


def test_written_file_is_byte_identical_to_tensorflows(tmp_path):
    ours, theirs = tmp_path / "ours.tfrecord", tmp_path / "theirs.tfrecord"
    tfrecords.write_records(RECORDS, str(ours))
    with tf.io.TFRecordWriter(str(theirs)) as writer:
        for record in RECORDS:
            writer.write(record)
    assert ours.read_bytes() == theirs.read_bytes()
    assert list(tf.data.TFRecordDataset(str(ours)).as_numpy_iterator()) == RECORDS
    assert list(tfrecords.iter_records(str(theirs))) == RECORDS
    overhead = len(theirs.read_bytes()) - sum(map(len, RECORDS))
    assert overhead == len(RECORDS) * tfrecords.RECORD_OVERHEAD_BYTES
    assert [p.name for p in tmp_path.iterdir()] != [] and not list(tmp_path.glob(".*"))


def test_ram_uri_round_trip():
    path = "ram://tfrecords_test/dir/records.tfrecord"
    tfrecords.write_records(RECORDS, path)
    assert list(tfrecords.iter_records(path)) == RECORDS


def test_cut_file_gives_the_complete_records_then_a_truncation_error(tmp_path):
    path = tmp_path / "cut.tfrecord"
    tfrecords.write_records(RECORDS[:2], str(path))
    whole = path.read_bytes()
    for cut, message in (
        (5, "record 2 ends inside its header"),
        (12 + 10, "record 2 ends after 10 of its 10240 bytes"),
    ):
        tfrecords.write_records([*RECORDS[:2], RECORDS[2]], str(path))
        path.write_bytes(path.read_bytes()[: len(whole) + cut])
        got = []
        with pytest.raises(tfrecords.TruncatedRecordError, match=message):
            for record in tfrecords.iter_records(str(path)):
                got.append(record)
        assert got == RECORDS[:2]


def test_corrupt_bytes_are_named(tmp_path):
    path = tmp_path / "bad.tfrecord"
    tfrecords.write_records(RECORDS, str(path))
    data = bytearray(path.read_bytes())
    data[16 + 12 + 1] ^= 0xFF  # inside record 1's data ("one")
    path.write_bytes(bytes(data))
    with pytest.raises(tfrecords.RecordError, match="record 1 is corrupt"):
        list(tfrecords.iter_records(str(path)))
    data = bytearray(path.read_bytes())
    data[16 + 2] ^= 0xFF  # record 1's length
    path.write_bytes(bytes(data))
    with pytest.raises(tfrecords.RecordError, match="record 1 has a corrupt length"):
        list(tfrecords.iter_records(str(path)))
