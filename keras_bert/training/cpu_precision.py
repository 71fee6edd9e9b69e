"""Which precision trains faster on this CPU, measured rather than read from /proc/cpuinfo.

bfloat16 mixed precision pays on a CPU only where TensorFlow's oneDNN kernels run bfloat16
products in hardware, and the CPU flags do not say whether they do. Measured on 2-core machines
(docs/finetuning.md): an AMD EPYC with AVX512_BF16 and no AMX ran a bfloat16 fine-tuning step
in 0.7x the float32 time; an Intel Xeon (family 6, model 207) exposing AMX ran it in 0.75x; the
same Xeon model in a machine that exposed AVX512_BF16 but not AMX ran it in 1.33x (520 against
390 ms at batch 32 x 16 tokens), its bfloat16 matrix products 1.8x slower than float32 ones.

`fastest_cpu_precision` times the product that dominates a BERT layer (the feed-forward input
projection of MiniLM-L6 at batch 32 x 32 tokens: [1024, 384] x [384, 1536]) in float32 and in
bfloat16 on the CPU, alternating, and picks bfloat16 only when it is clearly faster.

    python -m keras_bert.training.cpu_precision    # prints mixed_bfloat16 or float32

The probe runs on the CPU (`/CPU:0`) even where a GPU is visible; it does not choose for a GPU.
There the user passes `--mixed_precision` directly: NVIDIA GPUs before Ampere (V100, T4: compute
capability below 8.0) have no fast bfloat16 matrix units, so `mixed_float16`, which trains with
dynamic loss scaling (Keras's `LossScaleOptimizer`, added by `create_optimizer(loss_scale=True)`
in every training path: fine-tuning, distillation, pretraining); on Ampere and later (A100, H100,
H200) both run in the tensor cores and `mixed_bfloat16` needs no loss scaling. `main` says so on
stderr when TensorFlow sees a GPU. Logits and losses stay float32 under both.
"""

from __future__ import annotations

import statistics
import sys
import time

# bfloat16 must take at most this fraction of the float32 time: its casts and the float32
# LayerNorm/softmax keep a training step's gain below the matmul's.
BFLOAT16_MAX_TIME_RATIO = 0.8
PROBE_SHAPE = (1024, 384, 1536)  # m, k, n


def choose_precision(
    float32_seconds: float, bfloat16_seconds: float, max_ratio: float = BFLOAT16_MAX_TIME_RATIO
) -> str:
    """ "mixed_bfloat16" when bfloat16_seconds <= max_ratio * float32_seconds, else "float32".

    Raises:
        ValueError: a time that is not positive.
    """
    if not (float32_seconds > 0 and bfloat16_seconds > 0):
        raise ValueError(
            f"times must be > 0 seconds, got float32 {float32_seconds}, bfloat16 {bfloat16_seconds}"
        )
    return "mixed_bfloat16" if bfloat16_seconds <= max_ratio * float32_seconds else "float32"


def matmul_seconds(shape=PROBE_SHAPE, rounds: int = 5, products: int = 10) -> dict[str, float]:
    """Median seconds of one [m, k] x [k, n] product on the CPU per dtype.

    Args:
        shape: (m, k, n).
        rounds: alternating rounds (float32 then bfloat16), the median kept.
        products: products per round, timed together.

    Returns:
        {"float32": s, "bfloat16": s}.
    """
    import tensorflow as tf

    m, k, n = shape
    times = {"float32": [], "bfloat16": []}
    with tf.device("/CPU:0"):
        operands = {
            name: (
                tf.cast(tf.random.stateless_normal((m, k), (1, 2)), name),
                tf.cast(tf.random.stateless_normal((k, n), (3, 4)), name),
            )
            for name in times
        }
        product = tf.function(lambda a, b: tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32)))
        for a, b in operands.values():
            product(a, b).numpy()  # trace and warm up
        for _ in range(rounds):
            for name, (a, b) in operands.items():
                start = time.perf_counter()
                for _ in range(products):
                    product(a, b).numpy()
                times[name].append((time.perf_counter() - start) / products)
    return {name: statistics.median(values) for name, values in times.items()}


def fastest_cpu_precision() -> tuple[str, dict[str, float]]:
    """("mixed_bfloat16" or "float32", the `matmul_seconds` it was chosen from)."""
    seconds = matmul_seconds()
    return choose_precision(seconds["float32"], seconds["bfloat16"]), seconds


def main() -> int:
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        print(
            "[cpu_precision] a GPU is visible: this choice is for the CPU; on an NVIDIA GPU pass "
            "--mixed_precision=mixed_float16 before Ampere, mixed_bfloat16 or mixed_float16 on "
            "Ampere and later (A100, H100, H200)",
            file=sys.stderr,
        )
    choice, seconds = fastest_cpu_precision()
    print(
        f"[cpu_precision] {PROBE_SHAPE[0]}x{PROBE_SHAPE[1]}x{PROBE_SHAPE[2]} matmul: "
        f"float32 {seconds['float32'] * 1e3:.3f} ms, bfloat16 {seconds['bfloat16'] * 1e3:.3f} ms "
        f"-> {choice}",
        file=sys.stderr,
    )
    print(choice)
    return 0


if __name__ == "__main__":
    sys.exit(main())
