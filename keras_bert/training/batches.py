"""What `fit` trains on: how many batches and optimizer steps a run has (`Schedule`), and each
epoch's shuffled, length-grouped, dynamically padded batches of a family's training arrays
(`train_batches`), resumable at any batch; under --strategy=tpu and --jit_compile static shapes
instead (`uses_static_shapes`: a few length buckets, a constant batch size with zero-weight filler
rows), built once per input pipeline (`fit_batches`).
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import tensorflow as tf

from keras_bert.data.dynamic_padding import (
    fill_batch,
    length_buckets,
    length_grouped_order,
    trim_to_longest,
)
from keras_bert.training.args import TrainingArgs
from keras_bert.training.argument_set import Resolution

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Schedule:
    """Batches and optimizer steps of one run (sizes in global batches).

    Two units, each named: a *batch* is one training batch (the data position, what a resume
    skips); a *step* is one optimizer update, `accumulation` batches under
    --gradient_accumulation_steps. Every setting named `*_steps` (--save_checkpoints_steps,
    --log_steps, --min_train_steps, the learning-rate schedule's warmup and decay, the weight
    average) counts steps; `batches_of` and `steps_of` convert. A run is whole steps: batches
    that would end it without reaching an update are not trained (`of` says so).
    """

    steps_per_epoch: int  # batches of an epoch: ceil(examples / batch), the last partial one kept
    epochs: int  # fit calls (the last may be partial)
    total_batches: int  # batches trained: num_train_steps * accumulation
    num_train_steps: int  # optimizer updates
    num_train_epochs: float  # as run
    accumulation: int = 1  # batches per optimizer update

    def batches_of(self, steps: int) -> int:
        """The batches of `steps` optimizer updates."""
        return steps * self.accumulation

    def steps_of(self, batches: int) -> int:
        """The optimizer updates made after `batches` batches."""
        return batches // self.accumulation

    @classmethod
    def of(
        cls,
        args: TrainingArgs,
        num_examples: int,
        family_epochs: float,
        resolution: Resolution | None = None,
    ) -> "Schedule":
        """The epochs are `--num_train_epochs` when given (never changed); else the family's,
        raised to reach `--min_train_steps` optimizer steps (recorded in `resolution`).

        Raises ValueError when there is no training example, or when the epochs given hold
        fewer batches than one optimizer update takes."""
        if num_examples < 1:
            raise ValueError("no training examples")
        steps_per_epoch = -(-num_examples // args.train_batch_size)
        accumulation = args.gradient_accumulation_steps
        epochs = args.num_train_epochs
        if epochs is None:
            epochs = float(family_epochs)
            steps = max(1, round(steps_per_epoch * epochs)) // accumulation
            why = f"not given: the family's {epochs:g} epochs"
            if steps < max(args.min_train_steps, 1):
                wanted = max(args.min_train_steps, 1)
                epochs = float(-(-wanted * accumulation // steps_per_epoch))
                why = (
                    f"not given: {num_examples} examples give {steps} optimizer steps in "
                    f"{family_epochs:g} epochs, raised to {epochs:g} epochs to reach "
                    f"--min_train_steps={wanted}"
                )
                logger.info("--num_train_epochs %s", why)
            if resolution is not None:
                resolution.derive("num_train_epochs", epochs, why)
        batches = max(1, int(round(steps_per_epoch * epochs)))
        num_train_steps = batches // accumulation
        if num_train_steps < 1:
            raise ValueError(
                f"--num_train_epochs={epochs:g} of {num_examples} examples gives {batches} "
                f"batch{'es' if batches > 1 else ''} of {args.train_batch_size}, fewer than the "
                f"{accumulation} of one optimizer update (--gradient_accumulation_steps="
                f"{accumulation}): train more epochs or accumulate fewer batches"
            )
        left_out = batches - num_train_steps * accumulation
        if left_out:
            logger.warning(
                "the last %d of %d batches would end the run inside an optimizer update "
                "(--gradient_accumulation_steps=%d) and are not trained",
                left_out,
                batches,
                accumulation,
            )
        return cls(
            steps_per_epoch,
            max(1, int(np.ceil(epochs))),
            num_train_steps * accumulation,
            num_train_steps,
            float(epochs),
            accumulation,
        )


def uses_static_shapes(args: TrainingArgs) -> bool:
    """Whether training batches have static shapes (`train_batches(static_shapes=True)`): under
    --strategy=tpu and --jit_compile, where every new input shape is a new XLA compilation."""
    return args.strategy == "tpu" or bool(args.jit_compile)


def train_batches(
    features: dict,
    labels,
    batch_size: int,
    seed: int,
    epoch: int,
    skip: int,
    group_by_length: bool = True,
    pad_to_multiple_of: int = 0,
    per_position: bool = False,
    take: int | None = None,
    static_shapes: bool = False,
    input_context: tf.distribute.InputContext | None = None,
    label_padding: int = 0,
) -> tf.data.Dataset:
    """One training epoch of (features, labels) batches, resumable at any batch.

    The order is fixed by `seed + epoch` (`length_grouped_order` with group_by_length, an
    example's length being its longest row; else a seeded permutation); the last partial batch is
    kept; the first `skip` batches are dropped (resume), then at most `take` are kept (None: all).
    Each batch is cut to its longest row, rounded up to `pad_to_multiple_of` (0: no rounding),
    never below 2 tokens.

    Static shapes (`static_shapes`; the trainer sets it under --strategy=tpu and --jit_compile,
    `uses_static_shapes`), for XLA, where every new shape is a new compilation:
    - a batch's length is the smallest of `length_buckets(T, pad_to_multiple_of)` (the quarters
      of the arrays' width T = --max_seq_length, T always one) that holds its longest row, so an
      epoch has at most 4 shapes;
    - every batch has `batch_size` rows: the last short one is filled with zero rows
      (`fill_batch`; their labels `label_padding`), and the dataset yields (features, labels,
      sample_weight float32 [batch_size]): 1 for a real row, 0 for a filler, so each example is
      trained on exactly once an epoch and none is dropped (the last batch's mean loss is over
      `batch_size` rows, so its examples weigh as much as any other batch's);
    - with `input_context` (from `strategy.distribute_datasets_from_function`, see
      `fit_batches`), every input pipeline builds the same global batches (the length is the
      global batch's) and keeps only its share of each: pipeline i of n takes rows
      [i * B / n, (i + 1) * B / n), in batches of `get_per_replica_batch_size(batch_size)` rows.

    Args:
        features: dict of int32 numpy [N, ..., T] with `input_mask`.
        labels: numpy [N] or [N, K], or a dict of numpy [N] (SQuAD's start / end positions).
        batch_size: the global batch size (examples).
        per_position: labels are [N, T], one per token, and are cut with the batch (NER).
        label_padding: the label of a static-shape batch's filler rows (`Family.label_padding`).

    Raises:
        ValueError: with `input_context`, batch_size not divisible by the replicas in sync.
    """
    mask = np.asarray(features["input_mask"])
    n = len(mask)
    if group_by_length:
        lengths = (mask.reshape(n, -1, mask.shape[-1]) > 0).sum(-1).max(-1)
        order = length_grouped_order(lengths, batch_size, seed + epoch)
    else:
        order = np.random.default_rng(seed + epoch).permutation(n)
    labels_in_order = tf.nest.map_structure(lambda a: np.asarray(a)[order], labels)
    ds = tf.data.Dataset.from_tensor_slices(
        ({k: np.asarray(v)[order] for k, v in features.items()}, labels_in_order)
    )
    ds = ds.batch(batch_size).skip(skip)
    if take is not None:
        ds = ds.take(take)
    multiple = max(1, pad_to_multiple_of)
    buckets = length_buckets(mask.shape[-1], multiple) if static_shapes else None

    def trim(x, y):
        if not per_position:
            x = trim_to_longest(x, multiple=multiple, minimum=2, buckets=buckets)
        else:
            cut = trim_to_longest({**x, "labels": y}, multiple=multiple, minimum=2, buckets=buckets)
            x, y = {k: v for k, v in cut.items() if k != "labels"}, cut["labels"]
        if not static_shapes:
            return x, y
        (x, y), weights = fill_batch((x, y), batch_size)
        if label_padding:  # e.g. NER: filler rows' tokens ignored, as padding is (not label 0)
            y = _fill_labels(y, weights, label_padding)
        return x, y, weights

    options = tf.data.Options()
    options.deterministic = True
    # Every worker sees the full, identically ordered set and keeps its share of each batch.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    ds = ds.map(trim)
    if input_context is not None:
        per_replica = input_context.get_per_replica_batch_size(batch_size)
        rows = batch_size // input_context.num_input_pipelines
        first = input_context.input_pipeline_id * rows

        def share(*batch):
            return tf.nest.map_structure(lambda v: v[first : first + rows], batch)

        ds = ds.map(share).rebatch(per_replica, drop_remainder=True)
    return ds.with_options(options).prefetch(2)


def fit_batches(strategy, static_shapes: bool, **kwargs):
    """What `fit` trains on for one epoch: `train_batches(**kwargs)`; with static shapes the
    same batches built once per input pipeline by `strategy.distribute_datasets_from_function`
    (each pipeline keeps its share of every global batch; Keras `fit` takes the distributed
    dataset as it is, without distributing it again)."""
    if not static_shapes:
        return train_batches(**kwargs)
    return strategy.distribute_datasets_from_function(
        lambda context: train_batches(**kwargs, static_shapes=True, input_context=context)
    )


def _fill_labels(labels, weights, value: int):
    """`labels` (nested Tensors [B, ...]) with the rows of weight 0 (`fill_batch`'s filler rows)
    set to `value`."""

    def fill(t):
        real = tf.reshape(weights > 0, [-1] + [1] * (t.shape.rank - 1))
        return tf.where(real, t, tf.cast(value, t.dtype))

    return tf.nest.map_structure(fill, labels)
