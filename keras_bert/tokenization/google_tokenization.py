"""google-research/bert's `tokenization` module, name for name, on our reference tokenizer.

Code written against `google-research/bert/tokenization.py` (or Model Garden's copy,
`official/nlp/tools/tokenization.py`, for WordPiece vocabularies) runs after changing only its
import:

    from bert import tokenization                                          # before
    from keras_bert.tokenization import google_tokenization as tokenization  # after

Public names, with the reference's behaviour: `FullTokenizer`, `BasicTokenizer`,
`WordpieceTokenizer`, `load_vocab`, `convert_by_vocab`, `convert_tokens_to_ids(vocab, tokens)`,
`convert_ids_to_tokens(inv_vocab, ids)`, `whitespace_tokenize`, `convert_to_unicode`,
`printable_text`, `validate_case_matches_checkpoint`; and the module-private predicates its own
test calls (`_is_whitespace`, `_is_control`, `_is_punctuation`). The classes are the ones of
`full_tokenizer`, which accept any vocabulary, as the reference does.

Known differences, both deliberate: an empty vocabulary file is a ValueError ("holds no
tokens") instead of a tokenizer that maps every word to "[UNK]"; and vocabulary paths are local
files (the reference reads through `tf.gfile`, so also `gs://`).
"""

from __future__ import annotations

import re

from keras_bert.tokenization.full_tokenizer import BasicTokenizer
from keras_bert.tokenization.full_tokenizer import FullTokenizer
from keras_bert.tokenization.full_tokenizer import WordpieceTokenizer
from keras_bert.tokenization.full_tokenizer import is_control as _is_control  # noqa: F401
from keras_bert.tokenization.full_tokenizer import is_punctuation as _is_punctuation  # noqa: F401
from keras_bert.tokenization.full_tokenizer import is_whitespace as _is_whitespace  # noqa: F401
from keras_bert.tokenization import full_tokenizer
from keras_bert.tokenization.full_tokenizer import load_vocab
from keras_bert.tokenization.full_tokenizer import whitespace_tokenize

__all__ = [
    "FullTokenizer",
    "BasicTokenizer",
    "WordpieceTokenizer",
    "load_vocab",
    "convert_by_vocab",
    "convert_tokens_to_ids",
    "convert_ids_to_tokens",
    "whitespace_tokenize",
    "convert_to_unicode",
    "printable_text",
    "validate_case_matches_checkpoint",
]

# The published google-research/bert checkpoints whose casing the reference knows by name.
LOWER_CASED_MODELS = (
    "uncased_L-24_H-1024_A-16",
    "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12",
    "chinese_L-12_H-768_A-12",
)
CASED_MODELS = ("cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16", "multi_cased_L-12_H-768_A-12")


def convert_to_unicode(text) -> str:
    """`str` as is; `bytes` decoded as UTF-8, invalid bytes dropped.

    Raises:
        ValueError: "Unsupported string type: <type>" for anything else (the reference's error).
    """
    if not isinstance(text, (str, bytes)):
        raise ValueError(f"Unsupported string type: {type(text)}")
    return full_tokenizer.convert_to_unicode(text)


def printable_text(text) -> str:
    """Text for printing or logging; on Python 3 the same as `convert_to_unicode`."""
    return convert_to_unicode(text)


def convert_by_vocab(vocab, items) -> list:
    """`[vocab[item] for item in items]`; KeyError on an item the mapping lacks."""
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens) -> list:
    """Token strings -> ids through `vocab` (token -> id). KeyError on an unknown token."""
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids) -> list:
    """Ids -> token strings through `inv_vocab` (id -> token). KeyError on an unknown id."""
    return convert_by_vocab(inv_vocab, ids)


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint) -> None:
    """Refuses a `do_lower_case` that contradicts a published checkpoint known by its name.

    Only paths of the form `.../<model_name>/bert_model.ckpt...` with a model name of
    `LOWER_CASED_MODELS` or `CASED_MODELS` are checked; anything else passes (reference rule).

    Raises:
        ValueError: with the reference's message, naming the flag to pass instead.
    """
    if not init_checkpoint:
        return
    m = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
    if m is None:
        return
    model_name = m.group(1)
    if model_name in LOWER_CASED_MODELS and not do_lower_case:
        actual_flag, case_name, opposite_flag = "False", "lowercased", "True"
    elif model_name in CASED_MODELS and do_lower_case:
        actual_flag, case_name, opposite_flag = "True", "cased", "False"
    else:
        return
    raise ValueError(
        f"You passed in `--do_lower_case={actual_flag}` with `--init_checkpoint="
        f"{init_checkpoint}`. However, `{model_name}` seems to be a {case_name} model, so you "
        f"should pass in `--do_lower_case={opposite_flag}` so that the fine-tuning matches how "
        "the model was pre-training. If this error is wrong, please just comment out this check."
    )
