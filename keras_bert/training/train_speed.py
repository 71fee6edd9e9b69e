"""How many training examples a fine-tuning run can take in a time budget, measured on this machine.

A run's length is fixed before it starts (the learning-rate schedule decays to zero at the last
step), so a job that must end within a budget sizes itself from a short measurement: the real
task model (encoder from `init_checkpoint`, classifier head, the fine-tuning optimizer) trains a
few batches of the given shape in the given precision, and the median seconds per batch after
the first (tracing) ones gives examples per second. The main job (`scripts/main_job.sh`) uses it
to pick how many SST-2 sentences fit its 10 minutes, whatever the CPU and its precision.

    python -m keras_bert.training.train_speed --budget_seconds=420 --mixed_precision=float32 \
        --min_examples=20000 --max_examples=67349
    # prints the number of examples; the measurement and the arithmetic go to stderr

The job also keeps time for what is not training (start, evaluations, export, server), and that
time grows on a slower or busier machine too, so it is measured, not assumed: with
`--reserve_seconds=R --reference_seconds=W`, R is what the rest of the run takes (with margin)
on the reference machine where this measurement itself took W seconds; here the measurement's
own wall time w gives the slowdown s = max(1, w / W); `--budget_seconds` is then what is left of
the whole job as this command starts, the training's share of it `budget_seconds - w - R * s`,
and the command prints the examples, then s.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

# SST-2 sentences in length-grouped batches are cut to their longest row: 1.16M tokens over the
# 67,349 training sentences (docs/finetuning.md), 17.2 tokens a row on average.
SST2_MEAN_BATCH_TOKENS = 18


@dataclasses.dataclass(frozen=True)
class SpeedPlan:
    """The measurement and what it allows.

    seconds_per_batch: median seconds of one training batch after warm-up.
    examples_per_second: batch_size / seconds_per_batch.
    budget_examples: examples that fit in the budget, rounded down to a multiple of `round_to`,
        at most `max_examples`.
    examples: what to train: `budget_examples`, raised to `min_examples` when fewer fit (the
        run then takes longer than the budget: `over_budget` says so).
    """

    batch_size: int
    seq_length: int
    mixed_precision: str
    seconds_per_batch: float
    examples_per_second: float
    budget_seconds: float
    budget_examples: int
    examples: int

    @property
    def over_budget(self) -> bool:
        return self.examples > self.budget_examples

    @property
    def training_seconds(self) -> float:
        """Estimated seconds of training steps for `examples`."""
        return -(-self.examples // self.batch_size) * self.seconds_per_batch


def examples_in_budget(
    seconds_per_batch: float,
    batch_size: int,
    budget_seconds: float,
    max_examples: int | None = None,
    round_to: int = 1000,
) -> int:
    """Whole batches that fit in `budget_seconds`, as examples rounded down to `round_to`.

    Raises:
        ValueError: a non-positive time, batch size or budget.
    """
    if not (seconds_per_batch > 0 and batch_size > 0 and budget_seconds > 0):
        raise ValueError(
            f"need positive seconds_per_batch ({seconds_per_batch}), batch_size "
            f"({batch_size}) and budget_seconds ({budget_seconds})"
        )
    examples = int(budget_seconds // seconds_per_batch) * batch_size
    examples = examples // round_to * round_to
    return examples if max_examples is None else min(examples, max_examples)


def seconds_per_batch(
    init_checkpoint: str,
    mixed_precision: str,
    batch_size: int,
    seq_length: int,
    steps: int = 6,
    warmup_steps: int = 2,
) -> float:
    """Median seconds of one training step of a 2-class `TextClassifier` on `init_checkpoint`.

    The model is compiled as fine-tuning compiles it (`trainer.compile_task`: AdamW with
    warm-up and decay, the task's loss); the batch is random ids of shape
    [batch_size, seq_length] with every token real.
    """
    import keras
    import numpy as np

    from keras_bert import checkpoints
    from keras_bert.tasks.text_classifier import TextClassifier
    from keras_bert.training.args import default_learning_rate
    from keras_bert.training.trainer import compile_task
    from keras_bert.training.families.classification import ClassifierArgs
    from keras_bert.training.optimizer import set_mixed_precision

    set_mixed_precision(mixed_precision)
    try:
        encoder = checkpoints.load_encoder(init_checkpoint)
        task = TextClassifier(encoder, 2)
        args = ClassifierArgs(
            task_name="sst2",
            output_dir="unused",
            init_checkpoint=init_checkpoint,
            mixed_precision=mixed_precision,
        )
        compile_task(
            task,
            args,
            num_train_steps=1000,
            learning_rate=default_learning_rate(encoder.bert_config.hidden_size),
        )
        rng = np.random.default_rng(0)
        features = {
            "input_word_ids": rng.integers(
                1000, encoder.bert_config.vocab_size, (batch_size, seq_length), dtype=np.int32
            ),
            "input_mask": np.ones((batch_size, seq_length), np.int32),
            "input_type_ids": np.zeros((batch_size, seq_length), np.int32),
        }
        labels = rng.integers(0, 2, batch_size)
        times = []
        for _ in range(warmup_steps + steps):
            start = time.perf_counter()
            task.train_on_batch(features, labels)
            times.append(time.perf_counter() - start)
        return statistics.median(times[warmup_steps:])
    finally:
        keras.mixed_precision.set_global_policy("float32")


def plan_from(
    seconds: float,
    mixed_precision: str,
    budget_seconds: float,
    batch_size: int = 32,
    seq_length: int = SST2_MEAN_BATCH_TOKENS,
    min_examples: int = 0,
    max_examples: int | None = None,
) -> SpeedPlan:
    """The `SpeedPlan` of a measured `seconds` per batch (`examples_in_budget`, then at least
    `min_examples`, at most `max_examples`)."""
    fits = examples_in_budget(seconds, batch_size, budget_seconds, max_examples)
    examples = max(fits, min_examples)
    if max_examples is not None:
        examples = min(examples, max_examples)
    return SpeedPlan(
        batch_size,
        seq_length,
        mixed_precision,
        seconds,
        batch_size / seconds,
        budget_seconds,
        fits,
        examples,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--init_checkpoint", default="minilm_l6_h384_uncased")
    parser.add_argument(
        "--mixed_precision",
        default="float32",
        choices=["float32", "mixed_bfloat16", "mixed_float16"],
    )
    parser.add_argument(
        "--budget_seconds",
        type=float,
        required=True,
        help="seconds of training steps the run may take (with --reserve_seconds: what is left of "
        "the whole job as this command starts)",
    )
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument(
        "--seq_length",
        type=int,
        default=SST2_MEAN_BATCH_TOKENS,
        help="tokens per row of the measured batch (SST-2's length-grouped mean)",
    )
    parser.add_argument(
        "--min_examples",
        type=int,
        default=0,
        help="train at least this many, even past the budget (said on stderr)",
    )
    parser.add_argument("--max_examples", type=int, default=None, help="the data's size")
    parser.add_argument(
        "--reserve_seconds",
        type=float,
        default=0.0,
        help="seconds the rest of the run takes on the reference machine, scaled by this "
        "machine's measured slowdown and taken off --budget_seconds",
    )
    parser.add_argument(
        "--reference_seconds",
        type=float,
        default=None,
        help="this command's own wall time on the reference machine (with --reserve_seconds)",
    )
    args = parser.parse_args(argv)
    if args.budget_seconds <= 0:
        parser.error(f"--budget_seconds must be > 0, got {args.budget_seconds}")
    if args.reserve_seconds and not (args.reference_seconds and args.reference_seconds > 0):
        parser.error("--reserve_seconds needs --reference_seconds > 0")
    start = time.monotonic()
    seconds = seconds_per_batch(
        args.init_checkpoint, args.mixed_precision, args.train_batch_size, args.seq_length
    )
    spent = time.monotonic() - start
    slowdown = max(1.0, spent / args.reference_seconds) if args.reserve_seconds else 1.0
    reserve = args.reserve_seconds * slowdown
    training = args.budget_seconds - (spent + reserve if args.reserve_seconds else 0.0)
    result = plan_from(
        seconds,
        args.mixed_precision,
        max(1.0, training),
        batch_size=args.train_batch_size,
        seq_length=args.seq_length,
        min_examples=args.min_examples,
        max_examples=args.max_examples,
    )
    if args.reserve_seconds:
        print(
            f"[train_speed] this measurement took {spent:.0f} s against "
            f"{args.reference_seconds:g} s on the reference machine: slowdown {slowdown:.2f}; of "
            f"the {args.budget_seconds:.0f} s left, the rest of the run is given {reserve:.0f} s "
            f"and training {max(1.0, training):.0f} s",
            file=sys.stderr,
        )
    print(describe(result), file=sys.stderr)
    print(result.examples if not args.reserve_seconds else f"{result.examples} {slowdown:.3f}")
    return 0


def describe(result: SpeedPlan) -> str:
    """The measurement and the choice, in one or two lines."""
    line = (
        f"[train_speed] {result.mixed_precision}, batch {result.batch_size} x "
        f"{result.seq_length} tokens: {result.seconds_per_batch * 1e3:.0f} ms a batch, "
        f"{result.examples_per_second:.0f} examples/s -> {result.budget_examples} examples "
        f"fit in {result.budget_seconds:.0f} s of training"
    )
    if result.over_budget:
        line += (
            f"; training {result.examples} (the minimum asked for), about "
            f"{result.training_seconds:.0f} s: over the budget on this machine"
        )
    return line


if __name__ == "__main__":
    sys.exit(main())
