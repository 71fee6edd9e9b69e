"""Structured values read from a fuzzer's bytes, as atheris' FuzzedDataProvider reads them, in
pure Python: the structure-aware targets run the same under atheris, under hypothesis (which
shrinks the bytes) and when the saved corpus is replayed, with no atheris installed.

Every read takes bytes from the front; once the bytes run out every read gives its smallest
value (0, b"", the first choice), so any byte string is a valid input and a short one a small
structure.
"""


class ByteSource:
    """Reads small integers, choices and byte strings from `data` (bytes)."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def uint(self, nbytes: int) -> int:
        """An unsigned integer of `nbytes` bytes (little-endian; missing bytes read as zero)."""
        chunk = self.data[self.pos : self.pos + nbytes]
        self.pos += len(chunk)
        return int.from_bytes(chunk, "little")

    def below(self, n: int) -> int:
        """An integer in [0, n) (0 when n <= 1)."""
        if n <= 1:
            return 0
        return self.uint(1 if n <= 256 else 2 if n <= 65536 else 8) % n

    def pick(self, choices):
        """One element of the sequence `choices`."""
        return choices[self.below(len(choices))]

    def chance(self, one_in: int) -> bool:
        """True about once in `one_in` reads."""
        return self.below(one_in) == 0 and self.remaining() > 0

    def take(self, n: int) -> bytes:
        """Up to `n` bytes (fewer when the data runs out)."""
        chunk = self.data[self.pos : self.pos + n]
        self.pos += len(chunk)
        return chunk

    def rest(self) -> bytes:
        return self.take(self.remaining())
