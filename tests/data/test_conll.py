"""CoNLL-2003 reader: document and sentence breaks, IOB1 -> IOB2, errors, and the real files."""

import pytest

from keras_bert.data import conll

# The label names of a corpus holding every CoNLL-2003 entity type: O, then B-/I- of each type.
LABELS = ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def test_reader_splits_documents_and_sentences_and_converts_iob1(tmp_path):
    path = tmp_path / "eng.txt"
    path.write_text(
        "-DOCSTART- -X- -X- O\n\n"
        "EU NNP I-NP I-ORG\nrejects VBZ I-VP O\nGerman JJ I-NP I-MISC\n\n\n"
        "Peter NNP I-NP I-PER\nBlackburn NNP I-NP I-PER\nJohn NNP I-NP B-PER\n"
        "-DOCSTART- -X- -X- O\n"
        "BRUSSELS NNP I-NP I-LOC",
        encoding="utf-8",
    )  # no final newline
    sentences = conll.read_conll(path)
    assert [s.words for s in sentences] == [
        ("EU", "rejects", "German"),
        ("Peter", "Blackburn", "John"),
        ("BRUSSELS",),
    ]
    assert [s.tags for s in sentences] == [
        ("B-ORG", "O", "B-MISC"),
        ("B-PER", "I-PER", "B-PER"),
        ("B-LOC",),
    ]
    assert [s.document for s in sentences] == [0, 0, 1]
    assert conll.counts(sentences) == {"sentences": 3, "tokens": 7, "documents": 2, "entities": 5}
    assert conll.label_names(sentences) == LABELS


def test_to_iob2_on_iob1_and_idempotent_on_iob2():
    iob1 = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG", "I-MISC", "B-MISC"]
    iob2 = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG", "B-MISC", "B-MISC"]
    assert conll.to_iob2(iob1) == iob2
    assert conll.to_iob2(iob2) == iob2
    with pytest.raises(ValueError, match="bad NER tag 'E-PER'"):
        conll.to_iob2(["E-PER"])


def test_bad_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("EU B-ORG\nrejects\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.txt:2: expected 'word ... NER-tag'"):
        conll.read_conll(path)
    with pytest.raises(FileNotFoundError, match="valid.txt, test.txt"):
        conll.read_conll_splits(tmp_path)


def test_real_conll2003_counts(data_dir):
    """Counted independently with awk over the files (non-blank, non -DOCSTART- lines = tokens;
    runs of them = sentences; -DOCSTART- lines = documents; B- tags = entities); they match
    ../shared/data/README.md and the CoNLL-2003 paper's entity totals (23,499 / 5,942 / 5,648)."""
    splits = conll.read_conll_splits(data_dir / "conll2003")
    assert {k: conll.counts(v) for k, v in splits.items()} == {
        "train": {"sentences": 14041, "tokens": 203621, "documents": 946, "entities": 23499},
        "valid": {"sentences": 3250, "tokens": 51362, "documents": 216, "entities": 5942},
        "test": {"sentences": 3453, "tokens": 46435, "documents": 231, "entities": 5648},
    }
    first = splits["train"][0]
    assert first.words[:3] == ("EU", "rejects", "German") and first.tags[:3] == (
        "B-ORG",
        "O",
        "B-MISC",
    )
    assert conll.label_names(splits["train"]) == LABELS
