"""Served latency of the exported SavedModel, in process and behind our gRPC server.

Builds a `BertClassifier` on the real MiniLM weights (a fixed random 2-class head, seed 0: speed
does not depend on the head) and exports it with `TextClassifier.export`
(core-op tokenizer) to a temporary directory, then measures
1. in process (`tf.saved_model.load`): `serving_default` (text in, tokenized in the graph) vs
   `encoded` (ids in, tokenized beforehand; padded to max_seq_length as serving_default pads,
   and padded only to the batch's longest row), batch 1 and --batch_size, alternating, medians;
2. gRPC Predict (`serving_default`, one SST-2 dev sentence per request) through
   `python -m serving.server`, with 1 and 16 concurrent clients (threads, one channel each), server
   batching off and on (max_batch_size 16; one server per --batch_timeout_micros value, default
   5 and 20 ms; the mean rows per model call read from the server's Prometheus metrics), against
   in-process calls of the same loaded
   SavedModel with the same client counts and, for batching, in-process calls of batches of
   the size the clients offer (16 = the batch mix the server can form at best).
Throughput in requests (sentences)/s, latency p50/p99 ms per request.

    python -m benchmarks.bench_serving [--seconds=15] [--max_seq_length=128]
"""

import os
import pathlib
import tempfile
import threading

import numpy as np
from absl import app, flags

from benchmarks import common

TOPIC = "serving"
FLAGS = flags.FLAGS
flags.DEFINE_integer("max_seq_length", 128, "Tokens per sentence in serving_default.")
flags.DEFINE_integer("batch_size", 32, "In-process batch for text-in vs ids-in.")
flags.DEFINE_integer("repetitions", 5, "Alternating rounds for text-in vs ids-in.")
flags.DEFINE_float("seconds", 15.0, "Duration of each client-load measurement.")
flags.DEFINE_list("clients", ["1", "16"], "Concurrent client counts.")
flags.DEFINE_list(
    "batch_timeout_micros",
    ["5000", "20000"],
    "Server batching: wait after the first "
    "request of a batch; one batching-on server (and table row) per value.",
)
flags.DEFINE_bool("grpc", True, "Run the client-load part (in process and through the server).")
flags.DEFINE_bool("append", True, common.append_help(TOPIC))

MODEL_NAME = "bench_minilm"


def text_vs_ids(loaded, sentences):
    import tensorflow as tf

    text_fn, ids_fn = loaded.signatures["serving_default"], loaded.signatures["encoded"]
    rows = []
    for b in (1, FLAGS.batch_size):
        texts = tf.constant(sentences[:b])
        packed = common.featurize([s.decode() for s in sentences[:b]], FLAGS.max_seq_length)
        full = {k: tf.constant(v) for k, v in packed.items()}
        width = int(packed["input_mask"].sum(1).max())  # the batch's longest row
        trimmed = {k: v[:, :width] for k, v in full.items()}
        np.testing.assert_allclose(
            text_fn(text=texts)["probabilities"].numpy(),
            ids_fn(**trimmed)["probabilities"].numpy(),
            atol=1e-4,
        )
        calls = {
            "text in (serving_default)": lambda t=texts: text_fn(text=t)["probabilities"].numpy(),
            "ids in (encoded), padded to max_seq_length": lambda i=full: ids_fn(**i)[
                "probabilities"
            ].numpy(),
            "ids in (encoded)": lambda i=trimmed: ids_fn(**i)["probabilities"].numpy(),
        }
        reps = FLAGS.repetitions if b > 1 else max(2, FLAGS.repetitions // 2)
        times = common.alternate(calls, reps, warmup=2, inner=1 if b > 1 else 10, log=False)
        med = {k: common.median(v) for k, v in times.items()}
        for name in calls:
            rows.append(
                (
                    name,
                    b,
                    b / med[name],
                    med[name] * 1e3,
                    common.ratio(med["ids in (encoded)"], med[name]),
                )
            )
    return common.markdown_table(
        ["in process", "batch", "sentences/s", "median ms per call", "vs ids in"], rows
    )


def load_run(make_call, clients: int, seconds: float, rows_per_call: int = 1):
    """(rows/s, p50 ms, p99 ms) of `clients` threads calling make_call()() (`common.closed_loop`)."""
    lat, window = common.closed_loop(lambda _: make_call(), clients, seconds)
    return common.load_figures(lat, window, rows_per_call)


def start_server(base: pathlib.Path, batch_timeout_micros, tmp: pathlib.Path):
    """A server, AVAILABLE; batching on with that timeout, or off for None (REST on only with
    batching, for its batch-size metrics)."""
    batching = batch_timeout_micros is not None
    server_flags = [f"--model_name={MODEL_NAME}", f"--model_base_path={base / MODEL_NAME}"]
    if batching:
        conf = tmp / "batching.config"
        conf.write_text(common.batching_config(16, batch_timeout_micros, 1))
        server_flags += ["--enable_batching", f"--batching_parameters_file={conf}"]
    log = tmp / f"server_{batch_timeout_micros if batching else 'nobatch'}.log"
    return common.ServerProcess(server_flags, log, rest=batching).wait_available(MODEL_NAME)


def batch_counts(rest_address) -> tuple[float, float]:
    """(rows, model calls) so far, from the server's serving_batch_size Prometheus histogram."""
    import urllib.request
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(
        f"http://{rest_address}/monitoring/prometheus/metrics", timeout=10
    ) as r:
        text = r.read().decode()
    rows = calls = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "serving_batch_size":
            for sample in family.samples:
                if sample.name.endswith("_sum"):
                    rows += sample.value
                elif sample.name.endswith("_count"):
                    calls += sample.value
    return rows, calls


def grpc_caller(address, sentence_source):
    def make():
        stub, it = common.predict_stub(address), sentence_source()

        def call():
            request = common.predict_request(MODEL_NAME, {"text": [next(it)]})
            response = stub.Predict(request, timeout=60)
            assert response.outputs["probabilities"].tensor_shape.dim[0].size == 1

        return call

    return make


def in_process_runs(loaded, sentence_source, clients) -> dict:
    """(path, clients) -> (sentences/s, p50, p99) for in-process calls of serving_default."""
    import tensorflow as tf

    fn = loaded.signatures["serving_default"]

    def inproc(rows):
        def make():
            it = sentence_source()
            return lambda: fn(text=tf.constant([next(it) for _ in range(rows)]))[
                "probabilities"
            ].numpy()

        return make

    results = {}
    for c in clients:
        print(f"in process, {c} client(s) ...", flush=True)
        results[("in process, single sentences", c)] = load_run(inproc(1), c, FLAGS.seconds)
        if c > 1:
            results[(f"in process, batches of {c} (one caller)", c)] = load_run(
                inproc(c), 1, FLAGS.seconds, rows_per_call=c
            )
    return results


def server_runs(base, tmp, sentence_source, clients) -> tuple[dict, dict]:
    """One server per batch timeout (and one without batching), each loaded by 1..N clients.
    Returns (results as in_process_runs, rows per model call from the server's metrics)."""
    results, mean_batch = {}, {}
    for timeout in [None] + [int(t) for t in FLAGS.batch_timeout_micros] if clients else ():
        server = start_server(base, timeout, tmp)
        rest = server.rest_address
        name = (
            "gRPC Predict, batching off"
            if timeout is None
            else f"gRPC Predict, batching on ({timeout / 1000:g} ms timeout)"
        )
        try:
            for c in clients:
                print(f"{name}, {c} client(s) ...", flush=True)
                before = batch_counts(rest) if rest else None
                results[(name, c)] = load_run(
                    grpc_caller(server.address, sentence_source), c, FLAGS.seconds
                )
                if rest:
                    after = batch_counts(rest)
                    calls = after[1] - before[1]
                    mean_batch[(name, c)] = (after[0] - before[0]) / calls if calls else None
        finally:
            server.stop()
    return results, mean_batch


def results_table(results, mean_batch) -> tuple[str, list, list]:
    """The Markdown table of every run with its ratios to the in-process calls, and its notes."""
    rows = []
    for (name, c), (tput, p50, p99) in results.items():
        ref = results.get(("in process, single sentences", c))
        ref_batch = results.get((f"in process, batches of {c} (one caller)", c))
        rows.append(
            (
                name,
                c,
                tput,
                p50,
                p99,
                common.ratio(tput, ref[0] if ref else None),
                common.ratio(tput, ref_batch[0] if ref_batch else None),
                f"{mean_batch[(name, c)]:.1f}" if mean_batch.get((name, c)) else "n/a",
            )
        )
    table2 = common.markdown_table(
        [
            "path",
            "clients",
            "sentences/s",
            "p50 ms",
            "p99 ms",
            "vs in process, same clients",
            "vs in process, batches of that size",
            "rows per model call (server metrics)",
        ],
        rows,
    )
    notes = [
        f"MiniLM-L6 classifier (random fixed head), serving_default, max_seq_length "
        f"{FLAGS.max_seq_length}, core-op tokenizer; SST-2 dev sentences, one per request.",
        f"Server batching: max_batch_size 16, batch_timeout_micros "
        f"{', '.join(FLAGS.batch_timeout_micros)} (one server each), num_batch_threads 1; rows "
        "per model call from the server's serving_batch_size histogram over the window. Each "
        "load window "
        f"{FLAGS.seconds:.0f} s (+1 s warm-up counted); client and server share the cores.",
    ]
    return table2, rows, notes


def main(argv):
    del argv
    common.set_threads_from_env()
    desc = common.machine_description(["grpcio", "tensorflow-serving-api"])
    import tensorflow as tf

    sentences = [s.encode("utf-8") for s in common.sst2_sentences("dev")[0]]

    def sentence_source():
        i = np.random.default_rng(threading.get_ident() % 1000).integers(len(sentences))
        while True:
            i = (i + 1) % len(sentences)
            yield sentences[i]

    clients = [int(c) for c in FLAGS.clients] if FLAGS.grpc else []
    with tempfile.TemporaryDirectory(prefix="bench_serving_") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        base = tmp / "models"
        path = common.sst2_classifier(FLAGS.max_seq_length).export(str(base), MODEL_NAME)
        print(f"exported {path}", flush=True)
        loaded = tf.saved_model.load(str(path))
        print("text in vs ids in ...", flush=True)
        table1 = text_vs_ids(loaded, sentences)
        print(table1, flush=True)
        results = in_process_runs(loaded, sentence_source, clients)
        del loaded
        served, mean_batch = server_runs(base, tmp, sentence_source, clients)
        results.update(served)
    table2, rows, notes = results_table(results, mean_batch)
    common.report(
        TOPIC,
        "Serving: SavedModel in process and gRPC (bench_serving)",
        table1 + ("\n\n" + table2 if rows else ""),
        desc,
        FLAGS.append,
        notes=notes,
    )


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    app.run(main)
