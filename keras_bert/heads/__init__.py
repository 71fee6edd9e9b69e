"""Pretraining heads."""

from keras_bert.heads.masked_lm import MaskedLMHead
from keras_bert.heads.next_sentence import NextSentenceHead

__all__ = ["MaskedLMHead", "NextSentenceHead"]
