"""Serving signatures of a `SpanQuestionAnswerer` (work in progress)."""
from __future__ import annotations

from keras_bert.saved_model.serving_module import ServingModule


class SpanQAServingModule(ServingModule):
    """Not yet implemented."""

    def signatures(self) -> dict:
        raise NotImplementedError("SpanQuestionAnswerer export is not implemented yet")
