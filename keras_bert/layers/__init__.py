"""Keras layers of the BERT encoder."""

from keras_bert.layers.activations import get_activation
from keras_bert.layers.bert_embeddings import BertEmbeddings
from keras_bert.layers.dropout import BertDropout
from keras_bert.layers.self_attention import MASK_LOGIT, BertSelfAttention
from keras_bert.layers.transformer_encoder_block import TransformerEncoderBlock

__all__ = [
    "BertDropout",
    "BertEmbeddings",
    "BertSelfAttention",
    "MASK_LOGIT",
    "TransformerEncoderBlock",
    "get_activation",
]
