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
    features, labels = next(iter(make_classification_dataset(single, preprocessor, ["neg", "pos"], batch_size=2)))
    np.testing.assert_array_equal(features["input_word_ids"], [[101, 7592, 2088, 102, 0, 0, 0, 0],
                                                               [101, 102, 0, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(features["input_mask"], [[1, 1, 1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(labels, [1, 0])
    assert features["input_word_ids"].dtype == "int32" and labels.dtype == "int32"
    pair = [InputExample("1", "hello", "world", 2.5)]
    features, labels = next(iter(make_classification_dataset(pair, preprocessor, is_regression=True)))
    np.testing.assert_array_equal(features["input_word_ids"], [[101, 7592, 102, 2088, 102, 0, 0, 0]])
    np.testing.assert_array_equal(features["input_type_ids"], [[0, 0, 0, 1, 1, 0, 0, 0]])
    assert labels.dtype == "float32" and float(labels[0]) == 2.5


def _cheap_preprocessor(texts):
    """Stands in for BertPreprocessor where only the example order matters (tracing it is slow)."""
    lengths = tf.strings.length(texts)[:, None]
    return {"input_word_ids": lengths, "input_mask": tf.ones_like(lengths), "input_type_ids": tf.zeros_like(lengths)}


def _order(preprocessor, **kw):
    examples = [InputExample(str(i), f"word {i}", None, float(i)) for i in range(20)]
    ds = make_classification_dataset(examples, preprocessor, is_regression=True, batch_size=4,
                                     drop_remainder=True, **kw)
    return [labels.numpy().astype(int).tolist() for _, labels in ds]


def test_seeded_shuffle_is_deterministic_and_skip_resumes():
    preprocessor = _cheap_preprocessor
    a = _order(preprocessor, shuffle=True, seed=3)
    assert a == _order(preprocessor, shuffle=True, seed=3)
    assert sorted(sum(a, [])) == list(range(20)) and len(a) == 5
    assert a != _order(preprocessor, shuffle=True, seed=4)
    assert a != _order(preprocessor, shuffle=True, seed=3, epoch=1)
    assert _order(preprocessor, shuffle=True, seed=3, skip_batches=2) == a[2:]
    assert _order(preprocessor) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15], [16, 17, 18, 19]]


def test_errors():
    with pytest.raises(ValueError, match="label 'maybe' is not one of"):
        encode_labels([InputExample("dev-3", "x", None, "maybe")], ["no", "yes"], False)
    with pytest.raises(ValueError, match="example test-2 has no label"):
        encode_labels([InputExample("test-2", "x", None, None)], None, True)
    with pytest.raises(ValueError, match="no examples"):
        make_classification_dataset([], None)
