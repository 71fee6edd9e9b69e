"""Tiny models shared by the tests: one place for the small encoder config most tests build.

`tiny_config()` is a 1-layer, H=8 BERT over a 23-piece vocabulary; every field can be overridden
(`tiny_config(vocab_size=30522, max_sequence_length=24)`). `tiny_encoder(**overrides)` builds the
BertEncoder of that config.
"""

import keras_bert

TINY = dict(
    vocab_size=23,
    hidden_size=8,
    num_layers=1,
    num_heads=2,
    intermediate_size=12,
    max_sequence_length=7,
)


def tiny_config(**overrides) -> keras_bert.BertConfig:
    """The tiny BertConfig, with `overrides` replacing its fields."""
    return keras_bert.BertConfig(**{**TINY, **overrides})


def tiny_encoder(**overrides) -> keras_bert.BertEncoder:
    """A BertEncoder of `tiny_config(**overrides)`."""
    return keras_bert.BertEncoder(**tiny_config(**overrides).to_dict())
