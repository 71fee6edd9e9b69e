"""Served latency of the exported SavedModel, in process and behind our gRPC server.

The MiniLM-L6 classifier (a fixed random head), exported to a temporary directory: 1. in process,
text in (`serving_default`) vs ids in (`encoded`) at batch 1 and --batch_size; 2. gRPC Predict of
one SST-2 dev sentence per request through `python -m serving.server` at each --clients count,
server batching off and on (one server per --batch_timeout_micros), beside in-process calls with
the same clients (method: docs/results/serving.md, "Method"). Requests (sentences)/s, p50/p99 ms.

    python -m benchmarks.bench_serving [--seconds=15] [--max_seq_length=128]
"""

import os
import pathlib
import tempfile

import numpy as np
from absl import app, flags

from benchmarks import common, serving_harness

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
HEADERS = ["path", "clients", "sentences/s", "p50 ms", "p99 ms", "vs in process, same clients"]
HEADERS += ["vs in process, batches of that size", "rows per model call (server metrics)"]


def probabilities(fn, inputs):
    """A call of the signature `fn` on `inputs` (a dict, or a function making it) to numpy."""
    return lambda: fn(**(inputs() if callable(inputs) else inputs))["probabilities"].numpy()


def text_vs_ids(loaded, sentences):
    import tensorflow as tf

    text_fn, ids_fn = loaded.signatures["serving_default"], loaded.signatures["encoded"]
    rows = []
    for b in (1, FLAGS.batch_size):
        packed = common.featurize([s.decode() for s in sentences[:b]], FLAGS.max_seq_length)
        full = {k: tf.constant(v) for k, v in packed.items()}
        width = int(packed["input_mask"].sum(1).max())  # the batch's longest row
        calls = {
            "text in (serving_default)": probabilities(
                text_fn, {"text": tf.constant(sentences[:b])}
            ),
            "ids in (encoded), padded to max_seq_length": probabilities(ids_fn, full),
            "ids in (encoded)": probabilities(ids_fn, {k: v[:, :width] for k, v in full.items()}),
        }
        np.testing.assert_allclose(
            calls["text in (serving_default)"](), calls["ids in (encoded)"](), atol=1e-4
        )
        reps = FLAGS.repetitions if b > 1 else max(2, FLAGS.repetitions // 2)
        times = common.alternate(calls, reps, warmup=2, inner=1 if b > 1 else 10, log=False)
        med = {k: common.median(v) for k, v in times.items()}
        ref = med["ids in (encoded)"]
        rows += [(n, b, b / med[n], med[n] * 1e3, common.ratio(ref, med[n])) for n in calls]
    return common.markdown_table(
        ["in process", "batch", "sentences/s", "median ms per call", "vs ids in"], rows
    )


def load_run(make_call, clients: int, rows_per_call: int = 1):
    """(rows/s, p50 ms, p99 ms) of `clients` threads calling make_call(k)() for --seconds."""
    return serving_harness.load_figures(
        *serving_harness.closed_loop(make_call, clients, FLAGS.seconds), rows_per_call
    )


def start_server(base: pathlib.Path, batch_timeout_micros, tmp: pathlib.Path):
    """A server, AVAILABLE; batching on with that timeout, or off for None (REST on only with
    batching, for its batch-size metrics)."""
    batching = batch_timeout_micros is not None
    server_flags = [f"--model_name={MODEL_NAME}", f"--model_base_path={base / MODEL_NAME}"]
    if batching:
        conf = tmp / "batching.config"
        conf.write_text(serving_harness.batching_config(16, batch_timeout_micros, 1))
        server_flags += ["--enable_batching", f"--batching_parameters_file={conf}"]
    log = tmp / f"server_{batch_timeout_micros if batching else 'nobatch'}.log"
    return serving_harness.ServerProcess(server_flags, log, rest=batching).wait_available(MODEL_NAME)


def batch_counts(rest_address) -> tuple[float, float]:
    """(rows, model calls) so far, from the server's serving_batch_size Prometheus histogram."""
    import urllib.request
    from prometheus_client.parser import text_string_to_metric_families

    url = f"http://{rest_address}/monitoring/prometheus/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
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


def in_process_runs(loaded, sentences, clients) -> dict:
    """(path, clients) -> (sentences/s, p50, p99) for in-process calls of serving_default."""
    import tensorflow as tf

    fn = loaded.signatures["serving_default"]

    def inproc(rows, callers):
        def make(k):
            it = serving_harness.rotation(sentences, k, callers)
            return probabilities(fn, lambda: {"text": tf.constant([next(it) for _ in range(rows)])})

        return make

    results = {}
    for c in clients:
        print(f"in process, {c} client(s) ...", flush=True)
        results[("in process, single sentences", c)] = load_run(inproc(1, c), c)
        if c > 1:
            results[(f"in process, batches of {c} (one caller)", c)] = load_run(inproc(c, 1), 1, c)
    return results


def server_runs(base, tmp, sentences, clients) -> tuple[dict, dict]:
    """One server per batch timeout (and one without batching), each loaded by 1..N clients.
    Returns (results as in_process_runs, rows per model call from the server's metrics)."""
    results, mean_batch = {}, {}

    def request_of(sentence):
        return serving_harness.predict_request(MODEL_NAME, {"text": [sentence]})

    for timeout in [None] + [int(t) for t in FLAGS.batch_timeout_micros] if clients else ():
        name = "gRPC Predict, batching off"
        if timeout is not None:
            name = f"gRPC Predict, batching on ({timeout / 1000:g} ms timeout)"
        with start_server(base, timeout, tmp) as server:
            for c in clients:
                print(f"{name}, {c} client(s) ...", flush=True)
                rest = server.rest_address
                before = batch_counts(rest) if rest else None
                make = serving_harness.predict_rotation(server.address, sentences, c, request_of)
                results[(name, c)] = load_run(make, c)
                if rest:
                    after = batch_counts(rest)
                    calls = after[1] - before[1]
                    mean_batch[(name, c)] = (after[0] - before[0]) / calls if calls else None
    return results, mean_batch


def results_table(results, mean_batch) -> tuple[str, list, list]:
    """The Markdown table of every run with its ratios to the in-process calls, and its notes."""
    rows = []
    for (name, c), (tput, p50, p99) in results.items():
        ref = results.get(("in process, single sentences", c), [None])[0]
        ref_batch = results.get((f"in process, batches of {c} (one caller)", c), [None])[0]
        rows_per_call = f"{mean_batch[(name, c)]:.1f}" if mean_batch.get((name, c)) else "n/a"
        ratios = common.ratio(tput, ref), common.ratio(tput, ref_batch)
        rows.append((name, c, tput, p50, p99, *ratios, rows_per_call))
    notes = [
        f"MiniLM-L6 classifier (random fixed head), serving_default, max_seq_length "
        f"{FLAGS.max_seq_length}, core-op tokenizer; SST-2 dev sentences, one per request.",
        f"Server batching: max_batch_size 16, batch_timeout_micros "
        f"{', '.join(FLAGS.batch_timeout_micros)} (one server each), num_batch_threads 1; rows "
        "per model call from the server's serving_batch_size histogram over the window. Each "
        "load window "
        f"{FLAGS.seconds:.0f} s (+1 s warm-up counted); client and server share the cores.",
    ]
    return common.markdown_table(HEADERS, rows), rows, notes


def main(argv):
    del argv
    common.set_threads_from_env()
    desc = common.machine_description(["grpcio", "tensorflow-serving-api"])
    import tensorflow as tf

    sentences = [s.encode("utf-8") for s in common.sst2_sentences("dev")[0]]
    clients = [int(c) for c in FLAGS.clients] if FLAGS.grpc else []
    with tempfile.TemporaryDirectory(prefix="bench_serving_") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        base = tmp / "models"
        path = serving_harness.sst2_classifier(FLAGS.max_seq_length).export(str(base), MODEL_NAME)
        print(f"exported {path}", flush=True)
        loaded = tf.saved_model.load(str(path))
        print("text in vs ids in ...", flush=True)
        table1 = text_vs_ids(loaded, sentences)
        print(table1, flush=True)
        results = in_process_runs(loaded, sentences, clients)
        del loaded
        served, mean_batch = server_runs(base, tmp, sentences, clients)
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
