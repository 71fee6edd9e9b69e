"""Served requests/s and p50 / p99 latency of length-bucketed batching against
padding-to-longest batching, behind the server.

Two arms, each a fresh `python -m serving.server --enable_batching` on a free loopback port with
the same batching parameters, the second with `length_buckets` added (docs/deployment.md, section
3, "Length buckets"):
- "pad to longest": requests merge regardless of length, so a call is cut to its longest row;
- "length buckets": requests merge only within their length bucket.

`--clients` closed-loop gRPC clients (threads, one channel each; `common.closed_loop`: one untimed
call each, 1 s of warm-up, then `--seconds` measured) send Predict with one text per request to
`serving_default`. The workload is the SST-2 dev sentences ($KERAS_BERT_DATA_DIR/glue/sst2/dev.tsv)
mixed with long texts (consecutive dev sentences joined to at least `--long_words` words; the
tokenizer cuts them at the model's max_seq_length), a fraction `--long_fraction` of all requests,
in one fixed shuffled order (seed 0); client k starts at its own offset in it. Reported per arm:
requests/s, p50 and p99 latency (ms), and the ratios bucketed / padded (the target:
higher throughput and lower p99 with buckets). With `--repetitions` > 1 the arms alternate (A B,
B A, ...) and the medians are reported. Clients and server share the machine's cores.

The model is `--model_dir` (a SavedModel version directory whose `serving_default` takes one
`text` [B] string, e.g. a single-text classifier from `python -m export`); without it the MiniLM-L6
classifier (real weights, a fixed random 2-class head, max_seq_length 128) is exported once to a
temporary directory, as benchmarks/bench_reload_under_load.py does.

The full run (to be recorded on a quiet machine; appends a section to docs/results/serving.md):

    python -m benchmarks.bench_bucketed_batching --clients=16 --seconds=60 --repetitions=2

A small check that it works (about 2 minutes on 2 cores, most of it the export and two server
starts; nothing appended):

    python -m benchmarks.bench_bucketed_batching --clients=16 --seconds=5 --repetitions=1 \
        --sentences=300 --noappend

tests/benchmarks/test_bench_bucketed_batching.py checks the workload and the batching file; a run
starts two servers, too slow for CI.
"""

from __future__ import annotations

import pathlib
import tempfile

import numpy as np
from absl import app, flags

from benchmarks import common

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
    return common.batching_config(
        args["max_batch_size"],
        args["batch_timeout_micros"],
        args["num_batch_threads"],
        " ".join(sizes + [f"length_buckets: {b}" for b in length_buckets]),
    )


def run_arm(model_dir, texts, args, length_buckets: tuple, work: pathlib.Path) -> dict:
    """One arm on a fresh server; returns requests/s, p50 / p99 ms and the request count."""
    base = work / "models" / MODEL_NAME
    base.mkdir(parents=True)
    (base / "1").symlink_to(model_dir.resolve(), target_is_directory=True)
    config = work / "batching.config"
    config.write_text(batching_config(args, length_buckets))
    server_flags = [
        f"--model_base_path={base}",
        f"--model_name={MODEL_NAME}",
        "--enable_batching",
        f"--batching_parameters_file={config}",
        f"--grpc_max_threads={max(16, args['clients'])}",
    ]
    clients = args["clients"]
    with common.ServerProcess(server_flags, work / "batching.log") as server:
        server.wait_available(MODEL_NAME)

        def make_call(k):  # client k sends `texts` in order from its own offset
            stub, position = common.predict_stub(server.address), [k * len(texts) // clients]

            def call():
                text = texts[position[0] % len(texts)]
                position[0] += 1
                return stub.Predict(
                    common.predict_request(MODEL_NAME, {"text": [text]}), timeout=120
                )

            return call

        try:
            latencies, window = common.closed_loop(make_call, clients, args["seconds"])
        except RuntimeError as e:
            raise RuntimeError(f"{e}\nserver log:\n{server.log_tail()}") from None
    throughput, p50_ms, p99_ms = common.load_figures(latencies, window)
    return {
        "requests": len(latencies),
        "throughput": throughput,
        "p50_ms": p50_ms,
        "p99_ms": p99_ms,
    }


def run_benchmark(model_dir: pathlib.Path, texts: list, args: dict, work: pathlib.Path) -> dict:
    """Both arms `args['repetitions']` times, alternating their order; returns arm -> list of
    `run_arm` results."""
    results = {arm: [] for arm in ARMS}
    for r in range(args["repetitions"]):
        order = ARMS if r % 2 == 0 else ARMS[::-1]
        for arm in order:
            buckets = args["length_buckets"] if arm == "length buckets" else ()
            results[arm].append(
                run_arm(model_dir, texts, args, buckets, work / f"{r}-{ARMS.index(arm)}")
            )
    return results


def report(results: dict) -> str:
    """A markdown table (medians over repetitions) and the bucketed / padded ratios."""
    med = {
        arm: {k: common.median([x[k] for x in runs]) for k in ("throughput", "p50_ms", "p99_ms")}
        for arm, runs in results.items()
    }
    table = common.markdown_table(
        ["batching", "requests/s", "p50 ms", "p99 ms", "requests measured"],
        [
            (
                arm,
                m["throughput"],
                m["p50_ms"],
                m["p99_ms"],
                sum(x["requests"] for x in results[arm]),
            )
            for arm, m in med.items()
        ],
    )
    padded, bucketed = med[ARMS[0]], med[ARMS[1]]
    return (
        f"{table}\n\nLength buckets / pad to longest: throughput "
        f"{common.ratio(bucketed['throughput'], padded['throughput'])} (target > 1), p99 "
        f"{common.ratio(bucketed['p99_ms'], padded['p99_ms'])} (target < 1).\n"
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
        model_dir = common.served_model_dir(FLAGS.model_dir, tmp / "export")
        results = run_benchmark(model_dir, texts, args, tmp / "run")
    body = report(results) + (
        f"\n{FLAGS.clients} closed-loop clients, {FLAGS.seconds:g} s per arm, "
        f"{FLAGS.repetitions} repetition(s); workload: {len(sentences)} SST-2 dev sentences, "
        f"{FLAGS.long_fraction:.1%} long texts (>= {FLAGS.long_words} words); batching: "
        f"max_batch_size {FLAGS.max_batch_size}, allowed_batch_sizes "
        f"{args['allowed_batch_sizes']}, batch_timeout_micros {FLAGS.batch_timeout_micros}, "
        f"num_batch_threads {FLAGS.num_batch_threads}; length_buckets "
        f"{list(args['length_buckets'])}; model: "
        f"{common.served_model_name(FLAGS.model_dir)}.\n"
    )
    common.report(TOPIC, "Length-bucketed batching", body, desc, FLAGS.append)
    return 0


if __name__ == "__main__":
    define_flags()
    app.run(main)
