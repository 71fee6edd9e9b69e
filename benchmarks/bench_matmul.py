"""The machine's ceilings: float32 and bfloat16 N x N matrix products (GFLOP/s) by TensorFlow and,
when the optional peer is installed, PyTorch; the TensorFlow figures are the ceilings that
`bench_encoder` divides by (method: docs/results/encoder.md).

    python -m benchmarks.bench_matmul [--size=4096] [--repetitions=5] [--noappend]
"""

from absl import app, flags

from benchmarks import common

TOPIC = "encoder"
FLAGS = flags.FLAGS
flags.DEFINE_integer("size", 4096, "Matrix side N (2 N^3 FLOPs per product).")
flags.DEFINE_integer("repetitions", 5, "Alternating rounds.")
flags.DEFINE_bool("append", True, common.append_help(TOPIC))


def main(argv):
    del argv
    common.set_threads_from_env()
    desc = common.machine_description(["torch"])
    gflops = common.measure_ceilings(FLAGS.size, FLAGS.repetitions)
    base = gflops["tensorflow float32"]
    rows = [(name, f"{g:,.0f}", common.ratio(g, base)) for name, g in gflops.items()]
    table = common.markdown_table(
        [
            f"matmul {FLAGS.size}^3 ({FLAGS.repetitions} alternating reps, median)",
            "GFLOP/s",
            "vs TF float32",
        ],
        rows,
    )
    common.report(TOPIC, "Ceilings: matrix products (bench_matmul)", table, desc, FLAGS.append)


if __name__ == "__main__":
    app.run(main)
