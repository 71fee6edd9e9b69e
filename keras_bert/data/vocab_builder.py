"""WordPiece vocabulary learning from a text corpus (tensorflow-text's `bert_vocab_from_dataset`).

The learner is tensorflow-text's (`tensorflow_text.tools.wordpiece_vocab`), the algorithm used to
build BERT-style vocabularies; this module only feeds it lines of text, fixes the reserved tokens
and writes a `vocab.txt` (one token per line, line number = id) that
`keras_bert.tokenization.FullTokenizer` and tensorflow-text's `BertTokenizer` both load.

Note on normalisation (PITFALLS.md, "Reference normalisation is not NFKC case folding"): with
`do_lower_case=True` tensorflow-text splits words after NFKC case folding plus accent stripping,
while `FullTokenizer` lower-cases with `str.lower()` then NFD-strips accents. The two agree on
ASCII and common Latin text; on ß, ligatures or full-width letters the learned vocabulary may hold
a piece the reference tokenizer never produces (it then yields [UNK] for such words).
"""

from __future__ import annotations

import os
from typing import Iterable, Sequence

from keras_bert import fileio

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def learn_wordpiece_vocab(
    lines: Iterable[str],
    vocab_size: int,
    do_lower_case: bool = True,
    reserved_tokens: Sequence[str] = RESERVED_TOKENS,
    batch_size: int = 1024,
    min_count: int = 2,
) -> list[str]:
    """Learns a WordPiece vocabulary from lines of text.

    Args:
        lines: iterable of str, the corpus (any segmentation; blank lines are ignored).
        vocab_size: int > len(reserved_tokens). Target size; the learner's binary search may
            return up to ~`slack_ratio` (5%) fewer tokens, never more.
        do_lower_case: bool. Lower-case and strip accents before learning.
        reserved_tokens: tokens placed first, in this order (ids 0..len-1): by default
            [PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4.
        batch_size: int. Lines per tf.data batch fed to the learner.
        min_count: int >= 1. Lowest word-count threshold the learner's binary search may try
            (its `lower_thresh`; tensorflow-text's default of 10 caps the vocabulary of a small
            corpus such as WikiText-2 test at about 4,400 tokens).

    Returns:
        list of str: the vocabulary, reserved tokens first, then single characters and their
        `##` continuations, then learned word pieces.

    Raises:
        ValueError: if vocab_size is not larger than the reserved tokens, or the corpus is empty.
    """
    import tensorflow as tf
    from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset as bvfd

    if vocab_size <= len(reserved_tokens):
        raise ValueError(
            f"vocab_size={vocab_size} must exceed the {len(reserved_tokens)} reserved tokens"
        )
    texts = [line.strip() for line in lines]
    texts = [t for t in texts if t]
    if not texts:
        raise ValueError("the corpus has no non-blank line to learn a vocabulary from")
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(batch_size)
    vocab = bvfd.bert_vocab_from_dataset(
        dataset,
        vocab_size=vocab_size,
        reserved_tokens=list(reserved_tokens),
        bert_tokenizer_params={"lower_case": do_lower_case},
        learn_params={"lower_thresh": min_count},
    )
    return list(vocab)


def write_vocab_file(vocab: Sequence[str], path: str | os.PathLike) -> None:
    """Writes `vocab` one token per line (UTF-8, `\\n` line ends); line number = token id.

    Raises:
        ValueError: if a token is empty, holds a newline, or appears twice.
    """
    seen = set()
    for token in vocab:
        if not token or "\n" in token or "\r" in token:
            raise ValueError(f"invalid vocabulary token {token!r}")
        if token in seen:
            raise ValueError(f"duplicate vocabulary token {token!r}")
        seen.add(token)
    fileio.write_text(path, "".join(t + "\n" for t in vocab))
