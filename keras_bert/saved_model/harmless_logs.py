"""Drops the log messages TensorFlow writes on every export of a task that are not about the
user's model, so that what an export does print is worth reading.

Both come from saving a SavedModel of a graph with an in-graph vocabulary (a lookup table):
- absl INFO "Function `serving_default` contains input name(s) params, 916, table_handle, resource
  with unsupported characters which will be renamed to ...": TensorFlow names the tensors a
  signature function *captures* (the vocabulary table, variables) after their ops; they are
  not signature inputs, the signature's inputs (`text`, `input_word_ids`, ...) keep their names.
- WARNING "Issue encountered when serializing table_initializer. ... 'NoneType' object has no
  attribute 'name'": the TF1-style `table_initializer` collection of the same table, which a TF2
  SavedModel does not use (the table is initialised by its own restored resource); TensorFlow
  itself says "probably safe to ignore".
Also dropped: INFO records that TensorFlow's own Python files log while saving ("Assets written
to: <tmp dir>/assets", twice; "Writing fingerprint to ...", "Sharding callback duration: 108
microseconds"): bookkeeping about a temporary directory the user never sees. TensorFlow's
warnings and errors, and every record of this project (the export's own "exported ... to"),
still pass.
"""

from __future__ import annotations

import contextlib
import logging
import os

HARMLESS_PREFIXES = ("Issue encountered when serializing table_initializer",)
HARMLESS_FRAGMENTS = ("with unsupported characters which will be renamed to",)
LOGGERS = ("tensorflow", "absl")
TENSORFLOW_SOURCES = (f"{os.sep}tensorflow{os.sep}", f"{os.sep}tf_keras{os.sep}")


class HarmlessExportMessages(logging.Filter):
    """A `logging.Filter` that drops the messages of the module docstring."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.INFO and any(s in record.pathname for s in TENSORFLOW_SOURCES):
            return False
        message = record.getMessage()
        return not (
            message.startswith(HARMLESS_PREFIXES) or any(f in message for f in HARMLESS_FRAGMENTS)
        )


@contextlib.contextmanager
def quiet_harmless_export_logs():
    """Within the block, the `tensorflow` and `absl` loggers drop `HarmlessExportMessages`."""
    message_filter = HarmlessExportMessages()
    loggers = [logging.getLogger(name) for name in LOGGERS]
    for logger in loggers:
        logger.addFilter(message_filter)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(message_filter)
