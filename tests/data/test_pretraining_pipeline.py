"""TFRecord round trip, corrupt shards, dynamic masking and per-replica input of the pretraining pipeline."""

import json
import random

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.data import pretraining_data as pd
from keras_bert.data import pretraining_pipeline as pp

SEQ, PRED = 32, 5
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(40)] + ["##s"]
IDS = {t: i for i, t in enumerate(VOCAB)}


def _instances(n_docs=6, seed=0, dupe_factor=2):
    rng = random.Random(seed)
    docs = [
        [[f"w{rng.randrange(40)}" for _ in range(rng.randint(3, 9))] for _ in range(6)]
        for _ in range(n_docs)
    ]
    return pd.create_training_instances(
        docs, VOCAB, SEQ, dupe_factor=dupe_factor, max_predictions_per_seq=PRED, random_seed=seed
    )


def _write(tmp_path, instances, shards=2):
    paths = pd.shard_paths(str(tmp_path / "pt.tfrecord"), shards)
    pd.write_instances(instances, IDS, paths, SEQ, PRED)
    return paths


def test_record_round_trip_equals_instance(tmp_path):
    instances = _instances()
    paths = _write(tmp_path, instances, shards=1)
    ds = pp.make_pretraining_dataset(
        paths, batch_size=1, max_seq_length=SEQ, max_predictions_per_seq=PRED, is_training=False
    )
    got = list(ds.as_numpy_iterator())
    assert len(got) == len(instances)
    for inst, batch in zip(instances, got):
        n, p = len(inst.tokens), len(inst.masked_lm_positions)
        row = {k: v[0] for k, v in batch.items()}
        assert (
            row["input_word_ids"].dtype == np.int32 and row["masked_lm_weights"].dtype == np.float32
        )
        assert [VOCAB[i] for i in row["input_word_ids"][:n]] == inst.tokens
        assert not row["input_word_ids"][n:].any() and row["input_mask"].tolist() == [1] * n + [
            0
        ] * (SEQ - n)
        assert row["input_type_ids"][:n].tolist() == inst.segment_ids
        assert row["masked_lm_positions"].tolist() == inst.masked_lm_positions + [0] * (PRED - p)
        assert [VOCAB[i] for i in row["masked_lm_ids"][:p]] == inst.masked_lm_labels
        assert row["masked_lm_weights"].tolist() == [1.0] * p + [0.0] * (PRED - p)
        assert row["next_sentence_labels"].tolist() == [int(inst.is_random_next)]


def test_same_seed_gives_identical_bytes(tmp_path):
    a = _write(tmp_path / "a", _instances(seed=3))
    b = _write(tmp_path / "b", _instances(seed=3))
    c = _write(tmp_path / "c", _instances(seed=4))
    assert [open(p, "rb").read() for p in a] == [open(p, "rb").read() for p in b]
    assert [open(p, "rb").read() for p in a] != [open(p, "rb").read() for p in c]


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_damaged_shard_is_a_clear_error_naming_it(tmp_path, damage):
    paths = _write(tmp_path, _instances())
    data = bytearray(open(paths[1], "rb").read())
    if damage == "truncate":
        data = data[: len(data) - 7]
    else:
        data[len(data) // 2] ^= 0xFF
    open(paths[1], "wb").write(bytes(data))
    with pytest.raises(
        pp.CorruptShardError, match=r"pt\.tfrecord-00001-of-00002.*(truncated|corrupt)"
    ):
        pp.make_pretraining_dataset(str(tmp_path / "pt.tfrecord-*"), 4, SEQ, PRED)
    assert pp.verify_shards(paths[:1]) == [len(_instances()) // 2 + len(_instances()) % 2]


def test_missing_shards_are_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no pretraining shard"):
        pp.make_pretraining_dataset(str(tmp_path / "nothing-*"), 4, SEQ, PRED)


def _summary(path, shards, seq=SEQ, pred=PRED):
    """A `.summary.json` as create_pretraining_data writes it (the fields read here)."""
    record = {
        "config": {"max_seq_length": seq, "max_predictions_per_seq": pred},
        "summary": {"shards": {name: 1 for name in shards}},
    }
    path.write_text(json.dumps(record))


def test_what_the_records_were_made_with_is_their_summary_else_a_record(tmp_path):
    paths = _write(tmp_path, _instances())  # pt.tfrecord-0000{0,1}-of-00002, no summary
    assert pp.records_made_with(paths) == {(SEQ, PRED): f"a record of {paths[0]}"}
    names = ["pt.tfrecord-00000-of-00002", "pt.tfrecord-00001-of-00002"]
    _summary(tmp_path / "pt.tfrecord.summary.json", names, seq=128, pred=20)  # the summary says
    assert pp.records_made_with(paths) == {(128, 20): "their .summary.json"}
    _summary(tmp_path / "pt.tfrecord.summary.json", names[:1], seq=128, pred=20)
    assert pp.records_made_with(paths) == {  # a summary speaks only for the shards it lists
        (128, 20): "their .summary.json",
        (SEQ, PRED): f"a record of {paths[1]}",
    }
    (tmp_path / "pt.tfrecord.summary.json").write_text("not json")
    assert pp.records_made_with(paths) == {(SEQ, PRED): f"a record of {paths[0]}"}
    # One --output_file: the summary is named after it.
    one = _write(tmp_path / "one", _instances(), shards=1)
    _summary(tmp_path / "one" / "pt.tfrecord.summary.json", ["pt.tfrecord"], seq=64, pred=9)
    assert pp.records_made_with(one) == {(64, 9): "their .summary.json"}


def test_records_that_say_nothing_give_nothing(tmp_path):
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    other = str(tmp_path / "other.tfrecord")
    with tf.io.TFRecordWriter(other) as writer:
        writer.write(b"not an Example")
        writer.write(tf.train.Example().SerializeToString())
    foreign = str(tmp_path / "foreign.tfrecord")
    with tf.io.TFRecordWriter(foreign) as writer:
        writer.write(tf.train.Example().SerializeToString())
    truncated = tmp_path / "truncated.tfrecord"
    truncated.write_bytes(open(_write(tmp_path, _instances(), shards=1)[0], "rb").read()[:7])
    assert pp.records_made_with([str(empty), other, foreign, str(truncated)]) == {}


def test_dynamic_masking_redraws_each_epoch(tmp_path):
    instances = _instances(dupe_factor=1)
    paths = _write(tmp_path, instances, shards=1)
    ds = pp.make_pretraining_dataset(
        paths,
        batch_size=len(instances),
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED,
        is_training=False,
        seed=11,
        dynamic_masking=True,
        vocab_size=len(VOCAB),
        mask_token_id=4,
        cls_token_id=2,
        sep_token_id=3,
        masked_lm_prob=0.15,
    )
    epoch1, epoch2 = list(ds.as_numpy_iterator()), list(ds.as_numpy_iterator())
    assert not np.array_equal(epoch1[0]["masked_lm_positions"], epoch2[0]["masked_lm_positions"])
    for batch in (epoch1[0], epoch2[0]):
        for row, inst in enumerate(instances):
            original = [IDS[t] for t in _orig(inst)]
            n = len(original)
            k = min(PRED, max(1, int(np.floor((n - 3) * 0.15 + 0.5))))
            w = batch["masked_lm_weights"][row]
            pos = batch["masked_lm_positions"][row][:k]
            assert w.tolist() == [1.0] * k + [0.0] * (PRED - k)
            assert pos.tolist() == sorted(pos.tolist()) and len(set(pos.tolist())) == k
            specials = {i for i, t in enumerate(original) if t in (IDS["[CLS]"], IDS["[SEP]"])}
            assert not specials & set(pos.tolist())
            assert batch["masked_lm_ids"][row][:k].tolist() == [original[p] for p in pos]
            ids = batch["input_word_ids"][row]
            untouched = [i for i in range(n) if i not in set(pos.tolist())]
            assert [ids[i] for i in untouched] == [original[i] for i in untouched]


def _orig(inst):
    tokens = list(inst.tokens)
    for p, label in zip(inst.masked_lm_positions, inst.masked_lm_labels):
        tokens[p] = label
    return tokens


def test_dynamic_mask_split_is_80_10_10():
    ids = tf.constant([2] + [10 + i % 30 for i in range(2000)] + [3], tf.int32)
    f = {
        "input_word_ids": ids,
        "input_mask": tf.ones_like(ids),
        "input_type_ids": tf.zeros_like(ids),
        "masked_lm_positions": tf.zeros([300], tf.int32),
        "masked_lm_ids": tf.zeros([300], tf.int32),
        "masked_lm_weights": tf.zeros([300], tf.float32),
        "next_sentence_labels": tf.constant([0]),
    }
    out = pp.dynamic_mask(
        f,
        tf.constant([1, 2]),
        vocab_size=30000,
        mask_token_id=4,
        cls_token_id=2,
        sep_token_id=3,
        masked_lm_prob=0.15,
    )
    pos, labels = out["masked_lm_positions"].numpy(), out["masked_lm_ids"].numpy()
    new = out["input_word_ids"].numpy()[pos]
    assert out["masked_lm_weights"].numpy().sum() == 300  # round(2000 * 0.15) = 300
    mask, keep = np.mean(new == 4), np.mean(new == labels)
    assert abs(mask - 0.8) < 0.06 and abs(keep - 0.1) < 0.05 and abs(1 - mask - keep - 0.1) < 0.05


def test_per_replica_batches_and_shard_split(tmp_path):
    paths = _write(tmp_path, _instances(), shards=2)
    ctx = tf.distribute.InputContext(
        num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2
    )
    ds = pp.make_pretraining_dataset(
        paths,
        batch_size=8,
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED,
        is_training=False,
        input_context=ctx,
        use_nsp=False,
    )
    batches = list(ds.as_numpy_iterator())
    assert batches[0]["input_word_ids"].shape == (4, SEQ)  # global 8 / 2 replicas
    assert "next_sentence_labels" not in batches[0]
    assert sum(len(b["input_word_ids"]) for b in batches) == pp.verify_shards(paths[1:])[0]
    # Under a strategy, Keras-style distribution of the global batch.
    strategy = tf.distribute.get_strategy()
    dist = strategy.distribute_datasets_from_function(
        lambda c: pp.make_pretraining_dataset(paths, 8, SEQ, PRED, input_context=c, seed=1)
    )
    first = next(iter(dist))
    assert first["input_word_ids"].shape == (8, SEQ)
