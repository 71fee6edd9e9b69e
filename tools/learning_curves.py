"""Training-loss curves of our fine-tuning runs and their Hugging Face peers, side by side.

    python -m tools.learning_curves --run=ours=runs/squad_v1 \
        --run=peer=runs/squad_peer/v1.log [--block=10]

Each `--run` is `label=source`: a fine-tuning `--output_dir` of ours, run with `--log_steps=1`
(TensorBoard's `step_loss` in `logs/train`: the loss of each optimizer step; a log of Keras's own
TensorBoard has `batch_loss` instead, the running mean of the epoch, from which the loss of step
s alone is s L(s) - (s - 1) L(s - 1)), or the standard output of a peer
(`benchmarks/hf_*_peer.py --logging_steps=1`: one "step k/N loss x ..." line per optimizer step).
Prints a markdown table: per block of `--block` steps, each run's mean training loss.
"""

from __future__ import annotations

import re

import numpy as np
from absl import app, flags

from benchmarks import common
from keras_bert import cli, fileio

FLAGS = flags.FLAGS
_PEER_LINE = re.compile(r"^step (\d+)/\d+ loss ([0-9.eE+-]+|nan|inf)\b")


def define_flags() -> None:
    flags.DEFINE_multi_string("run", [], "label=source: an output_dir of ours or a peer's log.")
    flags.DEFINE_integer("block", 10, "Steps per table row.", lower_bound=1)


def step_losses_from_running_means(means: dict[int, float]) -> dict[int, float]:
    """{step: loss of that step} from Keras's running means {step: mean of steps 1..step}, for
    the steps whose predecessor is known (all of them at --log_steps=1)."""
    return {
        s: m if s == 1 else s * m - (s - 1) * means[s - 1]
        for s, m in means.items()
        if s == 1 or s - 1 in means
    }


def ours(output_dir: str) -> dict[int, float]:
    """Per-step training loss of one of our runs (its TensorBoard `step_loss`, or Keras's
    `batch_loss`)."""
    import tensorflow as tf
    from tensorboard.backend.event_processing import event_accumulator

    from keras_bert import fileio

    logs = fileio.join(output_dir, "logs", "train")
    if not fileio.isdir(logs):
        return {}
    events = event_accumulator.EventAccumulator(logs, size_guidance={"tensors": 0})
    events.Reload()
    tags = events.Tags()["tensors"]

    def points(tag):
        return {e.step: float(tf.make_ndarray(e.tensor_proto)) for e in events.Tensors(tag)}

    if "step_loss" in tags:
        return points("step_loss")
    if "batch_loss" not in tags:  # no logs, or a run without per-batch points
        return {}
    return step_losses_from_running_means(points("batch_loss"))


def peer(log_text: str) -> dict[int, float]:
    """Per-step training loss from a peer's "step k/N loss x" lines."""
    losses = {}
    for line in fileio.text_lines(log_text):
        match = _PEER_LINE.match(line.strip())
        if match:
            losses[int(match.group(1))] = float(match.group(2))
    return losses


def load(source: str) -> dict[int, float]:
    """The per-step losses of `source` (`ours` of a directory, else `peer` of a log).

    Raises:
        ValueError: one line saying why `source` cannot be read: nothing there, a file system
            that cannot be reached, text that is not UTF-8, a read that fails.
    """
    try:
        fileio.check_reachable(source, "it:")
        if fileio.isdir(source):
            return ours(source)
        return peer(fileio.read_user_text(source))
    except fileio.UnreachablePathError as e:
        raise ValueError(str(e)) from None
    except fileio.not_found_errors():
        raise ValueError(f"no such file or directory: {source}") from None
    except fileio.UserFileError as e:
        raise ValueError(e.problem) from None
    except fileio.file_errors() as e:
        raise ValueError(f"cannot read {source}: {e}") from None


def table(runs: dict[str, dict[int, float]], block: int) -> str:
    """Rows "steps a-b" with each run's mean loss over the steps of that block it has."""
    last = max((max(r) for r in runs.values() if r), default=0)
    rows = []
    for start in range(1, last + 1, block):
        end = min(start + block - 1, last)
        cells = []
        for losses in runs.values():
            values = [losses[s] for s in range(start, end + 1) if s in losses]
            cells.append(f"{np.mean(values):.3f}" if values else "")
        rows.append((f"{start}-{end}", *cells))
    return common.markdown_table(["steps", *runs], rows)


def main(argv):
    del argv
    sources = {}  # label -> (spec, source), every --run checked before any is read
    for spec in FLAGS.run:
        label, sep, source = spec.partition("=")
        if not sep or not label or not source:
            raise app.UsageError(f"--run={spec!r}: expected label=source")
        if label in sources:
            raise app.UsageError(f"--run={spec!r}: the label {label!r} is given twice")
        sources[label] = spec, source
    runs = {}
    for label, (spec, source) in sources.items():
        try:
            runs[label] = load(source)
        except ValueError as e:
            raise app.UsageError(f"--run={spec!r}: {e}") from None
        if not runs[label]:
            raise app.UsageError(
                f"--run={spec!r}: no per-step training loss found in {source} (an output_dir of "
                "ours needs a run with --log_steps=1; a peer log, --logging_steps=1)"
            )
    if not runs:
        raise app.UsageError("give at least one --run=label=source")
    print(table(runs, FLAGS.block))


if __name__ == "__main__":
    define_flags()
    cli.run(main)
