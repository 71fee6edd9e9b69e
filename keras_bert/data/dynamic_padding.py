"""Dynamic padding: `trim_to_longest` cuts a batch of packed inputs to its longest row;
`length_grouped_order` orders a shuffled epoch so each batch holds rows of similar length.

The encoder masks padded keys (`input_mask`), so cutting padding columns leaves the outputs at real
tokens unchanged (up to float summation order) while the work falls with the batch's real length.
Used by the fine-tuning pipeline, `Task.predict` and every exported text signature.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

MEGABATCH_BATCHES = 50  # batches per length-sorted group, as Hugging Face's LengthGroupedSampler


def trim_to_longest(features: dict, multiple: int = 1, minimum: int = 1) -> dict:
    """Cuts every tensor of `features` along its last axis to the longest row.

    Args:
        features: dict of int Tensors [..., T] sharing their shape, with `input_mask` (1 = real
            token); other keys (e.g. per-token labels) are cut the same way.
        multiple: int >= 1; the length is rounded up to a multiple of this many tokens.
        minimum: int >= 1; never cut below this many tokens (2 keeps `[CLS] [SEP]`).

    Returns:
        dict of the same keys and dtypes, [..., T'] with T' = min(T, max(minimum,
        ceil(longest / multiple) * multiple)). An empty batch gives T' = min(T, minimum).
    """
    mask = features["input_mask"]
    full = tf.shape(mask)[-1]
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask > 0, tf.int32), axis=-1))
    length = (longest + multiple - 1) // multiple * multiple
    length = tf.minimum(full, tf.maximum(length, minimum))
    return {k: v[..., :length] for k, v in features.items()}


def length_grouped_order(
    lengths, batch_size: int, seed, megabatch_batches: int = MEGABATCH_BATCHES
) -> np.ndarray:
    """A seeded epoch order whose consecutive `batch_size` rows have similar lengths.

    The rows are shuffled, cut into groups of `megabatch_batches * batch_size` rows, and each group
    is sorted by length (longest first), so each batch takes neighbours in length; the order of the
    full batches is then shuffled again, and a final short batch (N not a multiple of batch_size:
    the shortest rows of the last group) stays last. With dynamic padding a batch then costs about
    its rows' real length instead of its longest random member's (SST-2 train, batch 32: 2.5x fewer
    padded tokens per epoch). The same idea as Hugging Face's `group_by_length`
    (`LengthGroupedSampler`, groups of 50 batches).

    Args:
        lengths: int array-like [N], tokens per row (e.g. `input_mask.sum(-1)`).
        batch_size: rows per batch, >= 1.
        seed: int or sequence of ints (numpy `default_rng` entropy); the same seed gives the
            same order (one per epoch: seed + epoch, or [seed, epoch]).
        megabatch_batches: batches per sorted group, >= 1 (1: each random batch sorted inside,
            which groups nothing).

    Returns:
        int64 numpy [N], a permutation of range(N).

    Raises:
        ValueError: batch_size or megabatch_batches < 1.
    """
    if batch_size < 1 or megabatch_batches < 1:
        raise ValueError(
            f"batch_size and megabatch_batches must be >= 1, got {batch_size} and "
            f"{megabatch_batches}"
        )
    lengths = np.asarray(lengths)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths))
    group = megabatch_batches * batch_size
    order = (
        np.concatenate(
            [
                chunk[np.argsort(-lengths[chunk], kind="stable")]
                for chunk in np.split(order, range(group, len(order), group))
            ]
        )
        if len(order)
        else order.astype(np.int64)
    )
    full = len(order) // batch_size
    batches = rng.permutation(full)
    head = order[: full * batch_size].reshape(full, batch_size)[batches].reshape(-1)
    return np.concatenate([head, order[full * batch_size :]]).astype(np.int64)
