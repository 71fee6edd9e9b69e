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


@pytest.mark.slow  # the real MiniLM task again: ~25 s
def test_with_a_reserve_the_rest_of_the_run_is_scaled_by_the_measured_slowdown():
    """The main job's reserve for what is not training is measured, not assumed: with a
    reference time of 1 s no machine is as fast, so the slowdown is this measurement's own wall
    time, the reserve of 10 s is scaled by it, and both are taken off the budget."""
    proc = run_module(
        "keras_bert.training.train_speed",
        "--budget_seconds=600",
        "--train_batch_size=8",
        "--reserve_seconds=10",
        "--reference_seconds=1",
    )
    examples, slowdown = proc.stdout.split()
    found = re.search(
        r"this measurement took (\d+) s against 1 s on the reference machine: slowdown "
        r"([\d.]+); of the 600 s left, the rest of the run is given (\d+) s and training (\d+) s",
        proc.stderr,
    )
    assert found, proc.stderr[-2000:]
    spent, shown, reserve, training = int(found[1]), float(found[2]), int(found[3]), int(found[4])
    assert float(slowdown) == pytest.approx(shown, abs=0.01) and float(slowdown) > 1
    assert reserve == pytest.approx(10 * float(slowdown), abs=1)
    assert training == pytest.approx(600 - float(slowdown) - reserve, abs=2)  # spent = slowdown
    assert spent == pytest.approx(float(slowdown), abs=1) and int(examples) % 1000 == 0
