"""Packing of one or two WordPiece segments into BERT model inputs (pure Python reference).

`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, then padding to `max_seq_length`, as in
google-research/bert `run_classifier.py` (`convert_single_example`, `_truncate_seq_pair`).
The in-graph packer in `bert_preprocessor.py` follows the same rules; tests compare them.
"""

from __future__ import annotations

CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
PAD_TOKEN = "[PAD]"
# The tokens packing writes: [CLS] first, [SEP] after each segment, [PAD] to fill. Tokenizing
# needs none of them (google-research/bert `FullTokenizer` accepts any vocabulary).
PACKING_TOKENS = (CLS_TOKEN, SEP_TOKEN, PAD_TOKEN)


def packing_token_ids(vocab, vocab_name: str = "the vocabulary") -> tuple[int, int, int]:
    """Ids of `[CLS]`, `[SEP]` and `[PAD]` in `vocab`, the three tokens packing needs.

    Args:
        vocab: mapping token -> id (e.g. `load_vocab(...)`).
        vocab_name: how messages name the vocabulary (its file path).

    Returns:
        (cls_id, sep_id, pad_id), python ints.

    Raises:
        ValueError: `"cannot pack inputs: <vocab_name> lacks the special tokens [...] that
            packing writes ([CLS] A [SEP] B [SEP], then [PAD]); tokenizing does not need
            them"`, listing exactly the missing ones in the order [CLS], [SEP], [PAD].
    """
    missing = [t for t in PACKING_TOKENS if t not in vocab]
    if missing:
        raise ValueError(
            f"cannot pack inputs: {vocab_name} lacks the special tokens {missing} that packing "
            "writes ([CLS] A [SEP] B [SEP], then [PAD]); tokenizing does not need them"
        )
    return tuple(int(vocab[t]) for t in PACKING_TOKENS)


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_num_tokens: int) -> None:
    """Truncates a pair in place until `len(a) + len(b) <= max_num_tokens`.

    Pops the last piece of the longer list; on a tie pops from `tokens_b` (reference
    `_truncate_seq_pair`). Works on flattened word pieces, never on words.

    Raises:
        ValueError: if `max_num_tokens` is negative.
    """
    if max_num_tokens < 0:
        raise ValueError(f"max_num_tokens must be >= 0, got {max_num_tokens}")
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def truncated_lengths(len_a: int, len_b: int, max_num_tokens: int) -> tuple[int, int]:
    """Closed form of `truncate_seq_pair`: the lengths it leaves, without building lists.

    With excess `e = len_a + len_b - max_num_tokens > 0` and `d = |len_a - len_b|`: if
    `e <= d` the longer loses `e`; else both first drop to `min(len_a, len_b)` and the rest
    `r = e - d` alternates starting with segment B, so B loses `ceil(r/2)`, A `floor(r/2)`.
    """
    e = len_a + len_b - max_num_tokens
    if e <= 0:
        return len_a, len_b
    d = abs(len_a - len_b)
    if e <= d:
        return (len_a - e, len_b) if len_a > len_b else (len_a, len_b - e)
    r = e - d
    m = min(len_a, len_b)
    return m - r // 2, m - (r + 1) // 2


def pack_inputs(
    ids_a, ids_b=None, *, max_seq_length: int, cls_id: int, sep_id: int, pad_id: int = 0
) -> dict:
    """Packs token ids into `[CLS] A [SEP] (B [SEP])` + padding.

    Args:
        ids_a: list of int, segment A's word-piece ids (no special tokens).
        ids_b: optional list of int, segment B's ids.
        max_seq_length: int, total length in tokens including [CLS]/[SEP] and padding;
            at least 2 (single) or 3 (pair).
        cls_id, sep_id, pad_id: ids of [CLS], [SEP], [PAD] (101, 102, 0 in BERT vocabs).

    Returns:
        dict of python lists of length `max_seq_length`: `input_word_ids`, `input_mask`
        (1 = real token), `input_type_ids` (0 for [CLS] A [SEP], 1 for B [SEP], 0 padding).
        Single segments are cut to `max_seq_length - 2`; pairs use `truncate_seq_pair`
        with `max_seq_length - 3`.

    Raises:
        ValueError: if `max_seq_length` is too small for the special tokens.
    """
    ids_a = list(ids_a)
    if ids_b is None:
        if max_seq_length < 2:
            raise ValueError(f"max_seq_length must be >= 2 for one segment, got {max_seq_length}")
        ids_a = ids_a[: max_seq_length - 2]
        ids_b = []
        pair = False
    else:
        if max_seq_length < 3:
            raise ValueError(f"max_seq_length must be >= 3 for a pair, got {max_seq_length}")
        ids_b = list(ids_b)
        truncate_seq_pair(ids_a, ids_b, max_seq_length - 3)
        pair = True
    word_ids = [cls_id] + ids_a + [sep_id]
    type_ids = [0] * len(word_ids)
    if pair:
        word_ids += ids_b + [sep_id]
        type_ids += [1] * (len(ids_b) + 1)
    mask = [1] * len(word_ids)
    pad = max_seq_length - len(word_ids)
    return {
        "input_word_ids": word_ids + [pad_id] * pad,
        "input_mask": mask + [0] * pad,
        "input_type_ids": type_ids + [0] * pad,
    }
