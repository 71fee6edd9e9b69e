"""Tests of keras_bert.checkpoints."""
