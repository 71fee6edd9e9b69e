"""Static shapes for XLA and TPU (`batches.train_batches(static_shapes=True)`, `fit_batches`):
lengths from a few buckets, a constant batch size with zero-weight filler rows (every example
once an epoch), each input pipeline's share of every global batch; in a subprocess with two
logical CPUs, the driver's XLA compilations (one per bucket hit) and `fit` under a 2-replica
MirroredStrategy on the distributed dataset (the same losses as on one device)."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.data.dynamic_padding import length_buckets
from keras_bert.training.batches import train_batches, uses_static_shapes
from keras_bert.training.families import ner
from tests.training.tiny_family import TinyArgs

HARNESS = pathlib.Path(__file__).with_name("_static_shapes_harness.py")
REPO = pathlib.Path(__file__).resolve().parents[2]


def _rows(lengths, seq):
    """Row i: `lengths[i]` real tokens (ids 10 + i), label i."""
    ids = np.zeros((len(lengths), seq), np.int32)
    for i, n in enumerate(lengths):
        ids[i, :n] = 10 + i
    features = {
        "input_word_ids": ids,
        "input_mask": (ids > 0).astype(np.int32),
        "input_type_ids": np.zeros_like(ids),
    }
    return features, np.arange(len(lengths), dtype=np.int32)


def test_length_buckets_are_the_quarters_of_the_width_rounded_to_the_multiple():
    assert length_buckets(128) == (32, 64, 96, 128)
    assert length_buckets(384, multiple=128) == (128, 256, 384)
    assert length_buckets(8) == (2, 4, 6, 8)
    assert length_buckets(5) == (2, 3, 4, 5)  # ceil(5 k / 4), at least 2
    assert length_buckets(100, multiple=64) == (64, 100)  # never past the width


def test_static_shapes_under_tpu_or_jit_only():
    assert not uses_static_shapes(TinyArgs(output_dir="x"))
    assert uses_static_shapes(TinyArgs(output_dir="x", jit_compile=True))
    assert uses_static_shapes(TinyArgs(output_dir="x", strategy="tpu"))


def test_last_batch_is_filled_with_zero_weight_rows_and_lengths_are_buckets():
    lengths = [3, 9, 16, 5, 2, 12, 7, 4, 11, 6]
    features, labels = _rows(lengths, 16)
    ds = train_batches(
        features, labels, 4, seed=3, epoch=0, skip=0, group_by_length=False, static_shapes=True
    )
    x_spec, y_spec, w_spec = ds.element_spec
    assert x_spec["input_word_ids"].shape.as_list() == [4, None]  # static rows: drop_remainder-safe
    assert y_spec.shape.as_list() == [4] and w_spec.shape.as_list() == [4]
    assert w_spec.dtype == tf.float32
    batches = list(ds)
    assert len(batches) == 3  # 10 rows at batch 4: 3 steps, none dropped
    order = np.random.default_rng(3).permutation(10)
    seen, total = [], 0.0
    for b, (x, y, w) in enumerate(batches):
        rows = order[4 * b : 4 * b + 4]
        real = len(rows)
        assert w.numpy().tolist() == [1.0] * real + [0.0] * (4 - real)
        width = x["input_word_ids"].shape[1]
        longest = max(lengths[i] for i in rows)
        assert width == min(k for k in (4, 8, 12, 16) if k >= longest)  # smallest bucket
        assert y.numpy()[:real].tolist() == rows.tolist()
        for key in features:  # real rows cut to the bucket, filler rows all zero
            np.testing.assert_array_equal(x[key].numpy()[:real], features[key][rows, :width])
            assert not x[key].numpy()[real:].any()
        assert not y.numpy()[real:].any()
        seen += y.numpy()[w.numpy() > 0].tolist()
        total += float(w.numpy().sum())
    assert sorted(seen) == list(range(10)) and total == 10.0  # every row once, no filler counted
    # Resume: skip / take count batches as in the dynamic pipeline.
    again = list(
        train_batches(
            features, labels, 4, 3, 0, skip=1, take=1, group_by_length=False, static_shapes=True
        )
    )
    assert len(again) == 1 and again[0][1].numpy().tolist() == batches[1][1].numpy().tolist()


def test_per_position_labels_take_the_bucket_and_filler_rows_are_ignored():
    lengths = [7, 2, 5]
    features, _ = _rows(lengths, 8)
    labels = features["input_word_ids"] * 2  # one label per token (NER)
    (x, y, w), (x2, y2, w2) = list(
        train_batches(
            features,
            labels,
            2,
            seed=0,
            epoch=0,
            skip=0,
            group_by_length=True,
            per_position=True,
            static_shapes=True,
            label_padding=ner.FAMILY.label_padding,
        )
    )
    # One group sorted by length: rows of 7 and 5 tokens (bucket 8), then 2 tokens (bucket 2).
    assert x["input_word_ids"].shape == y.shape == (2, 8) and w.numpy().tolist() == [1.0, 1.0]
    assert x2["input_word_ids"].shape == y2.shape == (2, 2) and w2.numpy().tolist() == [1.0, 0.0]
    np.testing.assert_array_equal(y.numpy(), x["input_word_ids"].numpy() * 2)
    np.testing.assert_array_equal(y2.numpy(), [[22, 22], [-100, -100]])  # IGNORE_LABEL


def test_each_input_pipeline_keeps_its_half_of_every_global_batch():
    lengths = [3, 9, 16, 5, 2, 12, 7, 4, 11, 6]
    features, labels = _rows(lengths, 16)

    def pipeline(i):
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=i, num_replicas_in_sync=2
        )
        ds = train_batches(features, labels, 4, 3, 0, 0, static_shapes=True, input_context=context)
        assert ds.element_spec[1].shape.as_list() == [2]  # per-replica batch: 4 / 2 replicas
        return list(ds)

    global_batches = list(train_batches(features, labels, 4, 3, 0, 0, static_shapes=True))
    first, second = pipeline(0), pipeline(1)
    assert len(first) == len(second) == len(global_batches) == 3
    ids = {0: [], 1: []}
    for whole, *halves in zip(global_batches, first, second):
        for i, (x, y, w) in enumerate(halves):  # rows [2 i, 2 i + 2) of the global batch
            assert x["input_word_ids"].shape == (2, whole[0]["input_word_ids"].shape[1])
            np.testing.assert_array_equal(y.numpy(), whole[1].numpy()[2 * i : 2 * i + 2])
            np.testing.assert_array_equal(w.numpy(), whole[2].numpy()[2 * i : 2 * i + 2])
            ids[i] += y.numpy()[w.numpy() > 0].tolist()
    assert not set(ids[0]) & set(ids[1])  # disjoint
    assert sorted(ids[0] + ids[1]) == list(range(10))  # together every row, once
    assert len(ids[0]) == 6 and len(ids[1]) == 4  # the last batch's 2 real rows are pipeline 0's
    with pytest.raises(ValueError, match="divisible"):
        train_batches(
            features,
            labels,
            3,
            3,
            0,
            0,
            static_shapes=True,
            input_context=tf.distribute.InputContext(2, 0, 2),
        )


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """One subprocess (TF's device setup is per process) for the two tests below."""
    tmp = tmp_path_factory.mktemp("static_shapes")
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        TF_CPP_MIN_LOG_LEVEL="2",
        CUDA_VISIBLE_DEVICES="",
        XLA_FLAGS=f"--xla_dump_to={tmp / 'xla'} --xla_dump_hlo_module_re=.*one_step_on_data.*",
    )
    proc = subprocess.run(
        [sys.executable, str(HARNESS), str(tmp)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((tmp / "result.json").read_text()), tmp


@pytest.mark.slow
def test_the_driver_compiles_the_jit_train_step_once_per_bucket_hit(harness):
    result, tmp = harness
    # Every XLA compilation of the train step dumps one module (XLA_FLAGS=--xla_dump_to).
    modules = {
        p.name.split(".")[0]
        for p in (tmp / "xla").glob("*one_step_on_data*before_optimizations.txt")
    }
    hit, buckets = result["buckets_hit"], result["buckets"]
    assert buckets == [2, 4, 6, 8]  # the tiny family's rows are 8 tokens wide
    assert len(hit) == len(modules) <= len(buckets)
    assert result["tracing_count"] == 1  # one trace over [8, None]; XLA compiles per length
    assert result["dynamic_widths"] > len(hit)  # what dynamic padding would have compiled
    assert result["steps"] == 6  # 48 rows at batch 8


@pytest.mark.slow
def test_fit_trains_on_the_distributed_batches_of_two_replicas_as_on_one_device(harness):
    result, _ = harness
    single, mirrored = np.array(result["single"]), np.array(result["mirrored"])
    assert result["replicas"] == 2 and len(single) == len(mirrored) == 3  # 10 rows at batch 4
    np.testing.assert_allclose(mirrored, single, rtol=1e-4)
    assert np.all(np.isfinite(single))
