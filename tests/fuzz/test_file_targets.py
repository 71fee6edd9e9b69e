"""The fuzz targets of the files a user gives (tests.fuzz.config_targets: the server's text-proto
configs; tests.fuzz.reader_targets: every data reader) over their saved corpus
(tests/fuzz/corpus/<target>/: seeds from the readers' and the server's tests, past findings as
finding-*) and over hypothesis' splices of it. A target raises on a finding (an undocumented
error, more than 1 s of CPU on one input, a file read differently with a byte-order mark or
Windows line ends, a broken property), so each case fails with the finding's own message."""

import pathlib

import hypothesis
import hypothesis.strategies as st
import pytest

from tests.fuzz import config_targets, reader_targets

CORPUS = pathlib.Path(__file__).parent / "corpus"
TARGETS = {**config_targets.TARGETS, **reader_targets.TARGETS}


def _corpus(target):
    return sorted((CORPUS / target).iterdir())


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_saved_corpus_replays_without_a_finding(target):
    files = _corpus(target)
    assert len(files) >= 3, f"no seed corpus for {target}"
    for path in files:
        try:
            TARGETS[target](path.read_bytes())
        except Exception as e:
            raise AssertionError(f"{target}: {path.name}: {e}") from e


def test_the_reader_seeds_are_what_the_seed_writer_writes():
    for target, items in reader_targets.seeds().items():
        names = {p.name for p in (CORPUS / target).glob("seed-*")}
        want = {f"seed-{reader_targets.digest(b)}" for b in items}
        assert names == want, f"{target}: rerun python -m tests.fuzz.reader_targets"


@pytest.mark.parametrize("target", sorted(TARGETS))
@hypothesis.settings(max_examples=20, deadline=None, derandomize=True)
@hypothesis.given(data=st.data())
def test_splices_of_the_corpus_give_no_finding(target, data):
    """A corpus entry with a generated stretch of bytes in place of one of its own stretches."""
    entry = data.draw(st.sampled_from(_corpus(target))).read_bytes()
    start = data.draw(st.integers(0, len(entry)))
    end = data.draw(st.integers(start, min(len(entry), start + 64)))
    inserted = data.draw(st.binary(max_size=32) | st.text(max_size=16).map(str.encode))
    TARGETS[target](entry[:start] + inserted + entry[end:])
