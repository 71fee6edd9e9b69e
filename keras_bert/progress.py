"""`progress_bar`: tqdm on a terminal, plain lines in logs.

tqdm redraws its bar with carriage returns; written to a file or a pipe (logs, CI) that makes one
very long line. Off a terminal, `progress_bar` writes one plain line per `log_interval_s` seconds
(and one at the end) instead. Used by every long data or prediction loop of the library; the
training loops use `keras_bert.training.callbacks.ProgressLogger`, which follows the same rule.
"""

from __future__ import annotations

import sys

from tqdm import tqdm


class _PlainLines:
    """A text stream for tqdm that turns each redraw into one line."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        text = text.replace("\r", "").replace("\x1b[A", "").strip()
        if text:
            self.stream.write(text + "\n")

    def flush(self) -> None:
        self.stream.flush()


def progress_bar(iterable=None, *, stream=None, log_interval_s: float = 30.0, **kwargs) -> tqdm:
    """A tqdm bar (same arguments) that writes plain lines when `stream` is not a terminal.

    Args:
        iterable: as tqdm's; `total`, `desc`, `unit`, `disable` ... pass through.
        stream: where the bar goes (default sys.stderr, as tqdm's).
        log_interval_s: seconds between lines when the stream is not a terminal.
    """
    stream = stream or sys.stderr
    if not (hasattr(stream, "isatty") and stream.isatty()):
        kwargs.setdefault("mininterval", log_interval_s)
        kwargs.setdefault("ascii", True)
        kwargs["file"] = _PlainLines(stream)
        kwargs.setdefault("dynamic_ncols", False)
        kwargs.setdefault("ncols", 100)
    else:
        kwargs["file"] = stream
    return tqdm(iterable, **kwargs)
