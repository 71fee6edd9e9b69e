"""Tiny models shared by the tests: one place for the small encoder config most tests build.

`tiny_config()` is a 1-layer, H=8 BERT over a 23-piece vocabulary; every field can be overridden
(`tiny_config(vocab_size=30522, max_sequence_length=24)`; `tiny_config(**NO_DROPOUT)` for one
without dropout). `tiny_encoder(**overrides)` builds the
BertEncoder of that config. `tiny_vocab(words)` is a word-level vocabulary for the task tests'
BertPreprocessor.

`tiny_run_args(output_dir, vocab_file, ...)` are the keyword arguments a short fine-tuning run
through the driver starts from (a family's Args take them), as `tiny_run_flags` are a recipe's;
`TINY_SQUAD_WINDOWS` are the window sizes of the tiny SQuAD runs.
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
# Overrides for an encoder without dropout, for tests that compare runs or train to a fixed result.
NO_DROPOUT = dict(dropout_rate=0.0, attention_dropout_rate=0.0)


def tiny_config(**overrides) -> keras_bert.BertConfig:
    """The tiny BertConfig, with `overrides` replacing its fields."""
    return keras_bert.BertConfig(**{**TINY, **overrides})


def tiny_encoder(**overrides) -> keras_bert.BertEncoder:
    """A BertEncoder of `tiny_config(**overrides)`."""
    return keras_bert.BertEncoder(**tiny_config(**overrides).to_dict())


def tiny_vocab(words: str) -> list[str]:
    """A vocabulary for `BertPreprocessor(vocabulary=...)`: [PAD] [UNK] [CLS] [SEP] at ids 0-3,
    then the space-separated `words`, one piece each, from id 4 on (so tests can spell ids)."""
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words.split()]


# What every short driver run of the tests shares: bert_tiny, one epoch (given, so never raised to
# --min_train_steps), quiet.
TINY_RUN = dict(preset="bert_tiny", num_train_epochs=1, verbose=0)
# The windows of the tiny SQuAD runs: 64 pieces, a 32-piece stride, questions cut at 16 pieces.
TINY_SQUAD_WINDOWS = dict(max_seq_length=64, doc_stride=32, max_query_length=16)


def tiny_run_args(output_dir, vocab_file, max_examples: int | None = None, **overrides) -> dict:
    """`TINY_RUN` writing to `output_dir`, over `vocab_file`; with `max_examples`, at most that
    many train and eval examples; `overrides` add to or replace any of them."""
    args = dict(TINY_RUN, output_dir=str(output_dir), vocab_file=str(vocab_file))
    if max_examples is not None:
        args |= dict(max_train_examples=max_examples, max_eval_examples=max_examples)
    return args | overrides
