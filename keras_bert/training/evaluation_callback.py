"""`EvaluationCallback`: per-epoch (or every N batches) evaluation during training, the best
weights kept (`selection.is_better`), early stopping; its history survives a restart of the run
beside the step checkpoints of `callbacks.ResumableCheckpoint`."""

from __future__ import annotations

import os

import keras

from keras_bert import fileio
from keras_bert.checkpoints.keras_format import save_weights_file
from keras_bert.faults import crash_point
from keras_bert.training.optimizer import averaged_weights
from keras_bert.training.selection import is_better


class EvaluationCallback(keras.callbacks.Callback):
    """At each epoch end (and optionally every N batches): evaluate, log `val_<metric>`s, keep the
    best weights, stop early.

    When the model's optimizer keeps a weight average (`create_optimizer(ema_momentum=...)`), the
    averaged weights are the ones evaluated and saved as the best (`averaged_weights`); training
    goes on from the trained weights.

    The history lives in `state_file` (JSON) so it survives a restart of the run. Each entry has
    "epoch": the epochs trained when it was taken (an int at epoch ends, a fraction such as 1.5
    for evaluations inside an epoch), "train_loss" and the metrics.

    Args:
        eval_fn: callable(model) -> dict metric name -> float (e.g. the GLUE dev metrics).
        monitor: metric name (a key of eval_fn's dict) to maximise.
        best_weights_path: where the best weights are saved (`*.weights.h5`), or None.
        state_file: JSON file of {"epochs": [...], "best": {...}}; None keeps it in memory.
        patience: stop after this many epochs without improvement; None never stops.
        is_chief: only the chief writes files.
        evaluations_per_epoch: int >= 1; with k > 1, also evaluate inside each epoch after
            round(j * steps_per_epoch / k) of its batches, j = 1 .. k-1, or under gradient
            accumulation at the first optimizer update from there on inside the epoch (the
            weights between two updates are the earlier update's). Needs step_fn and
            steps_per_epoch.
        step_fn: callable() -> global batches trained so far (e.g. a ResumableCheckpoint's step,
            which must come before this callback in the callback list).
        steps_per_epoch: batches per epoch, to express steps as epochs.
        accumulation: batches per optimizer update (--gradient_accumulation_steps).

    Raises:
        ValueError: evaluations_per_epoch < 1, or > 1 without step_fn and steps_per_epoch.
    """

    def __init__(
        self,
        eval_fn,
        monitor: str,
        best_weights_path=None,
        state_file=None,
        patience: int | None = None,
        is_chief: bool = True,
        evaluations_per_epoch: int = 1,
        step_fn=None,
        steps_per_epoch: int | None = None,
        accumulation: int = 1,
    ):
        super().__init__()
        if evaluations_per_epoch < 1 or (
            evaluations_per_epoch > 1 and (step_fn is None or not steps_per_epoch)
        ):
            raise ValueError(
                f"evaluations_per_epoch must be >= 1, and > 1 needs step_fn and steps_per_epoch; "
                f"got evaluations_per_epoch={evaluations_per_epoch}, steps_per_epoch={steps_per_epoch}"
            )
        self.eval_fn = eval_fn
        self.monitor = monitor
        self.best_weights_path = best_weights_path
        self.state_file = os.fspath(state_file) if state_file else None
        self.patience = patience
        self.is_chief = is_chief
        self.inner_points = (
            set()
            if evaluations_per_epoch == 1
            else {
                round(j * steps_per_epoch / evaluations_per_epoch)
                for j in range(1, evaluations_per_epoch)
            }
            - {0, steps_per_epoch}
        )
        self.step_fn = step_fn
        self.steps_per_epoch = steps_per_epoch
        self.accumulation = max(1, int(accumulation))
        self._inner_step = None  # the global step of the last evaluation inside an epoch
        self.state = {"epochs": [], "best": None}
        if self.state_file is not None and fileio.exists(self.state_file):
            self.state = fileio.read_json(self.state_file)

    @property
    def should_stop(self) -> bool:
        if self.patience is None or self.state["best"] is None:
            return False
        last = max(e["epoch"] for e in self.state["epochs"])
        return last - self.state["best"]["epoch"] >= self.patience

    def _epochs_done(self, epoch: int):
        if self.step_fn is None or not self.steps_per_epoch:
            return epoch + 1
        done = round(self.step_fn() / self.steps_per_epoch, 4)
        return int(done) if done == int(done) else done

    def on_train_batch_end(self, batch, logs=None):
        if not self.inner_points:
            return
        if self._is_inner_point(self.step_fn()):
            self._evaluate(self._epochs_done(0), logs)
            self._inner_step = self.step_fn()
            if self.should_stop:
                self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        # An epoch that ends right after an evaluation inside it (a time limit stopping training
        # there, or a fractional last epoch ending at that point) holds the weights just
        # evaluated: they are not evaluated again.
        if self.step_fn is None or self._inner_step != self.step_fn():
            self._evaluate(self._epochs_done(epoch), logs)
        if self.should_stop:
            self.model.stop_training = True

    def is_evaluation_point(self, step: int, total_steps: int) -> bool:
        """Whether an evaluation is taken after `step` global batches (epoch ends, the last
        batch, and the points inside epochs)."""
        if step <= 0:
            return False
        at_end = step == total_steps or (self.steps_per_epoch and step % self.steps_per_epoch == 0)
        return bool(at_end) or self._is_inner_point(step)

    def _is_inner_point(self, step: int) -> bool:
        """Whether `step` global batches end an evaluation point inside an epoch: a point of
        `inner_points`, moved on to the next optimizer update when it falls between two."""
        if not self.inner_points or not self.steps_per_epoch:
            return False
        epoch, done = divmod(step, self.steps_per_epoch)
        start = epoch * self.steps_per_epoch
        at_updates = {p + (-(start + p)) % self.accumulation for p in self.inner_points}
        return done in at_updates  # one past the epoch: none (done < steps_per_epoch)

    def evaluate_if_due(self, model, step: int, total_steps: int) -> bool:
        """On resume: take the evaluation that was due at `step` but never recorded (the run was
        killed after the checkpoint of `step` and before its evaluation was written). The model
        holds the weights of `step`. Returns whether it evaluated.

        The entry's train_loss is null: the running training loss of the killed run is gone.
        """
        if not self.is_evaluation_point(step, total_steps) or not self.steps_per_epoch:
            return False
        done = round(step / self.steps_per_epoch, 4)
        done = int(done) if done == int(done) else done
        if any(e["epoch"] == done for e in self.state["epochs"]):
            return False
        self.set_model(model)
        self._evaluate(done, None)
        return True

    def _evaluate(self, epochs_done, logs):
        with averaged_weights(self.model):  # the optimizer's weight average, when it keeps one
            self._evaluate_weights(epochs_done, logs)

    def _evaluate_weights(self, epochs_done, logs):
        crash_point("evaluation")
        metrics = {k: float(v) for k, v in self.eval_fn(self.model).items()}
        if self.monitor not in metrics:
            raise ValueError(
                f"monitored metric {self.monitor!r} not in evaluation results {sorted(metrics)}"
            )
        if logs is not None:
            logs.update({f"val_{k}": v for k, v in metrics.items()})
        entry = {
            "epoch": epochs_done,
            "train_loss": float(logs["loss"]) if logs and "loss" in logs else None,
            **metrics,
        }
        entries = [e for e in self.state["epochs"] if e["epoch"] != epochs_done] + [entry]
        self.state["epochs"] = sorted(entries, key=lambda e: e["epoch"])
        best = self.state["best"]
        if best is None or is_better(
            metrics[self.monitor],
            best[self.monitor],
            metrics.get("loss"),
            best.get("loss"),
            on_tie=epochs_done > best["epoch"],
        ):
            self.state["best"] = dict(entry)
            if self.is_chief and self.best_weights_path is not None:
                # Whole-or-nothing: a kill leaves the previous best intact.
                save_weights_file(self.model, self.best_weights_path)
                crash_point("best_saved")
        if self.is_chief and self.state_file is not None:
            fileio.makedirs(fileio.parent(self.state_file))
            fileio.write_json(self.state_file, self.state)
