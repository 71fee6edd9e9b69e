"""Sliding windows over a long sequence of pieces, and the "max context" rule.

Used by SQuAD (a context longer than a window; `keras_bert.data.squad`, the SQuAD serving
signature) and NER (a sentence longer than a window; `keras_bert.tasks.token_classifier`).

Windows (google-research/bert `run_squad.py`, `doc_spans`): the first starts at piece 0; each
next one starts `min(window, stride)` pieces later; the last is the first that reaches the end.
A window holds `min(window, pieces left)` pieces.

Max context (`run_squad.py::_check_is_max_context`): a piece seen by several windows belongs to
the window where its score is highest,
    score = min(pieces left of it, pieces right of it) + 0.01 x window length,
ties to the earlier window. Computed here as 100 x min + length: 100 times the reference score,
so the same order and ties, in exact integers. The length term matters beyond ties: a piece of
a full 510-piece window (score 126 + 5.10) beats the same piece in a 265-piece last window where
it has 128 pieces on its short side (128 + 2.65).

Each rule has two forms with the same results: Python on ints (`window_spans`,
`is_max_context`; SQuAD features) and TensorFlow graph ops on a batch (`graph_window_spans`,
`graph_max_context`; SQuAD serving and NER, in `tf.function` and `tf.data`).
"""

from __future__ import annotations

import tensorflow as tf

# The reference's 0.01 x length tie-break, in integers: score = CONTEXT_WEIGHT * min + length.
CONTEXT_WEIGHT = 100


def window_spans(num_tokens: int, window: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) of each window over `num_tokens` pieces (module docstring).

    A sequence of zero pieces still gets one empty window, (0, 0) (SQuAD: every question gets an
    answer, the empty string).

    Args:
        num_tokens: int >= 0, pieces in the sequence.
        window: int >= 1, most pieces in a window.
        stride: int >= 1, pieces between window starts (`min(window, stride)` is used).

    Returns:
        list of (start, length) int pairs, starts increasing.

    Raises:
        ValueError: window or stride below 1.
    """
    if window < 1 or stride < 1:
        raise ValueError(f"need window >= 1 and stride >= 1, got {window}, {stride}")
    spans, start = [], 0
    while True:
        length = min(num_tokens - start, window)
        spans.append((start, length))
        if start + length >= num_tokens:
            return spans
        start += min(length, stride)


def is_max_context(spans, window_index: int, position: int) -> bool:
    """Whether window `window_index` is the max-context window of piece `position`.

    Args:
        spans: the (start, length) pairs of `window_spans`.
        window_index: int, index into `spans`.
        position: int, piece index in the whole sequence.

    Returns:
        bool; False when the window does not hold the piece.
    """
    best_score, best_index = None, None
    for index, (start, length) in enumerate(spans):
        if not start <= position < start + length:
            continue
        score = CONTEXT_WEIGHT * min(position - start, start + length - 1 - position) + length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return best_index == window_index


def graph_window_spans(num_tokens, window, stride, keep_empty: bool = True) -> dict:
    """`window_spans` of a batch of sequences, in graph; all windows of all sequences, flat.

    Args:
        num_tokens: int32 or int64 Tensor [B], pieces per sequence.
        window: int or Tensor [B] of `num_tokens`' dtype, >= 1: most pieces per window.
        stride: int or Tensor [B], >= 1 (not checked in graph).
        keep_empty: bool. True: a sequence of zero pieces gets one empty window (SQuAD); False:
            none (NER).

    Returns:
        dict of Tensors [N] in `num_tokens`' dtype, windows in sequence order then window
        order: `sequence` (the row of its sequence), `index` (window number within it),
        `start`, `length` (pieces); and `count` [B], windows per sequence.
    """
    n = tf.convert_to_tensor(num_tokens)
    window = tf.broadcast_to(tf.cast(window, n.dtype), tf.shape(n))
    stride = tf.minimum(window, tf.cast(stride, n.dtype))
    count = 1 + (tf.maximum(n - window, 0) + stride - 1) // stride  # [B]
    if not keep_empty:
        count = tf.where(n > 0, count, tf.zeros_like(count))
    sequence = tf.repeat(tf.range(tf.size(n, out_type=n.dtype)), count)  # [N]
    index = tf.ragged.range(count).flat_values  # [N]
    start = index * tf.gather(stride, sequence)
    length = tf.minimum(tf.gather(window, sequence), tf.gather(n, sequence) - start)
    return {"sequence": sequence, "index": index, "start": start, "length": length, "count": count}


def graph_max_context(first, length, num_pieces) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """`is_max_context` for every piece of every window of a batch, in graph.

    The pieces of all sequences are numbered in one flat list; window i holds pieces
    `first[i] .. first[i] + length[i] - 1`. Of two windows holding the same piece, the one with
    the lower row is the earlier (as `graph_window_spans` orders them).

    Args:
        first: int Tensor [N], flat index of each window's first piece.
        length: int Tensor [N] (same dtype), pieces in each window (may be 0).
        num_pieces: int scalar, pieces in the flat list (> every index).

    Returns:
        (pieces, flags): RaggedTensors [N, (length)]: the flat piece index (int64) of each
        window position, and bool, True where this window is that piece's max-context window.
    """
    first, length = tf.cast(first, tf.int64), tf.cast(length, tf.int64)
    pieces = tf.ragged.range(first, first + length)  # [N, (length)]
    position = pieces - tf.expand_dims(first, 1)  # 0-based within the window
    window_length = tf.expand_dims(length, 1)
    score = (
        CONTEXT_WEIGHT * tf.minimum(position, window_length - 1 - position) + window_length
    ).flat_values
    total = tf.size(first, out_type=tf.int64)
    row = pieces.value_rowids()
    key = score * (total + 1) + (total - row)  # highest score, then the earliest window
    best = tf.math.unsorted_segment_max(key, pieces.flat_values, tf.cast(num_pieces, tf.int64))
    chosen = total - tf.gather(best, pieces.flat_values) % (total + 1)
    return pieces, pieces.with_flat_values(tf.equal(chosen, row))


__all__ = [
    "CONTEXT_WEIGHT",
    "graph_max_context",
    "graph_window_spans",
    "is_max_context",
    "window_spans",
]
