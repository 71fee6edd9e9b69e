"""The main job's measured size (keras_bert.training.train_speed): the arithmetic and the command."""

import re

import pytest

from keras_bert.training.train_speed import describe, examples_in_budget, plan_from
from tests.training.commands import run_module


def test_examples_in_budget_counts_whole_batches_rounded_down():
    # 420 s at 0.384 s a batch of 32: 1,093 whole batches = 34,976 examples -> 34,000
    assert examples_in_budget(0.384, 32, 420) == 34_000
    assert examples_in_budget(0.384, 32, 420, round_to=1) == 34_976
    assert examples_in_budget(0.1, 32, 420, max_examples=67_349) == 67_349  # all of SST-2
    assert examples_in_budget(0.384, 32, 10) == 0
    with pytest.raises(
        ValueError,
        match=r"need positive seconds_per_batch \(0\), batch_size \(32\) "
        r"and budget_seconds \(420\)",
    ):
        examples_in_budget(0, 32, 420)


def test_plan_keeps_the_minimum_and_says_it_is_over_budget():
    fits = plan_from(0.384, "float32", 420, min_examples=20_000, max_examples=67_349)
    assert (fits.budget_examples, fits.examples, fits.over_budget) == (34_000, 34_000, False)
    assert describe(fits) == (
        "[train_speed] float32, batch 32 x 18 tokens: 384 ms a batch, 83 "
        "examples/s -> 34000 examples fit in 420 s of training"
    )
    slow = plan_from(0.9, "float32", 420, min_examples=20_000, max_examples=67_349)
    assert (slow.budget_examples, slow.examples, slow.over_budget) == (14_000, 20_000, True)
    assert slow.training_seconds == pytest.approx(625 * 0.9)  # 625 batches of 32
    assert describe(slow).endswith(
        "; training 20000 (the minimum asked for), about 562 s: over the budget on this machine"
    )


@pytest.mark.slow  # builds the real MiniLM task and trains 8 batches of 8 x 18: ~25 s
def test_command_prints_the_size_its_measurement_gives():
    proc = run_module(
        "keras_bert.training.train_speed",
        "--budget_seconds=30",
        "--train_batch_size=8",
        "--min_examples=1000",
        "--max_examples=67349",
    )
    found = re.search(
        r"float32, batch 8 x 18 tokens: (\d+) ms a batch, \d+ examples/s -> (\d+) "
        r"examples fit in 30 s of training",
        proc.stderr,
    )
    assert found, proc.stderr[-2000:]
    assert re.fullmatch(r"\d+\n", proc.stdout)  # one number on stdout
    printed, fits = int(proc.stdout), int(found[2])
    assert printed == max(fits, 1000) and printed % 1000 == 0
    assert 0 < int(found[1]) < 30_000
