"""tf.data input for BERT pretraining: sharded TFRecords -> batches of feature dicts.

Reads the records written by `keras_bert.data.pretraining_data` (SPEC section 4 feature names):
interleaved shards, shuffle, optional dynamic masking (RoBERTa-style: masks drawn fresh each
epoch), batch, prefetch. Works under any `tf.distribute` strategy: pass the dataset to Keras
`fit` (which distributes it), or build per-replica batches with
`strategy.distribute_datasets_from_function(lambda ctx: make_pretraining_dataset(..., input_context=ctx))`
(each input pipeline reads its own subset of shards, batch = global batch / replicas).

Model Garden reference: `official/nlp/data/pretrain_dataloader.py`.
"""

from __future__ import annotations

import re
from typing import Sequence

import tensorflow as tf
from google.protobuf.message import DecodeError

from keras_bert import fileio
from keras_bert.config import INPUT_NAMES
from keras_bert.data.file_patterns import expand_file_patterns

INT_FEATURES = INPUT_NAMES
MLM_INT_FEATURES = ("masked_lm_positions", "masked_lm_ids")
# create_pretraining_data writes `<first --output_file>.summary.json` beside the records, last;
# with --num_shards > 1 the shards are `<output_file>-00000-of-0000N`.
SUMMARY_SUFFIX = ".summary.json"
_SHARD_NAME = re.compile(r"^(.*)-\d{5}-of-\d{5}$")


class CorruptShardError(ValueError):
    """A TFRecord shard that is truncated or fails its CRC check; the message names the file."""


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """`tf.io.parse_single_example` spec of one pretraining record (all fixed length)."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in INT_FEATURES}
    spec.update(
        {
            name: tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
            for name in MLM_INT_FEATURES
        }
    )
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32)
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def parse_record(serialized, max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """Parses one serialized record into model features.

    Returns:
        dict: the three model inputs int32 [T]; masked_lm_positions/ids int32 [P];
        masked_lm_weights float32 [P]; next_sentence_labels int32 [1].
    """
    ex = tf.io.parse_single_example(
        serialized, feature_spec(max_seq_length, max_predictions_per_seq)
    )
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in ex.items()}


def verify_shards(files: Sequence[str]) -> list[int]:
    """Reads every shard once (CRC-checked by TFRecordReader) and counts its records.

    Returns:
        list of int, records per file.

    Raises:
        FileNotFoundError: a missing file. CorruptShardError: a truncated or corrupt file, naming
        it and the TensorFlow error.
    """
    counts = []
    for path in files:
        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(f"pretraining shard not found: {path}")
        try:
            n = tf.data.TFRecordDataset(path).reduce(tf.constant(0, tf.int64), lambda c, _: c + 1)
        except tf.errors.DataLossError as e:
            raise CorruptShardError(
                f"pretraining shard {path} is truncated or corrupt ({e.message.strip()}); "
                "re-create it with recipes/create_pretraining_data.py"
            ) from None
        counts.append(int(n))
    return counts


def _summary_lengths(shard: str, read: dict) -> tuple[int, int] | None:
    """(max_seq_length, max_predictions_per_seq) of the `.summary.json` that create_pretraining_data
    wrote beside `shard` and that lists it, or None. `read`: summary path -> its lengths (or None),
    so a summary of many shards is read once."""
    match = _SHARD_NAME.match(shard)
    for path in [shard + SUMMARY_SUFFIX] + ([match.group(1) + SUMMARY_SUFFIX] if match else []):
        if path not in read:
            read[path] = None
            if fileio.isfile(path):
                try:
                    record = fileio.read_json(path)
                except ValueError:  # not a summary of ours: nothing said
                    continue
                read[path] = record if isinstance(record, dict) else None
        record = read[path]
        if record is None:
            continue
        config, summary = record.get("config"), record.get("summary")
        if not (isinstance(config, dict) and isinstance(summary, dict)):
            continue
        lengths = (config.get("max_seq_length"), config.get("max_predictions_per_seq"))
        listed = fileio.basename(shard) in (summary.get("shards") or {})
        if listed and all(isinstance(n, int) for n in lengths):
            return lengths
    return None


def _first_record_lengths(shard: str) -> tuple[int, int] | None:
    """(input_word_ids length, masked_lm_weights length) of the first record of `shard`, or None:
    an empty shard, one that is not readable (`verify_shards` names it) or not of pretraining
    records."""
    try:
        first = [raw.numpy() for raw in tf.data.TFRecordDataset(shard).take(1)]
        if not first:
            return None
        feature = tf.train.Example.FromString(first[0]).features.feature
    except (tf.errors.OpError, DecodeError):
        return None
    if "input_word_ids" not in feature or "masked_lm_weights" not in feature:
        return None
    return (
        len(feature["input_word_ids"].int64_list.value),
        len(feature["masked_lm_weights"].float_list.value),
    )


def records_made_with(files: Sequence[str]) -> dict[tuple[int, int], str]:
    """What the records of `files` were made with, as far as they say, without reading them all.

    Each shard's `.summary.json` (create_pretraining_data's, listing the shard) says it; for a
    shard without one (records made elsewhere), the feature lengths of its first record.

    Returns:
        (max_seq_length, max_predictions_per_seq) -> where that was read: "their .summary.json"
        or "a record of <shard>", the first such place; one entry when the shards agree, none
        when nothing says (empty or unreadable shards).
    """
    made, read = {}, {}
    for path in files:
        lengths = _summary_lengths(path, read)
        source = "their .summary.json"
        if lengths is None:
            lengths, source = _first_record_lengths(path), f"a record of {path}"
        if lengths is not None:
            made.setdefault(tuple(lengths), source)
    return made


def dynamic_mask(
    features: dict,
    seed,
    vocab_size: int,
    mask_token_id: int,
    cls_token_id: int,
    sep_token_id: int,
    masked_lm_prob: float = 0.15,
) -> dict:
    """Restores the original tokens of one record, then draws a fresh MLM mask (token level).

    Same rule as `pretraining_data.create_masked_lm_predictions` without whole words: n =
    real tokens other than [CLS]/[SEP]; predict min(P, max(1, round(n * masked_lm_prob)))
    positions chosen uniformly, ascending; each: 80% [MASK], 10% a uniform id in [0, vocab_size),
    10% unchanged. (`round` here is half-away-from-zero, Python's is half-to-even.)

    Args:
        features: one parsed record (unbatched; `parse_record` output).
        seed: int32/int64 Tensor [2], the stateless random seed of this element.

    Returns:
        features with input_word_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights
        replaced.
    """
    ids = features["input_word_ids"]
    num_pred = tf.shape(features["masked_lm_positions"])[0]
    # Undo the static mask, if any: put each label back at its position.
    valid = features["masked_lm_weights"] > 0
    pos = tf.boolean_mask(features["masked_lm_positions"], valid)
    orig = tf.tensor_scatter_nd_update(
        ids, pos[:, None], tf.boolean_mask(features["masked_lm_ids"], valid)
    )
    candidate = (features["input_mask"] > 0) & (orig != cls_token_id) & (orig != sep_token_id)
    n = tf.reduce_sum(tf.cast(candidate, tf.int32))
    k = tf.minimum(
        num_pred,
        tf.maximum(1, tf.cast(tf.round(tf.cast(n, tf.float32) * masked_lm_prob), tf.int32)),
    )
    k = tf.minimum(k, n)
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 3)
    score = tf.random.stateless_uniform(tf.shape(orig), seeds[0])
    score = tf.where(candidate, score, -1.0)
    chosen = tf.sort(tf.math.top_k(score, k=k).indices)
    u = tf.random.stateless_uniform([k], seeds[1])
    random_ids = tf.random.stateless_uniform(
        [k], seeds[2], minval=0, maxval=vocab_size, dtype=tf.int32
    )
    labels = tf.gather(orig, chosen)
    new = tf.where(u < 0.8, mask_token_id, tf.where(u < 0.9, random_ids, labels))
    out = dict(features)
    out["input_word_ids"] = tf.tensor_scatter_nd_update(orig, chosen[:, None], new)
    pad = [[0, num_pred - k]]
    out["masked_lm_positions"] = tf.pad(chosen, pad)
    out["masked_lm_ids"] = tf.pad(labels, pad)
    out["masked_lm_weights"] = tf.pad(tf.ones([k], tf.float32), pad)
    return out


def make_pretraining_dataset(
    input_files: Sequence[str] | str,
    batch_size: int,
    max_seq_length: int,
    max_predictions_per_seq: int,
    is_training: bool = True,
    shuffle_buffer: int = 10000,
    seed: int | None = None,
    dynamic_masking: bool = False,
    vocab_size: int | None = None,
    mask_token_id: int = 103,
    cls_token_id: int = 101,
    sep_token_id: int = 102,
    masked_lm_prob: float = 0.15,
    use_nsp: bool = True,
    verify: bool = True,
    input_context: tf.distribute.InputContext | None = None,
    cycle_length: int = 8,
) -> tf.data.Dataset:
    """Builds the pretraining input pipeline.

    Args:
        input_files: paths or glob patterns (list, or one comma-separated str).
        batch_size: int. Global batch size; with `input_context` the per-replica batch
            `input_context.get_per_replica_batch_size(batch_size)` is used and shards are split
            between input pipelines.
        is_training: bool. Repeat forever, shuffle files and records, drop the last partial batch.
        seed: optional int; makes shuffling and dynamic masks reproducible.
        dynamic_masking: bool. Re-mask every record each epoch (`dynamic_mask`); needs
            `vocab_size` and the [MASK]/[CLS]/[SEP] ids of the vocabulary (defaults: BERT
            uncased 103/101/102).
        use_nsp: bool. False drops `next_sentence_labels` (the --no_nsp ablation).
        verify: bool. Read each shard once up front (`verify_shards`) so a truncated or corrupt
            shard fails here with a `CorruptShardError` naming it, instead of mid-training.

    Returns:
        tf.data.Dataset of dicts: input_word_ids/input_mask/input_type_ids int32 [B, T],
        masked_lm_positions/masked_lm_ids int32 [B, P], masked_lm_weights float32 [B, P],
        next_sentence_labels int32 [B, 1] (unless use_nsp=False).

    Raises:
        FileNotFoundError: no file matches. CorruptShardError: see `verify`. ValueError: bad args.
    """
    files = sorted(expand_file_patterns(input_files, what="pretraining shard"))
    if dynamic_masking and not vocab_size:
        raise ValueError("dynamic_masking needs vocab_size")
    if verify:
        verify_shards(files)
    if input_context is not None and input_context.num_input_pipelines > 1:
        if len(files) < input_context.num_input_pipelines:
            raise ValueError(
                f"{len(files)} shards cannot be split between "
                f"{input_context.num_input_pipelines} input pipelines"
            )
        files = files[input_context.input_pipeline_id :: input_context.num_input_pipelines]
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)

    ds = tf.data.Dataset.from_tensor_slices(files)
    if is_training:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(cycle_length, len(files)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=seed is not None or not is_training,
    )
    if is_training:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    ds = ds.map(
        lambda r: parse_record(r, max_seq_length, max_predictions_per_seq),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    if dynamic_masking:
        # Dataset.random with rerandomize_each_iteration gives a fresh seed stream per epoch.
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
        ds = tf.data.Dataset.zip(ds, seeds).map(
            lambda f, s: dynamic_mask(
                f,
                tf.stack([s, tf.constant(0, tf.int64)]),
                vocab_size,
                mask_token_id,
                cls_token_id,
                sep_token_id,
                masked_lm_prob,
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    if not use_nsp:
        ds = ds.map(lambda f: {k: v for k, v in f.items() if k != "next_sentence_labels"})
    ds = ds.batch(batch_size, drop_remainder=is_training)
    return ds.prefetch(tf.data.AUTOTUNE)
