"""Every randomly initialised weight of a new encoder draws its own values (`truncated_normal`)."""

import itertools

import keras
import numpy as np

from tests.tiny import tiny_config, tiny_encoder


def random_weights(seed):
    keras.utils.set_random_seed(seed)
    encoder = tiny_encoder(num_layers=2)
    encoder({"input_word_ids": np.array([[2, 3]])})
    # Biases start at 0 and LayerNorm at 1 / 0: only the drawn weights.
    return {
        w.path.split("/", 1)[1]: w.numpy().reshape(-1)  # without the model's unique name
        for w in encoder.weights
        if w.path.endswith(("kernel", "embeddings"))
    }


def test_no_two_weights_of_a_new_encoder_share_their_values():
    weights = random_weights(7)
    # 3 tables (word, position, type), the pooler, and six kernels a block (query, key, value,
    # attention output, intermediate, output).
    assert len(weights) == 3 + 1 + 6 * 2
    for (a, x), (b, y) in itertools.combinations(weights.items(), 2):
        n = min(x.size, y.size)
        assert not np.array_equal(x[:n], y[:n]), (a, b)
    for name, x in weights.items():
        # Truncated at two standard deviations (google-research/bert's tf.truncated_normal).
        assert np.all(np.abs(x) <= 2 * tiny_config().initializer_range), name


def test_the_values_are_reproducible_under_one_seed():
    first, again, other = random_weights(7), random_weights(7), random_weights(8)
    assert all(np.array_equal(first[k], again[k]) for k in first)
    assert not any(np.array_equal(first[k], other[k]) for k in first)
