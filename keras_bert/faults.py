"""Fault injection for kill-and-resume tests: signal this process at a named point.

`KERAS_BERT_CRASH_AT=<point>[:<n>[:<signal>]]` sends the process a signal the n-th time (default 1)
the code passes `crash_point("<point>")`: SIGKILL by default (no cleanup, as a power cut or the OOM
killer would), or the one named (`SIGTERM`: a preemption notice, `keras_bert.training.preemption`). Unset, a
crash point costs one dictionary look-up. Points: "train_batch" (after a batch and its checkpoint),
"evaluation" (as a dev evaluation starts), "best_saved" (after the best weights are written, before
the evaluation history is), "checkpoints_finalized" (a finished run recorded as complete, before
its step checkpoints are deleted), "metrics_write" (after best_model.keras, before metrics.json),
"export_publish" (an export written, before it is renamed into place).
"""

from __future__ import annotations

import collections
import os
import signal

ENV = "KERAS_BERT_CRASH_AT"
_passes: collections.Counter = collections.Counter()


def crash_point(name: str) -> None:
    """Signals the process if `KERAS_BERT_CRASH_AT` names this point and pass (see module doc)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    point, _, rest = spec.partition(":")
    if point != name:
        return
    count, _, signal_name = rest.partition(":")
    _passes[name] += 1
    if _passes[name] == int(count or 1):
        os.kill(os.getpid(), getattr(signal, signal_name or "SIGKILL"))
