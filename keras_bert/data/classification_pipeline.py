"""tf.data pipelines for sentence (pair) classification and regression.

One function feeds training and evaluation: examples -> (optional seeded shuffle) -> batch ->
in-graph tokenization and packing (`keras_bert.tokenization.BertPreprocessor`, padding to
max_seq_length) -> prefetch. Shuffling happens before tokenization, so skipping the first k batches
of an epoch (to resume a killed run) costs no tokenization. The order of epoch e is fixed by
`seed + e`: the same seed gives the same batches on every run, with or without a restart.

Fine-tuning runs many epochs (and restarts) over the same small sets, so `encode_examples` runs
the same in-graph preprocessor once and keeps the packed ids (as google-research/bert writes
TFRecords once); `make_classification_dataset` accepts those `EncodedExamples` as well as raw
examples and then only shuffles, batches and prefetches. Building an iterator over the in-graph
tokenizer costs seconds per epoch on CPU; over cached ids it is free.

Dynamic padding (`pad_to_multiple_of`): each batch is cut to its longest row, rounded up to a
multiple of the given number of tokens, instead of carrying max_seq_length columns. The encoder
masks padded keys (`input_mask`), so the outputs at real tokens do not change (up to float
summation order); the work per batch falls with the batch's length (SST-2 train: mean 13 tokens,
padded to 64 otherwise). The sequence dimension of the batches is then `None`. With
`group_by_length` (training, encoded examples) each shuffled epoch is ordered so a batch holds rows
of similar length (`dynamic_padding.length_grouped_order`), and dynamic padding then cuts most of
the remaining padding.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from keras_bert.data.dynamic_padding import length_grouped_order, trim_to_longest
from keras_bert.data.glue import InputExample
from keras_bert.config import INPUT_NAMES


def encode_labels(
    examples: Sequence[InputExample], file_labels: Sequence[str] | None, is_regression: bool
) -> np.ndarray:
    """Labels as ids: int32 [N] (index into file_labels) or float32 [N] scores.

    Raises:
        ValueError: an example without a label (e.g. a GLUE test row) or with a label not in
            file_labels, naming the example's guid.
    """
    if is_regression:
        out = []
        for e in examples:
            if e.label is None:
                raise ValueError(
                    f"example {e.guid} has no label (test splits cannot be trained or scored)"
                )
            out.append(float(e.label))
        return np.asarray(out, np.float32)
    index = {label: i for i, label in enumerate(file_labels)}
    ids = []
    for e in examples:
        if e.label not in index:
            raise ValueError(
                f"example {e.guid}: label {e.label!r} is not one of {list(file_labels)}"
            )
        ids.append(index[e.label])
    return np.asarray(ids, np.int32)


@dataclasses.dataclass
class EncodedExamples:
    """Examples after tokenization and packing.

    Attributes:
        features: dict of `input_word_ids`, `input_mask`, `input_type_ids`, int32 numpy [N, T].
        labels: int32 [N] label ids, float32 [N] scores, or None (unlabelled).
    """

    features: dict
    labels: np.ndarray | None

    def __len__(self) -> int:
        return len(self.features["input_word_ids"])


def encode_examples(
    examples: Sequence[InputExample],
    preprocessor: Callable,
    file_labels: Sequence[str] | None = None,
    is_regression: bool = False,
    with_labels: bool = True,
    batch_size: int = 256,
) -> EncodedExamples:
    """Tokenize and pack all examples once with the in-graph preprocessor (one tf.data pass).

    Returns:
        EncodedExamples in example order. Raises as make_classification_dataset.
    """
    ds = make_classification_dataset(
        examples, preprocessor, file_labels, is_regression, batch_size, with_labels=False
    )
    parts = {k: [] for k in INPUT_NAMES}
    for features in ds:
        for k in parts:
            parts[k].append(features[k].numpy())
    features = {k: np.concatenate(v, axis=0) for k, v in parts.items()}
    labels = encode_labels(examples, file_labels, is_regression) if with_labels else None
    return EncodedExamples(features, labels)


def make_classification_dataset(
    examples: Sequence[InputExample] | EncodedExamples,
    preprocessor: Callable | None,
    file_labels: Sequence[str] | None = None,
    is_regression: bool = False,
    batch_size: int = 32,
    shuffle: bool = False,
    seed: int = 0,
    epoch: int = 0,
    skip_batches: int = 0,
    drop_remainder: bool = False,
    with_labels: bool = True,
    pad_to_multiple_of: int | None = None,
    group_by_length: bool = False,
) -> tf.data.Dataset:
    """Batches of `(features, labels)` (or `features` with with_labels=False).

    Args:
        examples: InputExamples (text_b is used when the first example has one), or
            EncodedExamples from encode_examples (then preprocessor and file_labels are unused).
        preprocessor: callable in graph: tf.string [B] (single) or a list [text_a, text_b] of
            tf.string [B] -> dict of `input_word_ids`, `input_mask`, `input_type_ids` int32
            [B, max_seq_length] (a `BertPreprocessor`).
        file_labels: the label strings as the data files write them, in id order
            (classification; the task's `label_names` may be display names of these).
        batch_size: global batch size (a distribution strategy splits it across replicas).
        shuffle: shuffle the whole set with seed `seed + epoch` (order fixed per epoch).
        skip_batches: drop the first batches of the epoch (resume).
        drop_remainder: drop a final short batch (training; keeps the batch dimension static).
        pad_to_multiple_of: cut each batch to its longest row rounded up to a multiple of this
            many tokens (dynamic padding; at most max_seq_length); None keeps max_seq_length.
        group_by_length: with shuffle, order the epoch so each batch holds rows of similar
            length (`length_grouped_order`, seeded by seed + epoch); needs EncodedExamples.

    Returns:
        tf.data.Dataset of (dict of int32 [B, T], labels int32 [B] or float32 [B]); T is
        max_seq_length, or at most that with pad_to_multiple_of.

    Raises:
        ValueError: no examples, a bad batch size or pad_to_multiple_of, group_by_length
            without shuffle or on raw examples, or labels as in encode_labels.
    """
    if examples is None or len(examples) == 0:
        raise ValueError("no examples to build a dataset from")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if pad_to_multiple_of is not None and pad_to_multiple_of < 1:
        raise ValueError(f"pad_to_multiple_of must be >= 1 or None, got {pad_to_multiple_of}")
    if group_by_length and not (shuffle and isinstance(examples, EncodedExamples)):
        raise ValueError(
            "group_by_length orders a shuffled epoch of encoded examples: pass "
            "shuffle=True and EncodedExamples (encode_examples)"
        )
    trim = (
        (lambda ds: ds)
        if pad_to_multiple_of is None
        else (
            lambda ds: ds.map(
                lambda *b: _trim_batch(b, pad_to_multiple_of, with_labels),
                num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True,
            )
        )
    )
    if isinstance(examples, EncodedExamples):
        if with_labels and examples.labels is None:
            raise ValueError("EncodedExamples without labels; pass with_labels=False")
        columns = (examples.features, examples.labels) if with_labels else examples.features
        if group_by_length:
            order = length_grouped_order(
                examples.features["input_mask"].sum(-1), batch_size, seed + epoch
            )
            columns = tf.nest.map_structure(lambda a: np.asarray(a)[order], columns)
        ds = tf.data.Dataset.from_tensor_slices(columns)
        if shuffle and not group_by_length:
            ds = ds.shuffle(len(examples), seed=seed + epoch, reshuffle_each_iteration=False)
        ds = ds.batch(batch_size, drop_remainder=drop_remainder)
        if skip_batches:
            ds = ds.skip(skip_batches)
        return _finish(trim(ds))
    is_pair = examples[0].text_b is not None
    columns = {"text_a": np.asarray([e.text_a for e in examples], object)}
    if is_pair:
        columns["text_b"] = np.asarray([e.text_b or "" for e in examples], object)
    if with_labels:
        columns["label"] = encode_labels(examples, file_labels, is_regression)
    ds = tf.data.Dataset.from_tensor_slices(columns)
    if shuffle:
        ds = ds.shuffle(len(examples), seed=seed + epoch, reshuffle_each_iteration=False)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if skip_batches:
        ds = ds.skip(skip_batches)

    def _encode(batch):
        inputs = [batch["text_a"], batch["text_b"]] if is_pair else batch["text_a"]
        features = preprocessor(inputs)
        features = {k: tf.cast(features[k], tf.int32) for k in INPUT_NAMES}
        return (features, batch["label"]) if with_labels else features

    ds = ds.map(_encode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return _finish(trim(ds))


def _trim_batch(batch: tuple, multiple: int, with_labels: bool):
    """Cut a batch's features to the longest row (by input_mask), rounded up to `multiple`."""
    cut = trim_to_longest(
        batch[0], multiple=multiple
    )  # elements are (features, labels) or (features,)
    return (cut, batch[1]) if with_labels else cut


def _finish(ds: tf.data.Dataset) -> tf.data.Dataset:
    options = tf.data.Options()
    options.deterministic = True
    # Every worker sees the full, identically shuffled set and keeps its share of each batch.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)
