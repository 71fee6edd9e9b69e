"""CoNLL-2003 NER column files -> sentences of words and IOB2 tags (Tjong Kim Sang & De Meulder 2003).

Format: one token per line, columns separated by whitespace (`word POS chunk NER` in CoNLL-2003;
the word is the first column and the NER tag the last), a blank line between sentences and a
`-DOCSTART- -X- -X- O` line between documents. Tags may be IOB1 (the original `eng.*` files:
`B-` only where two entities of the same type touch) or IOB2 (every entity starts with `B-`);
`read_conll` returns IOB2, which seqeval's default (IOB2) scheme scores.

The split files are `train.txt`, `valid.txt` (= eng.testa, the dev set) and `test.txt`
(= eng.testb), as in the common redistributed form.
"""

from __future__ import annotations

import dataclasses
import os
import re

from keras_bert import fileio

DOCSTART = "-DOCSTART-"
SPLITS = ("train", "valid", "test")
OUTSIDE = "O"
_TAG = re.compile(r"^(O|[BI]-\S+)$")


@dataclasses.dataclass(frozen=True)
class NerSentence:
    """One sentence: `words` and IOB2 `tags` (same length, both tuples of str); `document` is the
    0-based index of the `-DOCSTART-` document it belongs to (0 when the file has none)."""

    words: tuple
    tags: tuple
    document: int = 0


def to_iob2(tags) -> list[str]:
    """IOB1 or IOB2 tags -> IOB2 (idempotent on IOB2).

    An `I-X` that does not continue an entity of type X (after `O`, at the start, or after another
    type) begins one, so it becomes `B-X`; everything else is kept.

    Args:
        tags: sequence of str, each `O`, `B-<type>` or `I-<type>`.

    Returns:
        list of str, IOB2 tags of the same length.

    Raises:
        ValueError: a tag of another form, naming it.
    """
    out, previous = [], OUTSIDE
    for tag in tags:
        if not _TAG.match(tag):
            raise ValueError(f"bad NER tag {tag!r}: expected O, B-<type> or I-<type>")
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]
        out.append(tag)
        previous = tag
    return out


def _finish(words, tags, document, sentences):
    if words:
        sentences.append(NerSentence(tuple(words), tuple(to_iob2(tags)), document))


def read_conll(path) -> list[NerSentence]:
    """Reads one CoNLL column file.

    Args:
        path: str or path-like; UTF-8 text (`keras_bert.fileio.read_user_text`: a byte-order
            mark dropped), lines ending in "\n" or "\r\n".

    Returns:
        list of `NerSentence` in file order, tags converted to IOB2. `-DOCSTART-` lines and blank
        lines only separate sentences; they never become sentences.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not UTF-8 (`fileio.UserFileError`); a token line with fewer than 2 columns or a bad tag, naming file and line.
    """
    path = os.fspath(path)
    sentences, words, tags, document = [], [], [], -1
    for number, line in enumerate(fileio.text_lines(fileio.read_user_text(path), path), 1):
        columns = line.split()
        if not columns or columns[0] == DOCSTART:
            _finish(words, tags, max(document, 0), sentences)
            words, tags = [], []
            document += bool(columns)
            continue
        if len(columns) < 2 or not _TAG.match(columns[-1]):
            raise ValueError(
                f"{path}:{number}: expected 'word ... NER-tag' with a tag O, "
                f"B-<type> or I-<type>, got {line.rstrip()!r}"
            )
        words.append(columns[0])
        tags.append(columns[-1])
    _finish(words, tags, max(document, 0), sentences)
    return sentences


def read_conll_splits(data_dir, splits=SPLITS) -> dict:
    """`{split: read_conll(data_dir/<split>.txt)}` for `splits` (default train, valid, test).

    Raises:
        FileNotFoundError: a split file is missing, naming it.
    """
    data_dir = os.fspath(data_dir)
    missing = [s for s in splits if not fileio.isfile(fileio.join(data_dir, f"{s}.txt"))]
    if missing:
        raise FileNotFoundError(
            f"{data_dir} lacks {', '.join(s + '.txt' for s in missing)} "
            "(CoNLL-2003 column files train.txt / valid.txt / test.txt)"
        )
    return {s: read_conll(fileio.join(data_dir, f"{s}.txt")) for s in splits}


def label_names(sentences) -> list[str]:
    """The tag set of `sentences` in id order: `O` first, then by entity type, `B-` before `I-`
    (for CoNLL-2003: O, B-LOC, I-LOC, B-MISC, I-MISC, B-ORG, I-ORG, B-PER, I-PER). Every type
    gets both its `B-` and `I-` tag, even when one never occurs."""
    types = sorted({t[2:] for s in sentences for t in s.tags if t != OUTSIDE})
    return [OUTSIDE] + [f"{p}-{t}" for t in types for p in ("B", "I")]


def counts(sentences) -> dict:
    """`{"sentences", "tokens", "documents", "entities"}` of a split (entities = `B-` tags)."""
    return {
        "sentences": len(sentences),
        "tokens": sum(len(s.words) for s in sentences),
        "documents": len({s.document for s in sentences}),
        "entities": sum(t.startswith("B-") for s in sentences for t in s.tags),
    }
