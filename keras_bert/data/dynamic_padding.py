"""`trim_to_longest`: cut a batch of packed inputs to its longest row (dynamic padding).

The encoder masks padded keys (`input_mask`), so cutting padding columns leaves the outputs at real
tokens unchanged (up to float summation order) while the work falls with the batch's real length.
Used by the fine-tuning pipeline, `Task.predict` and every exported text signature.
"""
from __future__ import annotations

import tensorflow as tf


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
