"""The measured precision choice of scripts/main_job.sh (keras_bert.training.cpu_precision)."""

import re

import pytest

from keras_bert.training.cpu_precision import choose_precision, matmul_seconds
from tests.training.commands import run_module


def test_choice_rule():
    # the AMD EPYC (AVX512_BF16, no AMX): bfloat16 products about 0.4x the float32 time
    assert choose_precision(10.0, 4.0) == "mixed_bfloat16"
    assert choose_precision(10.0, 8.0) == "mixed_bfloat16"  # exactly at the 0.8 bound
    assert choose_precision(10.0, 8.01) == "float32"  # a step's casts eat the rest
    # the Xeon that exposes AVX512_BF16 without AMX: bfloat16 products 1.8x slower
    assert choose_precision(7.2, 12.8) == "float32"
    with pytest.raises(
        ValueError, match="times must be > 0 seconds, got float32 0.0, bfloat16 1.0"
    ):
        choose_precision(0.0, 1.0)


def test_matmul_timing_is_per_product():
    small = matmul_seconds((64, 32, 48), rounds=3, products=2)
    assert set(small) == {"float32", "bfloat16"} and all(0 < s < 1 for s in small.values())


def test_command_prints_the_choice_its_timings_give():
    proc = run_module("keras_bert.training.cpu_precision", CUDA_VISIBLE_DEVICES="")
    assert proc.stdout in ("mixed_bfloat16\n", "float32\n")  # one word on stdout
    found = re.search(
        r"1024x384x1536 matmul: float32 ([\d.]+) ms, bfloat16 ([\d.]+) ms -> (\S+)", proc.stderr
    )
    assert found, proc.stderr[-2000:]
    f32, b16, said = float(found[1]), float(found[2]), found[3]
    assert said == proc.stdout.strip() == choose_precision(f32, b16)
