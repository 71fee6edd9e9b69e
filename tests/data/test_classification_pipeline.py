"""tf.data classification pipeline: exact packed ids, labels, seeded determinism, resume skipping."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.data.classification_pipeline import encode_labels, make_classification_dataset
from keras_bert.data.glue import InputExample
from keras_bert.tokenization import BertPreprocessor


@pytest.fixture(scope="module")
def preprocessor(uncased_vocab):
    return BertPreprocessor(uncased_vocab, do_lower_case=True, max_seq_length=8)


@pytest.mark.slow
def test_single_and_pair_packing_exact_ids(preprocessor):
    single = [InputExample("1", "Hello world", None, "pos"), InputExample("2", "", None, "neg")]
    features, labels = next(
        iter(make_classification_dataset(single, preprocessor, ["neg", "pos"], batch_size=2))
    )
    np.testing.assert_array_equal(
        features["input_word_ids"],
        [[101, 7592, 2088, 102, 0, 0, 0, 0], [101, 102, 0, 0, 0, 0, 0, 0]],
    )
    np.testing.assert_array_equal(
        features["input_mask"], [[1, 1, 1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0]]
    )
    np.testing.assert_array_equal(labels, [1, 0])
    assert features["input_word_ids"].dtype == "int32" and labels.dtype == "int32"
    pair = [InputExample("1", "hello", "world", 2.5)]
    features, labels = next(
        iter(make_classification_dataset(pair, preprocessor, is_regression=True))
    )
    np.testing.assert_array_equal(
        features["input_word_ids"], [[101, 7592, 102, 2088, 102, 0, 0, 0]]
    )
    np.testing.assert_array_equal(features["input_type_ids"], [[0, 0, 0, 1, 1, 0, 0, 0]])
    assert labels.dtype == "float32" and float(labels[0]) == 2.5


def _cheap_preprocessor(texts):
    """Stands in for BertPreprocessor where only the example order matters (tracing it is slow)."""
    lengths = tf.strings.length(texts)[:, None]
    return {
        "input_word_ids": lengths,
        "input_mask": tf.ones_like(lengths),
        "input_type_ids": tf.zeros_like(lengths),
    }


def _order(preprocessor, **kw):
    examples = [InputExample(str(i), f"word {i}", None, float(i)) for i in range(20)]
    ds = make_classification_dataset(
        examples, preprocessor, is_regression=True, batch_size=4, drop_remainder=True, **kw
    )
    return [labels.numpy().astype(int).tolist() for _, labels in ds]


def test_seeded_shuffle_is_deterministic_and_skip_resumes():
    preprocessor = _cheap_preprocessor
    a = _order(preprocessor, shuffle=True, seed=3)
    assert a == _order(preprocessor, shuffle=True, seed=3)
    assert sorted(sum(a, [])) == list(range(20)) and len(a) == 5
    assert a != _order(preprocessor, shuffle=True, seed=4)
    assert a != _order(preprocessor, shuffle=True, seed=3, epoch=1)
    assert _order(preprocessor, shuffle=True, seed=3, skip_batches=2) == a[2:]
    assert _order(preprocessor) == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
        [8, 9, 10, 11],
        [12, 13, 14, 15],
        [16, 17, 18, 19],
    ]


def test_errors():
    with pytest.raises(ValueError, match="label 'maybe' is not one of"):
        encode_labels([InputExample("dev-3", "x", None, "maybe")], ["no", "yes"], False)
    with pytest.raises(ValueError, match="example test-2 has no label"):
        encode_labels([InputExample("test-2", "x", None, None)], None, True)
    with pytest.raises(ValueError, match="no examples"):
        make_classification_dataset([], None)


def _encoded(lengths, seq=16):
    from keras_bert.data.classification_pipeline import EncodedExamples

    n = len(lengths)
    mask = np.zeros((n, seq), np.int32)
    for i, length in enumerate(lengths):
        mask[i, :length] = 1
    ids = np.where(mask > 0, 1000 + np.arange(seq)[None, :], 0).astype(np.int32)
    features = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(mask)}
    return EncodedExamples(features, np.arange(n, dtype=np.int32))


def test_dynamic_padding_cuts_each_batch_to_its_longest_row_rounded_up():
    encoded = _encoded([3, 5, 2, 9, 1, 2, 16, 1])
    widths = [
        f["input_word_ids"].shape[1]
        for f, _ in make_classification_dataset(encoded, None, batch_size=2, pad_to_multiple_of=8)
    ]
    assert widths == [8, 16, 8, 16]  # longest 5 -> 8, 9 -> 16, 2 -> 8, 16 -> 16 (max_seq_length)
    widths = [
        f["input_word_ids"].shape[1]
        for f in make_classification_dataset(
            encoded, None, batch_size=3, pad_to_multiple_of=1, with_labels=False
        )
    ]
    assert widths == [5, 9, 16]
    full = next(iter(make_classification_dataset(encoded, None, batch_size=2)))[0]
    cut = next(
        iter(make_classification_dataset(encoded, None, batch_size=2, pad_to_multiple_of=8))
    )[0]
    assert full["input_word_ids"].shape[1] == 16
    np.testing.assert_array_equal(cut["input_word_ids"], full["input_word_ids"][:, :8])
    with pytest.raises(ValueError, match="pad_to_multiple_of must be >= 1"):
        make_classification_dataset(encoded, None, pad_to_multiple_of=0)


def test_length_grouped_order_batches_neighbours_in_length():
    from keras_bert.data.dynamic_padding import length_grouped_order

    lengths = np.array([7, 1, 12, 4, 9, 2, 11, 5, 3, 10, 6, 8, 13])  # 13 distinct lengths
    # One group holds every row: the sorted order cut into batches of 3, the batches shuffled and
    # the short one (the shortest row) last.
    order = length_grouped_order(lengths, batch_size=3, seed=5)
    assert sorted(order.tolist()) == list(range(13)) and order.dtype == np.int64
    batches = [sorted(lengths[order[i : i + 3]].tolist()) for i in range(0, 13, 3)]
    assert batches[-1] == [1]
    assert sorted(batches[:-1]) == [[2, 3, 4], [5, 6, 7], [8, 9, 10], [11, 12, 13]]
    np.testing.assert_array_equal(order, length_grouped_order(lengths, 3, seed=5))
    assert not np.array_equal(order, length_grouped_order(lengths, 3, seed=6))
    # Groups of one batch sort inside random batches only: same rows per batch as no grouping.
    plain = np.random.default_rng(5).permutation(13)
    ones = length_grouped_order(lengths, 3, seed=5, megabatch_batches=1)
    assert sorted(sorted(ones[i : i + 3].tolist()) for i in range(0, 12, 3)) == sorted(
        sorted(plain[i : i + 3].tolist()) for i in range(0, 12, 3)
    )
    assert ones[-1] == plain[-1]
    with pytest.raises(ValueError, match="batch_size and megabatch_batches must be >= 1"):
        length_grouped_order(lengths, 0, seed=1)


def test_group_by_length_cuts_padding_and_keeps_every_row_once():
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 17, size=64)
    encoded = _encoded(lengths.tolist())

    def run(group, epoch=0, skip=0):
        ds = make_classification_dataset(
            encoded,
            None,
            batch_size=8,
            shuffle=True,
            seed=1,
            epoch=epoch,
            skip_batches=skip,
            pad_to_multiple_of=1,
            group_by_length=group,
        )
        return [(f["input_word_ids"].shape[1], y.numpy().tolist()) for f, y in ds]

    grouped, plain = run(True), run(False)
    assert sorted(sum((y for _, y in grouped), [])) == list(range(64))
    # Each batch is as wide as its longest row; grouped, the widths are the sorted rows' maxima.
    by_rank = np.sort(lengths)[::-1]
    assert sorted(w for w, _ in grouped) == sorted(by_rank[::8].tolist())
    assert sum(w for w, _ in grouped) < sum(w for w, _ in plain)
    for width, ids in grouped:
        assert width == lengths[ids].max()
    assert run(True, skip=3) == grouped[3:]
    assert run(True, epoch=1) != grouped
    with pytest.raises(ValueError, match="group_by_length orders a shuffled epoch"):
        make_classification_dataset(encoded, None, group_by_length=True)


def test_dynamic_padding_leaves_classifier_outputs_unchanged():
    import keras
    from keras_bert.tasks import TextClassifier
    from tests.tiny import tiny_encoder

    keras.utils.set_random_seed(0)
    for pooling in ("cls", "mean"):
        encoder = tiny_encoder(
            vocab_size=1100,
            hidden_size=32,
            num_layers=2,
            intermediate_size=64,
            max_sequence_length=16,
        )
        model = TextClassifier(encoder, 3, pooling=pooling)
        encoded = _encoded([3, 5, 2, 9, 7, 1])
        outs = {}
        for pad in (None, 4):
            ds = make_classification_dataset(
                encoded, None, batch_size=3, with_labels=False, pad_to_multiple_of=pad
            )
            outs[pad] = np.concatenate([model(f, training=False).numpy() for f in ds])
        np.testing.assert_allclose(outs[4], outs[None], atol=1e-5)
