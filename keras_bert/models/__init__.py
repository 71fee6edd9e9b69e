"""Keras models: the encoder and the task models built on it."""

from keras_bert.models.bert_encoder import BertEncoder
from keras_bert.models.bert_pretrainer import BertPretrainer

__all__ = ["BertEncoder", "BertPretrainer"]
