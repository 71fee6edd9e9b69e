"""The REST port: its JSON conversion, its served overhead beside gRPC, and connections held.

1. the JSON conversion of a 32 x 128 `encoded` body, element by element and as served, then
   hostile bodies; 2. served p50 / p99 at 1 x 32 in process, over gRPC and over REST; 3. a REST
   client's latency while --idle_connections half-sent requests are held, and new connections
   per second (method: docs/results/hardening.md, "Method"). --baseline_tree (a checkout of an
   earlier commit) runs parts 2 and 3 against its server too, side by side.

    python -m benchmarks.bench_rest [--idle_connections=1000] [--new_connections=10000]
        [--baseline_tree=<checkout>] [--noappend]
"""

import http.client
import json
import pathlib
import resource
import socket
import tempfile
import time

import numpy as np
from absl import app, flags

from benchmarks import common, serving_harness

TOPIC = "hardening"
FLAGS = flags.FLAGS
flags.DEFINE_integer("calls", 200, "Served calls per contender (part 2), and the normal client's.")
flags.DEFINE_integer("idle_connections", 1000, "Connections held open in part 3.")
flags.DEFINE_integer("new_connections", 10000, "Connections opened one after another in part 3.")
flags.DEFINE_float("open_seconds", 300.0, "Most seconds spent opening the held connections.")
flags.DEFINE_string("baseline_tree", "", "A checkout of an earlier commit: its server too.")
flags.DEFINE_integer("max_request_bytes", 64 << 20, "The server's default, for part 1.")
flags.DEFINE_bool("append", True, common.append_help(TOPIC))

MODEL = "bench_minilm"


# ------------------------------------------------------------------ 1. conversion
def _ids_body(rows, length, seed=0):
    rng = np.random.default_rng(seed)
    instances = [
        {
            "input_word_ids": rng.integers(1000, 30000, length).tolist(),
            "input_mask": [1] * length,
            "input_type_ids": [0] * length,
        }
        for _ in range(rows)
    ]
    return json.dumps({"signature_name": "encoded", "instances": instances}).encode()


def _element_by_element(body, dtypes):
    from serving.wire import json_tensor

    doc = json.loads(body, parse_int=json_tensor._parse_int)
    batch = json_tensor._Batch(dtypes)
    for element in doc["instances"]:
        for name, value in element.items():
            batch.add(name, value)
    return batch.arrays(len(doc["instances"]))


def _as_served(body, dtypes, check):
    from serving.wire import json_tensor

    doc = json_tensor.parse_json(body)
    return json_tensor.predict_inputs(doc, dtypes, check, json_tensor.holds_no_booleans(body))[0]


def conversion():
    from serving.models.servable import Signature, TensorSpec
    from serving.wire import dtypes as dt, errors, json_tensor, tensors
    from tensorflow_serving.apis import input_pb2

    limits = tensors.Limits(max_batch_size=4096, max_text_length=65536)

    def served_as(dtypes, name, shape):  # the served conversion for this signature's inputs
        sig = Signature(name, "", {k: TensorSpec(k, v, shape) for k, v in dtypes.items()}, {}, None)
        return lambda b: _as_served(b, dtypes, lambda a, s: tensors.check_shape(sig, a, s, limits))

    ids = {k: dt.int32 for k in ("input_word_ids", "input_mask", "input_type_ids")}
    ids_in = served_as(ids, "encoded", [-1, -1])
    text_in = served_as({"text": dt.string, "text_b": dt.string}, "serving_default", [-1])
    body = _ids_body(32, 128)
    got, want = ids_in(body), _element_by_element(body, ids)
    assert all(np.array_equal(got[k], want[k]) for k in ids)
    times = common.alternate(
        {
            "element by element": lambda: _element_by_element(body, ids),
            "as served": lambda: ids_in(body),
        },
        repetitions=200,
        log=False,
    )
    rows = [
        (name, f"{common.median(t) * 1e3:.3f}", f"{common.percentile(t, 99) * 1e3:.3f}")
        for name, t in times.items()
    ]
    speedup = common.median(times["element by element"]) / common.median(times["as served"])
    long_string = b"a" * (FLAGS.max_request_bytes - 40)
    hostile = {
        "1.5 million strings": (
            json.dumps({"inputs": {"text": ["ab"] * 1_500_000, "text_b": ["c"]}}).encode(),
            text_in,
        ),
        "20,000 rows of 128 ids": (_ids_body(20_000, 128), ids_in),
        "4,096 rows of 1,024 ids": (_ids_body(4096, 1024), ids_in),
        "nesting 100,000 deep": (b'{"inputs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", ids_in),
        "one string as long as the body limit allows": (
            b'{"instances": [{"text_b": "", "text": "' + long_string + b'"}]}',
            text_in,
        ),
        ":classify, one feature of 5 million floats": (
            b'{"examples": [{"x": [' + b",".join([b"1.5"] * 5_000_000) + b"]}]}",
            lambda b: json_tensor.fill_examples(json_tensor.parse_json(b), input_pb2.Input()),
        ),
    }
    hostile_rows = []
    for name, (hostile_body, convert) in hostile.items():
        start = time.process_time()
        try:
            convert(hostile_body)
            outcome = "converted"
        except errors.ServingError as e:
            outcome = f"refused: {e.message[:70]}"
        hostile_rows.append(
            (name, f"{len(hostile_body) / 1e6:.1f}", f"{time.process_time() - start:.3f}", outcome)
        )
    return (
        common.markdown_table(["32 x 128 ids, row format", "p50 (ms)", "p99 (ms)"], rows)
        + f"\n\nSpeed-up of the served path: {speedup:.1f}x.\n\n"
        + common.markdown_table(["hostile body", "MB", "CPU s", "outcome"], hostile_rows)
    )


# ------------------------------------------------------------------ servers
def start_server(tree, base, log):
    """`python -m serving.server` started from `tree` on free ports, REST on, AVAILABLE."""
    server_flags = [f"--model_name={MODEL}", f"--model_base_path={base / MODEL}"]
    server_flags += ["--file_system_poll_wait_seconds=0", "--tensorflow_intra_op_parallelism=1"]
    return serving_harness.ServerProcess(server_flags, log, rest=True, cwd=tree).wait_available(MODEL)


IDS = common.random_batch(1, 32)  # the request of parts 2 and 3
CONNECTION_HEADERS = ["server", "quiet p50 / p99 (ms)", "connections held", "held: p50 / p99 (ms)"]
CONNECTION_HEADERS += ["p99 held / quiet", "threads quiet -> held", "new connections per s"]


def _rest_caller(server):
    """A call of POST :predict with IDS through one keep-alive connection to `server`."""
    instances = [{k: v[0].tolist() for k, v in IDS.items()}]
    body = json.dumps({"signature_name": "encoded", "instances": instances})
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=60)

    def call():
        connection.request("POST", f"/v1/models/{MODEL}:predict", body)
        response = connection.getresponse()
        response.read()
        assert response.status == 200, response.status

    return call


def served(servers, path):
    import tensorflow as tf

    fn = tf.saved_model.load(str(path)).signatures["encoded"]
    tensors = {k: tf.constant(v) for k, v in IDS.items()}
    contenders = {"in process": lambda: fn(**tensors)}
    for label, server in servers.items():
        request = serving_harness.predict_request(MODEL, IDS, "encoded")
        contenders[f"gRPC, {label}"] = serving_harness.predict_call(server.address, request)
        contenders[f"REST, {label}"] = _rest_caller(server)
    times = common.alternate(contenders, repetitions=FLAGS.calls // 10, inner=10, log=False)
    base = common.median(times["in process"])
    rows = [
        (
            name,
            f"{common.median(t) * 1e3:.2f}",
            f"{common.percentile(t, 99) * 1e3:.2f}",
            "" if name == "in process" else f"{(common.median(t) - base) * 1e3:.2f}",
        )
        for name, t in times.items()
    ]
    return common.markdown_table(
        ["1 x 32, encoded", "p50 (ms)", "p99 (ms)", "served overhead (ms)"], rows
    )


def _hold(server, count, seconds):
    """Opens up to `count` connections that each send half a POST header, for at most
    `seconds`; returns (sockets, seconds taken)."""
    held, start = [], time.monotonic()
    head = f"POST /v1/models/{MODEL}:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n"
    while len(held) < count and time.monotonic() - start < seconds:
        try:
            sock = socket.create_connection(("127.0.0.1", server.rest_port), timeout=5)
            sock.sendall(head.encode())
            held.append(sock)
        except OSError:
            time.sleep(0.05)
    return held, time.monotonic() - start


def _client_latencies(server):
    """--calls latencies of a normal REST client (a new connection)."""
    call = _rest_caller(server)
    return [common.time_call(call) for _ in range(FLAGS.calls)]


def _p50_p99(latencies) -> str:
    p50, p99 = common.median(latencies), common.percentile(latencies, 99)
    return f"{p50 * 1e3:.2f} / {p99 * 1e3:.2f}"


def connections(servers):
    rows = []
    for label, server in servers.items():
        quiet = _client_latencies(server)
        threads_quiet = serving_harness.proc_status(server.proc.pid)["Threads"]
        held, opened_s = _hold(server, FLAGS.idle_connections, FLAGS.open_seconds)
        time.sleep(1)
        threads_held = serving_harness.proc_status(server.proc.pid)["Threads"]
        try:
            loaded = _client_latencies(server)
        finally:
            for sock in held:
                sock.close()
        time.sleep(2)
        start, opened = time.monotonic(), 0
        for _ in range(FLAGS.new_connections):
            with socket.create_connection(("127.0.0.1", server.rest_port), timeout=30) as sock:
                sock.sendall(f"GET /v1/models/{MODEL} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                if sock.recv(4096).startswith(b"HTTP/1.1 200"):
                    opened += 1
        rate = opened / (time.monotonic() - start)
        held_text, threads = (
            f"{len(held)} in {opened_s:.1f} s",
            f"{threads_quiet} -> {threads_held}",
        )
        ratio = f"{common.percentile(loaded, 99) / common.percentile(quiet, 99):.2f}x"
        rate_text = f"{rate:.0f} ({opened} answered)"
        rows.append(
            (label, _p50_p99(quiet), held_text, _p50_p99(loaded), ratio, threads, rate_text)
        )
    return common.markdown_table(CONNECTION_HEADERS, rows)


def main(argv):
    del argv
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, FLAGS.idle_connections + 1024), hard))
    desc = common.machine_description(["tornado", "orjson"])
    sections = ["### 1. JSON conversion (in process)\n\n" + conversion()]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        path = serving_harness.sst2_classifier(128).export(str(tmp), MODEL)
        trees = {"this tree": common.REPO}
        if FLAGS.baseline_tree:
            trees["baseline tree"] = pathlib.Path(FLAGS.baseline_tree).resolve()
        servers = {}
        try:
            for label, tree in trees.items():
                log = tmp / f"{label.replace(' ', '_')}.log"
                servers[label] = start_server(tree, tmp, log)
            sections.append("### 2. Served, one request at a time\n\n" + served(servers, path))
            sections.append("### 3. Connections\n\n" + connections(servers))
        finally:
            for server in servers.values():
                server.stop()
    common.report(
        TOPIC,
        "REST port: conversion, served overhead, connections",
        "\n\n".join(sections),
        desc,
        FLAGS.append,
    )


if __name__ == "__main__":
    app.run(main)
