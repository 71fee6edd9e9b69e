"""The initializer of BERT's weights, one instance per variable."""

import keras


def truncated_normal(stddev: float) -> keras.initializers.TruncatedNormal:
    """A new `TruncatedNormal(stddev)` (google-research/bert's `create_initializer`), for one
    variable.

    An unseeded Keras 3 initializer draws its seed once, when it is made, so one instance shared by
    several variables gives each the same values (the flattened prefix of the longest): a block
    built that way starts with query = key = value, and position and type embeddings equal to the
    first rows of the word embeddings. Each variable takes its own instance; under
    `keras.utils.set_random_seed` the values are still reproducible.
    """
    return keras.initializers.TruncatedNormal(stddev=stddev)
