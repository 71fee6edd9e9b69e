"""Callbacks: SIGKILL-safe step checkpoints, TensorBoard at the run's optimizer step
(`RunTensorBoard`) and the progress bar (`standard_callbacks`); the evaluation with best-checkpoint selection and early stopping is
`evaluation_callback.EvaluationCallback`.

Why not `keras.callbacks.BackupAndRestore(save_freq=N)`: in Keras 3 it restores the *epoch* only;
a run killed mid-epoch replays that whole epoch and ends with more optimizer steps than an
uninterrupted one, and it keeps no random state. `ResumableCheckpoint` stores the exact global
batch count and the random state (dropout's seed generators, `random_state`) next to the weights
(which include the optimizer state), and `resumable_fit` skips the batches already trained.
"""

from __future__ import annotations

import logging
import os
import sys
import time

import keras
import numpy as np

from keras_bert import fileio
from keras_bert.checkpoints.keras_format import save_weights_file
from keras_bert.faults import crash_point
from keras_bert.training import random_state

logger = logging.getLogger(__name__)


class ResumableCheckpoint(keras.callbacks.Callback):
    """Save model + optimizer weights every `save_freq` batches and at each epoch end.

    Files in `directory`: `ckpt-<step>.weights.h5` (the last `keep`) and `checkpoint.json`
    ({"step": global batches trained, "weights": file name, "random": the random state after
    that step, `random_state.capture`}); both are written whole-or-nothing (`keras_bert.fileio`),
    so a kill at any moment leaves the previous checkpoint intact. `restore` puts the weights,
    the optimizer state and the random state back, so the steps after a resume draw the dropout
    masks the uninterrupted run drew (a checkpoint.json without "random", from an older
    version, resumes with the masks of a fresh start, and says so). When the run
    is over and its result kept elsewhere, `finalize()` records the last step with
    `"weights": null, "complete": true` and deletes the step checkpoints (hundreds of MB for a
    BERT with its optimizer state); `restore` then sets the step without loading anything
    (`complete` says so), so a rerun trains nothing.

    Args:
        directory: str (any `keras_bert.fileio` URI) or path-like, created if missing.
        save_freq: int > 0, batches between checkpoints (a multiple of the optimizer update's
            batches: `standard_callbacks` counts it in steps); None = only at epoch ends.
        keep: int >= 1, checkpoints kept on disk.
        is_chief: only the chief writes (multi-worker: other workers save nothing).
    """

    def __init__(
        self, directory, save_freq: int | None = None, keep: int = 2, is_chief: bool = True
    ):
        super().__init__()
        if save_freq is not None and save_freq < 1:
            raise ValueError(f"save_freq must be >= 1 batches or None, got {save_freq}")
        self.directory = os.fspath(directory)
        self.save_freq = save_freq
        self.keep = max(1, int(keep))
        self.is_chief = is_chief
        self.step = 0
        self.restored_step = 0  # the step the last restore() found (0: fresh start)
        self._last_saved = -1

    @property
    def state_path(self) -> str:
        return fileio.join(self.directory, "checkpoint.json")

    def latest(self) -> dict | None:
        """The newest complete checkpoint's {"step", "weights"} or None."""
        if not fileio.exists(self.state_path):
            return None
        return fileio.read_json(self.state_path)

    def restore(self, model) -> int:
        """Load the newest checkpoint into the (built, compiled) model; returns its step (0 if none)."""
        state = self.latest()
        if state is None:
            self.step = 0
            return 0
        if state.get("complete"):
            self.step = self._last_saved = self.restored_step = int(state["step"])
            return self.step
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        model.load_weights(fileio.join(self.directory, state["weights"]))
        if "random" in state:
            random_state.restore(model, state["random"], self.state_path)
        else:
            logger.warning(
                "%s records no random state (written by an older version): the dropout masks "
                "after this resume differ from an uninterrupted run's",
                self.state_path,
            )
        self.step = self._last_saved = self.restored_step = int(state["step"])
        return self.step

    def save(self) -> None:
        if not self.is_chief or self.step == self._last_saved:
            return
        fileio.makedirs(self.directory)
        name = f"ckpt-{self.step}.weights.h5"
        save_weights_file(self.model, fileio.join(self.directory, name))
        fileio.write_json(
            self.state_path,
            {"step": self.step, "weights": name, "random": random_state.capture(self.model)},
        )
        self._last_saved = self.step
        old = sorted(
            fileio.glob(fileio.join(self.directory, "ckpt-*.weights.h5")),
            key=lambda p: int(fileio.basename(p)[5:-11]),
        )
        for path in old[: -self.keep]:
            fileio.remove(path)

    @property
    def complete(self) -> bool:
        """Whether `finalize()` ran: the run is over and its step checkpoints are gone."""
        state = self.latest()
        return bool(state and state.get("complete"))

    def finalize(self) -> None:
        """Mark the run complete at `self.step`, then delete the step checkpoints (chief only).

        Call once the run's result is durably kept (best model, metrics): the record is written
        first, so a kill between the two leaves a complete record and files a rerun deletes.
        """
        if not self.is_chief:
            return
        fileio.write_json(self.state_path, {"step": self.step, "weights": None, "complete": True})
        crash_point("checkpoints_finalized")
        for path in fileio.glob(fileio.join(self.directory, "*.weights.h5")):
            fileio.remove(path)

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.save_freq and self.step % self.save_freq == 0:
            self.save()
        crash_point("train_batch")

    def on_epoch_end(self, epoch, logs=None):
        self.save()


class ProgressLogger(keras.callbacks.Callback):
    """Progress the way a user reads it: "Epoch 1/3", batches of that epoch, the optimizer step
    of the run, loss.

    Keras's own bar is wrong for a run trained one `fit` call per epoch (it shows "Epoch 3/3" for
    the third call of `fit(initial_epoch=2, epochs=3)` and never "Epoch 1/3"), and writes
    carriage-return updates when stdout is not a terminal (it takes "posix" in sys.modules for a
    dynamic display). On a terminal this shows a Keras progress bar per epoch; elsewhere (logs,
    CI) one plain line every `interval_s` seconds, one after each dev evaluation inside an epoch
    (with its `val_` metrics) and one at each epoch end: "batch 12/50 (step 6/25)", the step
    being the optimizer update (`accumulation` batches each).

    Args:
        epochs: total epochs of the run (the last may be partial).
        steps_per_epoch: batches per full epoch.
        total_steps: batches of the whole run.
        verbose: 1 (bar or periodic lines) or 2 (one line per epoch).
        interval_s: seconds between plain lines when stdout is not a terminal.
        stream: where plain lines go (default sys.stdout).
        accumulation: batches per optimizer update (--gradient_accumulation_steps).
    """

    def __init__(
        self,
        epochs: int,
        steps_per_epoch: int,
        total_steps: int,
        verbose: int = 1,
        interval_s: float = 30.0,
        stream=None,
        accumulation: int = 1,
    ):
        super().__init__()
        self.epochs, self.steps_per_epoch, self.total_steps = epochs, steps_per_epoch, total_steps
        self.verbose, self.interval_s = verbose, interval_s
        self.accumulation = max(1, int(accumulation))
        self.stream = stream or sys.stdout
        self.dynamic = self.verbose == 1 and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.epoch = 0
        self.step = 0  # global batches done
        self._bar = None
        self._epoch_start = self._last_line = 0.0

    def _epoch_steps(self, epoch: int) -> int:
        return max(0, min(self.steps_per_epoch, self.total_steps - epoch * self.steps_per_epoch))

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def on_train_begin(self, logs=None):
        self.step = max(self.step, 0)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        self.step = max(self.step, epoch * self.steps_per_epoch)
        self._epoch_start = self._last_line = time.time()
        done = self.step - epoch * self.steps_per_epoch
        resumed = f" (resuming after batch {done})" if done else ""
        steps = self._epoch_steps(epoch)
        # The last epoch of a fractional --num_train_epochs (2.5: "Epoch 3/3") says it is partial.
        partial = (
            f" (last {round(steps / self.steps_per_epoch, 2):g} of an epoch: {steps} of "
            f"{self.steps_per_epoch} batches)"
            if 0 < steps < self.steps_per_epoch
            else ""
        )
        self._print(f"Epoch {epoch + 1}/{self.epochs}{partial}{resumed}")
        if self.dynamic:
            self._bar = keras.utils.Progbar(self._epoch_steps(epoch), stateful_metrics=["loss"])
            self._bar.update(done)

    def _line(self, logs) -> str:
        done = self.step - self.epoch * self.steps_per_epoch
        metrics = "".join(
            f" - {k}: {float(v):.4f}"
            for k, v in (logs or {}).items()
            if np.ndim(v) == 0 and not k.startswith("learning_rate")
        )
        return (
            f"  batch {done}/{self._epoch_steps(self.epoch)} (step "
            f"{self.step // self.accumulation}/{self.total_steps // self.accumulation}) - "
            f"{time.time() - self._epoch_start:.0f}s{metrics}"
        )

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self._bar is not None:
            self._bar.update(
                self.step - self.epoch * self.steps_per_epoch,
                [(k, float(v)) for k, v in (logs or {}).items() if np.ndim(v) == 0],
            )
        elif self.verbose == 1 and (
            time.time() - self._last_line >= self.interval_s
            or any(k.startswith("val_") for k in (logs or {}))
        ):
            # a dev evaluation inside the epoch (--evaluations_per_epoch) is printed when taken
            self._last_line = time.time()
            self._print(self._line(logs))

    def on_epoch_end(self, epoch, logs=None):
        if self._bar is None:
            self._print(self._line(logs))
        self._bar = None


class LossHistory(keras.callbacks.Callback):
    """Records `logs["loss"]` after every batch (Keras reports the running epoch mean)."""

    def __init__(self):
        super().__init__()
        self.losses: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))


class RunTensorBoard(keras.callbacks.TensorBoard):
    """Keras's TensorBoard (the epoch-level summaries, the graph) whose batch-level points are at
    the run's optimizer step, every `update_freq` steps.

    Keras numbers its batch-level points from 0 again at every `fit` call, so a run trained one
    call per epoch (`resumable_fit`), or resumed, wrote each epoch's points over the last one's;
    and it writes them per batch, where under gradient accumulation a step is `accumulation`
    batches. Here, at the step s (1-based) of the run, once per update and every `update_freq`
    updates, in `<log_dir>/train`:
    - `step_loss`: the mean training loss over the rows of that update's batches (from the
      running loss total and row count Keras keeps for the epoch), the loss one batch of all
      those rows would have;
    - `learning_rate`: the rate that update ran at (the schedule's value at s - 1).

    Args:
        log_dir: str, any `keras_bert.fileio` URI.
        update_freq: int >= 1, optimizer steps between points.
        checkpoint: the run's `ResumableCheckpoint` (before this callback in the list): its
            `step` is the global batch count.
        accumulation: batches per optimizer update.
    """

    def __init__(self, log_dir, update_freq: int, checkpoint, accumulation: int = 1):
        super().__init__(log_dir, update_freq="epoch")  # Keras's per-batch points: none
        self.every, self.checkpoint = int(update_freq), checkpoint
        self.accumulation = max(1, int(accumulation))
        self._mark = (0.0, 0.0)  # the loss total and rows at the last update of this fit call
        self._carry = (0.0, 0.0)  # an update's batches trained in the previous fit call

    def _loss_sums(self) -> tuple[float, float]:
        tracker = next((m for m in self.model.metrics if m.name == "loss"), None)
        if tracker is None:  # a model compiled without a loss: no step_loss
            return float("nan"), 1.0
        return float(tracker.total.numpy()), float(tracker.count.numpy())

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._mark = (0.0, 0.0)

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        batches = self.checkpoint.step
        if batches % self.accumulation:
            return
        step = batches // self.accumulation
        if step % self.every and (step + 1) % self.every:
            self._mark, self._carry = None, (0.0, 0.0)  # the next update is not written either
            return
        total, rows = self._loss_sums()
        if self._mark is not None and step % self.every == 0:
            loss = (total - self._mark[0] + self._carry[0]) / max(
                rows - self._mark[1] + self._carry[1], 1.0
            )
            with self._train_writer.as_default():
                self.summary.scalar("step_loss", loss, step=step)
                self.summary.scalar("learning_rate", self._rate_of(step - 1), step=step)
        self._mark, self._carry = (total, rows), (0.0, 0.0)

    def on_epoch_end(self, epoch, logs=None):
        if self._mark is not None and self.checkpoint.step % self.accumulation:
            total, rows = self._loss_sums()
            self._carry = (total - self._mark[0], rows - self._mark[1])
        super().on_epoch_end(epoch, logs)

    def _rate_of(self, step: int) -> float:
        optimizer = self.model.optimizer
        optimizer = getattr(optimizer, "inner_optimizer", optimizer)  # LossScaleOptimizer
        schedule = optimizer._learning_rate
        if isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
            return float(schedule(step))
        return float(optimizer.learning_rate)


def standard_callbacks(
    output_dir,
    save_freq: int | None = None,
    tensorboard: bool = True,
    keep_checkpoints: int = 2,
    is_chief: bool = True,
    tensorboard_update_freq: int = 100,
    accumulation: int = 1,
):
    """The callbacks every training run gets.

    Args:
        save_freq: optimizer steps between step checkpoints (None: at epoch ends only).
        tensorboard_update_freq: optimizer steps between TensorBoard points (`RunTensorBoard`).
        accumulation: batches per optimizer step (--gradient_accumulation_steps).

    Returns:
        (checkpoint, callbacks): the `ResumableCheckpoint` writing `<output_dir>/checkpoints`
        (call `checkpoint.restore(model)` or pass it to `resumable_fit`) and a list holding it
        plus a `RunTensorBoard` writing `<output_dir>/logs` (chief only).
    """
    output_dir = os.fspath(output_dir)
    checkpoint = ResumableCheckpoint(
        fileio.join(output_dir, "checkpoints"),
        None if save_freq is None else save_freq * accumulation,
        keep_checkpoints,
        is_chief,
    )
    callbacks = [checkpoint]
    if tensorboard and is_chief:
        callbacks.append(
            RunTensorBoard(
                fileio.join(output_dir, "logs"),
                tensorboard_update_freq,
                checkpoint,
                accumulation,
            )
        )
    return checkpoint, callbacks
