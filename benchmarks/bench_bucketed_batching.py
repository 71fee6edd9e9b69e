"""Served requests/s and p50 / p99 latency of length-bucketed batching against
padding-to-longest batching, behind the server.

Two arms, each a fresh `python -m serving.server --enable_batching` with the same batching
parameters, the second with `length_buckets` added; `--clients` closed-loop gRPC clients send one
text per request, SST-2 dev sentences mixed with long texts (method: docs/results/serving.md,
"Method"). The model is `--model_dir`, default the MiniLM-L6 classifier exported to a temporary
directory. The full run (appends to docs/results/serving.md):

    python -m benchmarks.bench_bucketed_batching --clients=16 --seconds=60 --repetitions=2

A small check that it works (about 2 minutes on 2 cores; nothing appended):

    python -m benchmarks.bench_bucketed_batching --clients=16 --seconds=5 --repetitions=1 \
        --sentences=300 --noappend
"""

from __future__ import annotations

import pathlib
import tempfile

import numpy as np
from absl import app, flags

from benchmarks import common, serving_harness

MODEL_NAME = "bench_buckets"
ARMS = ("pad to longest", "length buckets")


def workload(sentences: list, long_fraction: float, long_words: int, size: int) -> list:
    """`size` texts: dev sentences and, a fraction `long_fraction` of them, long texts (runs of
    consecutive sentences of at least `long_words` words), in one shuffled order (seed 0)."""
    rng = np.random.default_rng(0)
    longs, i = [], 0
    while len(longs) < max(1, size // 8):
        words = []
        while len(words) < long_words:
            words += sentences[i % len(sentences)].split()
            i += 1
        longs.append(" ".join(words))
    n_long = int(round(size * long_fraction))
    texts = [longs[j % len(longs)] for j in range(n_long)]
    texts += [sentences[j % len(sentences)] for j in range(size - n_long)]
    rng.shuffle(texts)
    return texts


def batching_config(args, length_buckets: tuple) -> str:
    """The batching parameters text proto (`args`: the parsed flag values)."""
    sizes = [f"allowed_batch_sizes: {s}" for s in args["allowed_batch_sizes"]]
    return serving_harness.batching_config(
        args["max_batch_size"],
        args["batch_timeout_micros"],
        args["num_batch_threads"],
        " ".join(sizes + [f"length_buckets: {b}" for b in length_buckets]),
    )


def run_arm(model_dir, texts, args, length_buckets: tuple, work: pathlib.Path) -> tuple:
    """One arm on a fresh server: (requests/s, p50 ms, p99 ms, requests measured)."""
    base = work / "models" / MODEL_NAME
    base.mkdir(parents=True)
    (base / "1").symlink_to(model_dir.resolve(), target_is_directory=True)
    config = work / "batching.config"
    config.write_text(batching_config(args, length_buckets))
    server_flags = [f"--model_base_path={base}", f"--model_name={MODEL_NAME}", "--enable_batching"]
    server_flags += [f"--batching_parameters_file={config}"]
    server_flags += [f"--grpc_max_threads={max(16, args['clients'])}"]
    clients = args["clients"]
    with serving_harness.ServerProcess(server_flags, work / "batching.log") as server:
        server.wait_available(MODEL_NAME)

        def request_of(text):
            return serving_harness.predict_request(MODEL_NAME, {"text": [text]})

        make_call = serving_harness.predict_rotation(server.address, texts, clients, request_of, 120)
        try:
            latencies, window = serving_harness.closed_loop(make_call, clients, args["seconds"])
        except RuntimeError as e:
            raise RuntimeError(f"{e}\nserver log:\n{server.log_tail()}") from None
    return (*serving_harness.load_figures(latencies, window), len(latencies))


def run_benchmark(model_dir: pathlib.Path, texts: list, args: dict, work: pathlib.Path) -> dict:
    """Both arms `args['repetitions']` times, alternating their order; returns arm -> list of
    `run_arm` results."""
    results = {arm: [] for arm in ARMS}
    for r in range(args["repetitions"]):
        for arm in ARMS if r % 2 == 0 else ARMS[::-1]:
            buckets = args["length_buckets"] if arm == "length buckets" else ()
            work_arm = work / f"{r}-{ARMS.index(arm)}"
            results[arm].append(run_arm(model_dir, texts, args, buckets, work_arm))
    return results


def report(results: dict) -> str:
    """A markdown table (medians over repetitions) and the bucketed / padded ratios."""
    med = {arm: [common.median(x) for x in zip(*runs)][:3] for arm, runs in results.items()}
    table = common.markdown_table(
        ["batching", "requests/s", "p50 ms", "p99 ms", "requests measured"],
        [(arm, *m, sum(run[3] for run in results[arm])) for arm, m in med.items()],
    )
    (padded_tput, _, padded_p99), (bucketed_tput, _, bucketed_p99) = med[ARMS[0]], med[ARMS[1]]
    return (
        f"{table}\n\nLength buckets / pad to longest: throughput "
        f"{common.ratio(bucketed_tput, padded_tput)} (target > 1), p99 "
        f"{common.ratio(bucketed_p99, padded_p99)} (target < 1).\n"
    )


TOPIC = "serving"
FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string(
        "model_dir",
        None,
        "SavedModel version dir whose serving_default takes `text` (default: export MiniLM-L6).",
    )
    flags.DEFINE_integer("clients", 16, "Closed-loop gRPC clients (threads).", lower_bound=1)
    flags.DEFINE_float("seconds", 60.0, "Measured seconds per arm (after 1 s of warm-up).")
    flags.DEFINE_integer("repetitions", 2, "Runs of each arm, alternating.", lower_bound=1)
    flags.DEFINE_integer("sentences", None, "Use only the first N SST-2 dev sentences.")
    flags.DEFINE_float("long_fraction", 0.125, "Fraction of requests that are long texts.")
    flags.DEFINE_integer("long_words", 90, "Least words of a long text.", lower_bound=1)
    flags.DEFINE_integer("max_batch_size", 16, "Batching: max_batch_size.")
    flags.DEFINE_list("allowed_batch_sizes", ["4", "8", "16"], "Batching: allowed_batch_sizes.")
    flags.DEFINE_integer("batch_timeout_micros", 5000, "Batching: batch_timeout_micros.")
    flags.DEFINE_integer("num_batch_threads", 2, "Batching: num_batch_threads.")
    flags.DEFINE_list(
        "length_buckets", ["16", "32", "64"], "The bucketed arm's length_buckets (tokens)."
    )
    flags.DEFINE_bool("append", True, common.append_help(TOPIC))


def main(argv):
    del argv
    desc = common.machine_description(["grpcio", "tensorflow"])
    args = {
        "clients": FLAGS.clients,
        "seconds": FLAGS.seconds,
        "repetitions": FLAGS.repetitions,
        "max_batch_size": FLAGS.max_batch_size,
        "allowed_batch_sizes": [int(x) for x in FLAGS.allowed_batch_sizes],
        "batch_timeout_micros": FLAGS.batch_timeout_micros,
        "num_batch_threads": FLAGS.num_batch_threads,
        "length_buckets": tuple(int(x) for x in FLAGS.length_buckets),
    }
    sentences, _ = common.sst2_sentences("dev", FLAGS.sentences)
    texts = workload(list(sentences), FLAGS.long_fraction, FLAGS.long_words, 4 * len(sentences))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        model_dir = serving_harness.served_model_dir(FLAGS.model_dir, tmp / "export")
        results = run_benchmark(model_dir, texts, args, tmp / "run")
    body = report(results) + (
        f"\n{FLAGS.clients} closed-loop clients, {FLAGS.seconds:g} s per arm, "
        f"{FLAGS.repetitions} repetition(s); workload: {len(sentences)} SST-2 dev sentences, "
        f"{FLAGS.long_fraction:.1%} long texts (>= {FLAGS.long_words} words); batching: "
        f"max_batch_size {FLAGS.max_batch_size}, allowed_batch_sizes "
        f"{args['allowed_batch_sizes']}, batch_timeout_micros {FLAGS.batch_timeout_micros}, "
        f"num_batch_threads {FLAGS.num_batch_threads}; length_buckets "
        f"{list(args['length_buckets'])}; model: "
        f"{serving_harness.served_model_name(FLAGS.model_dir)}.\n"
    )
    common.report(TOPIC, "Length-bucketed batching", body, desc, FLAGS.append)
    return 0


if __name__ == "__main__":
    define_flags()
    app.run(main)
