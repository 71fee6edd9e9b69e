"""Preemption: on SIGTERM, finish the batch, save a checkpoint, stop; a rerun resumes.

Cloud TPU and GPU VMs, Kubernetes and Slurm announce a preemption or an eviction with SIGTERM and
kill the process a grace period later (about 30 s on a preemptible Compute Engine VM). Python's
default answer to SIGTERM ends the process at once and loses every batch since the last step
checkpoint. `watch_preemption` instead records the signal; `PreemptionWatcher` (a Keras callback
placed right after the `ResumableCheckpoint`) sees it at the next batch end, saves the checkpoint
of that step and ends the process with `Preempted` (exit status 143, 128 + SIGTERM, as a process
killed by SIGTERM reports it; no traceback) before any evaluation of that step. Rerunning the same
command resumes from that checkpoint, and an evaluation due at that step is taken first
(`EvaluationCallback.evaluate_if_due`), so the run ends as an uninterrupted one.

Multi-worker (`MultiWorkerMirroredStrategy`): the signal may reach one worker only. At every batch
end the workers agree with one all-reduce (a sum) of their "signal seen" flags, so all of them stop
after the same batch and the chief saves that step; training collectives never wait on a worker
that left. A second SIGTERM ends the process at once (the default action).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading

import keras
import tensorflow as tf

logger = logging.getLogger(__name__)

EXIT_STATUS = 128 + signal.SIGTERM


class Preempted(SystemExit):
    """The run stopped on SIGTERM after saving the checkpoint of `step`; the process exits with
    status 143 (a `SystemExit`: no traceback, `except Exception` does not swallow it)."""

    def __init__(self, step: int, where: str):
        super().__init__(EXIT_STATUS)
        self.step, self.where = step, where

    def __str__(self) -> str:
        return (
            f"preempted (SIGTERM) after step {self.step}: checkpoint saved in {self.where}; "
            "rerun the same command to resume"
        )


class _Signal:
    """Whether SIGTERM arrived while `watch_preemption` was active."""

    seen = False


@contextlib.contextmanager
def watch_preemption():
    """Within the block, SIGTERM sets a flag (`PreemptionWatcher` acts on it) instead of ending
    the process; a second SIGTERM ends it. Outside the main thread (signals go to the main thread
    only) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(signum, frame):
        if _Signal.seen:  # a second notice: the default action, now
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)
        _Signal.seen = True
        logger.warning("SIGTERM: saving a checkpoint after this batch, then stopping")

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    _Signal.seen = False
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _workers(strategy) -> int:
    extended = getattr(strategy, "extended", None)
    return int(getattr(extended, "_num_workers", 1) or 1)


def agreed(strategy, seen: bool) -> bool:
    """Whether any worker saw the signal: the flag itself in one process; across the workers of
    a multi-worker strategy, whether any worker's flag is set (all call this at the same batch)."""
    if strategy is None or _workers(strategy) <= 1:
        return seen
    return _sum_over_workers(strategy, [1.0 if seen else 0.0])[0] > 0


_SUMS: dict = {}  # strategy id -> its compiled all-reduce (eager collectives are slow)


def _sum_over_workers(strategy, values: list[float]) -> list[float]:
    """Each value summed over the workers; every worker gets the same sums (tf.distribute reduces
    only by SUM and MEAN). A worker's value counts once whatever its number of local replicas."""
    if id(strategy) not in _SUMS:
        local = float(getattr(strategy.extended, "_num_devices_per_worker", 1))

        @tf.function
        def summed(x):
            per_replica = strategy.run(lambda v: v / local, args=(x,))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        _SUMS[id(strategy)] = summed
    return [float(v) for v in _SUMS[id(strategy)](tf.constant(values, tf.float64)).numpy()]


def check_same_step(strategy, step: int, where: str) -> None:
    """Multi-worker: every worker must resume from the same step (the chief's checkpoint, read
    from storage all of them see); a worker that found another step would wait in a collective
    for ever, so this fails at once instead.

    Raises:
        ValueError: the workers restored different steps, naming `where`.
    """
    if strategy is None or _workers(strategy) <= 1:
        return
    # All n steps are equal exactly when n * sum(s^2) == sum(s)^2 (every worker sees the same sums).
    total, squares = _sum_over_workers(strategy, [float(step), float(step) ** 2])
    n = _workers(strategy)
    if n * squares != total**2:
        raise ValueError(
            f"the workers found checkpoints of different steps (this one: {step}; mean over the "
            f"{n} workers: {total / n:g}) in {where}: a "
            "multi-worker run needs --output_dir on storage every worker reads and writes the "
            "same (e.g. gs://...), not a local disk per host"
        )


class PreemptionWatcher(keras.callbacks.Callback):
    """At each batch end: if SIGTERM arrived (on any worker), save `checkpoint` at this step and
    raise `Preempted`. Put it right after the checkpoint in the callback list, before evaluations.

    Args:
        checkpoint: the run's `ResumableCheckpoint` (its `step` already counts this batch).
        strategy: the run's tf.distribute strategy (None: one process).
    """

    def __init__(self, checkpoint, strategy=None):
        super().__init__()
        self.checkpoint, self.strategy = checkpoint, strategy

    def on_train_batch_end(self, batch, logs=None):
        if not agreed(self.strategy, _Signal.seen):
            return
        self.checkpoint.save()
        preempted = Preempted(self.checkpoint.step, str(self.checkpoint.directory))
        logger.warning("%s", preempted)
        raise preempted
