"""BERT tokenization: Python reference, packing, and in-graph preprocessors.

`FullTokenizer` (google-research/bert rules, pure Python; `tokenize_with_offsets` adds each
piece's character offsets), `strip_accents` (the uncased accent rule), `pack_inputs` /
`truncate_seq_pair` (packing), `CoreBertTokenizer` (in-graph, core TF ops only, with the same
`tokenize_with_offsets`) and `BertPreprocessor` (Keras layer: raw text -> input_word_ids /
input_mask / input_type_ids).
"""

from keras_bert.tokenization.full_tokenizer import MAX_INPUT_CHARS_PER_WORD
from keras_bert.tokenization.full_tokenizer import FullTokenizer
from keras_bert.tokenization.full_tokenizer import load_vocab
from keras_bert.tokenization.full_tokenizer import strip_accents
from keras_bert.tokenization.packing import pack_inputs
from keras_bert.tokenization.packing import truncate_seq_pair
from keras_bert.tokenization.core_tokenizer import CoreBertTokenizer
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor

__all__ = [
    "MAX_INPUT_CHARS_PER_WORD",
    "FullTokenizer",
    "load_vocab",
    "strip_accents",
    "pack_inputs",
    "truncate_seq_pair",
    "CoreBertTokenizer",
    "BertPreprocessor",
]
