"""What a task family adds to the one fine-tuning driver (`keras_bert.training.trainer.run`).

Model Garden's `official/core/base_task.py` split: the trainer knows no family; a family (one small
module in `families/`) says what is particular to it: read the splits, build the task, its training
arrays, evaluate, the metric that picks the best checkpoint, extra outputs. Everything here has a
default but `read`, `build_task`, `train_arrays` and `evaluator`.
"""

from __future__ import annotations

from typing import Callable

from keras_bert.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert.training import model_setup
from keras_bert.training.args import TrainingArgs


class Family:
    """The interface of a task family; one subclass per family (`families/`), one instance each.

    Class attributes (the trainer reads `monitor` and `model_name` only through their hooks,
    `monitor_of` and `model_name_of`, whose defaults return them):
        name: str. The family's name, recorded in config.json and metrics.json.
        Args: the family's argument set (a `TrainingArgs` subclass, usually of `FinetuneArgs`).
        epochs: float. The default `--num_train_epochs` (raised to reach `--min_train_steps`).
        model_name: str or None. The default export name (None: output_dir's last name).
        monitor: str. The dev metric that picks the best evaluation (`selection`).
        labels_per_position: bool. `train_arrays`' labels are [N, T], one per token, and are cut
            with the batch's tokens (NER).
        label_padding: int. The label of a filler row that static-shape batches add
            (`batches.train_batches`): 0, or a label the family's loss ignores (NER).
    """

    name: str = "family"
    Args: type[TrainingArgs] = TrainingArgs
    epochs: float = 3.0
    model_name: str | None = None
    monitor: str = "accuracy"
    labels_per_position: bool = False
    label_padding: int = 0

    def source(self, args: TrainingArgs) -> tuple[dict, BertPreprocessor | None]:
        """(resolved settings for config.json, preprocessor): vocabulary and casing from the
        flags or the checkpoint (`model_setup.resolve_vocab`)."""
        vocab_file, lower = model_setup.resolve_vocab(args)
        return (
            {"vocab_file": vocab_file, "do_lower_case": lower},
            BertPreprocessor(vocab_file, do_lower_case=lower, max_seq_length=args.max_seq_length),
        )

    def read(self, args: TrainingArgs, preprocessor: BertPreprocessor | None) -> object:
        """The run's data (splits, label space; encoded when it does not need the task).

        Raises:
            ValueError / FileNotFoundError: bad data, naming the file or row.
        """
        raise NotImplementedError

    def build_task(self, args: TrainingArgs, data, preprocessor: BertPreprocessor | None):
        """The task (called under the strategy's scope, after the run's seed is set)."""
        raise NotImplementedError

    def default_learning_rate(self, task) -> float:
        """`--learning_rate` when not given (recorded as derived in config.json)."""
        return 5e-5

    def train_arrays(self, task, data) -> tuple[dict, object]:
        """(features: dict of int32 numpy [N, ..., T] with `input_mask`, labels: numpy [N] or
        [N, T], or a dict of [N] arrays). Asked once per `prepare` (the trainer keeps them for
        every restart), so a family encodes without keeping a copy."""
        raise NotImplementedError

    def trains(self, data) -> bool:
        """Whether the run trains (SQuAD may only predict)."""
        return True

    def loss(self, task, args: TrainingArgs):
        """The training loss; "auto": the task's own (`Task.default_loss`)."""
        return "auto"

    def evaluator(self, args: TrainingArgs, data) -> Callable[[object], dict] | None:
        """callable(task) -> {metric: float} (with "loss", the dev loss, when the family can
        tell it), or None for no evaluation during training (the last weights are kept)."""
        raise NotImplementedError

    def monitor_of(self, data) -> str:
        """The dev metric that picks the best evaluation for this data (default: `monitor`)."""
        return self.monitor

    def tune(self, args: TrainingArgs, data, task) -> dict:
        """Settings of the kept task chosen after training on a dev split (SQuAD v2.0's null
        threshold), set on `task`; the metrics they add to metrics.json, {} when none (the
        trainer saves best_model.keras again when some are)."""
        return {}

    def finish(self, args: TrainingArgs, data, task, out: str) -> dict:
        """Extra outputs of the kept task in `out` (scores of held-out splits, prediction
        files); the metrics they add to metrics.json."""
        return {}

    def model_name_of(self, summary: dict) -> str | None:
        """The export's model name when --model_name is not given (default: `model_name`)."""
        return self.model_name

    def headline(self, summary: dict) -> dict:
        """The one line a recipe prints: label -> value."""
        best = summary["best"] or {}
        return {
            f"dev {summary['monitor']}": best.get(summary["monitor"]),
            "after": epochs_trained(best.get("epoch")),
        }

    def export_config(self, summary: dict) -> dict:
        """What the export records of the run (assets/export_config.json)."""
        return {"dev_metrics": summary["best"], "monitor": summary["monitor"]}


def epochs_trained(epoch) -> str | None:
    """An evaluation's epochs as the headline says them: "1 epoch", "0.888 epochs" (never a
    bare 0.8880 beside an accuracy); None when there is no evaluation."""
    if epoch is None:
        return None
    return f"{epoch:g} epoch{'' if epoch == 1 else 's'}"
