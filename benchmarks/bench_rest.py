"""The REST port: its JSON conversion, its served overhead beside gRPC, and connections held.

1. p50 / p99 of the served JSON conversion of a 32 x 128 `encoded` body, then the CPU seconds of
   hostile bodies; 2. served p50 / p99 at 1 x 32 in process, over gRPC and over REST; 3. a REST
   client's latency while --idle_connections half-sent requests are held, and new connections
   per second (method: docs/results/hardening.md, "Method").

    python -m benchmarks.bench_rest [--idle_connections=1000] [--new_connections=10000] [--noappend]
"""

import functools
import http.client
import json
import pathlib
import resource
import socket
import tempfile
import time

from absl import flags

from benchmarks import common, serving_harness
from keras_bert import cli

TOPIC = "hardening"
BLOCK = 10  # part 2: calls of a contender in a row
FLAGS = flags.FLAGS
flags.DEFINE_integer(
    "calls",
    200,
    f"Served calls per contender (part 2: alternating blocks of {BLOCK}, rounded down to whole "
    "blocks), and the normal client's (part 3).",
)
flags.DEFINE_integer("idle_connections", 1000, "Connections held open in part 3.")
flags.DEFINE_integer("new_connections", 10000, "Connections opened one after another in part 3.")
flags.DEFINE_float("open_seconds", 300.0, "Most seconds spent opening the held connections.")
flags.DEFINE_integer("max_request_bytes", 64 << 20, "The server's default, for part 1.")
flags.DEFINE_bool("append", True, common.append_help(TOPIC))
common.bounds(
    "open_seconds", calls=BLOCK, idle_connections=1, new_connections=1, max_request_bytes=1
)

MODEL = "bench_minilm"


# ------------------------------------------------------------------ 1. conversion
def ids_body(rows: int, length: int) -> bytes:
    """A row-format `encoded` request body of `common.random_batch(rows, length)`."""
    batch = common.random_batch(rows, length)
    instances = [{k: v[i].tolist() for k, v in batch.items()} for i in range(rows)]
    return json.dumps({"signature_name": "encoded", "instances": instances}).encode()


def conversion():
    from serving.models.servable import Signature, TensorSpec
    from serving.wire import dtypes as dt, errors, json_tensor, tensors
    from tensorflow_serving.apis import input_pb2

    limits = tensors.Limits(max_batch_size=4096, max_text_length=65536)

    def served_as(dtypes, name, shape):  # the served conversion for this signature's inputs
        sig = Signature(name, "", {k: TensorSpec(k, v, shape) for k, v in dtypes.items()}, {}, None)
        check = functools.partial(tensors.check_shape, sig, limits=limits)
        return lambda b: json_tensor.predict_inputs(
            json_tensor.parse_json(b), dtypes, check, json_tensor.holds_no_booleans(b)
        )[0]

    ids = {k: dt.int32 for k in ("input_word_ids", "input_mask", "input_type_ids")}
    ids_in = served_as(ids, "encoded", [-1, -1])
    text_in = served_as({"text": dt.string, "text_b": dt.string}, "serving_default", [-1])
    body = ids_body(32, 128)
    times = common.alternate({"as served": lambda: ids_in(body)}, repetitions=200, log=False)
    rows = [(name, *p50_p99(t, ".3f")) for name, t in times.items()]
    long_string = b"a" * (FLAGS.max_request_bytes - 40)
    hostile = {
        "1.5 million strings": (
            json.dumps({"inputs": {"text": ["ab"] * 1_500_000, "text_b": ["c"]}}).encode(),
            text_in,
        ),
        "20,000 rows of 128 ids": (ids_body(20_000, 128), ids_in),
        "4,096 rows of 1,024 ids": (ids_body(4096, 1024), ids_in),
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
        start, outcome = time.process_time(), "converted"
        try:
            convert(hostile_body)
        except errors.ServingError as e:
            outcome = f"refused: {e.message[:70]}"
        seconds = time.process_time() - start
        hostile_rows.append((name, f"{len(hostile_body) / 1e6:.1f}", f"{seconds:.3f}", outcome))
    return (
        common.markdown_table(["32 x 128 ids, row format", "p50 (ms)", "p99 (ms)"], rows)
        + "\n\n"
        + common.markdown_table(["hostile body", "MB", "CPU s", "outcome"], hostile_rows)
    )


# ------------------------------------------------------------------ 2. and 3., served
IDS = common.random_batch(1, 32)  # the request of parts 2 and 3


def p50_p99(seconds, spec: str = ".2f") -> tuple[str, str]:
    """The p50 and p99 of `seconds`, in ms formatted by `spec`."""
    return tuple(f"{common.percentile(seconds, q) * 1e3:{spec}}" for q in (50, 99))


def _rest_caller(server):
    """A call of POST :predict with IDS through one keep-alive connection to `server`."""
    body = ids_body(*IDS["input_word_ids"].shape)
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=60)

    def call():
        connection.request("POST", f"/v1/models/{MODEL}:predict", body)
        response = connection.getresponse()
        response.read()
        assert response.status == 200, response.status

    return call


def served(server, path):
    import tensorflow as tf

    fn = tf.saved_model.load(str(path)).signatures["encoded"]
    tensors = {k: tf.constant(v) for k, v in IDS.items()}
    request = serving_harness.predict_request(MODEL, IDS, "encoded")
    contenders = {
        "in process": lambda: fn(**tensors),
        "gRPC": serving_harness.predict_call(server.address, request),
        "REST": _rest_caller(server),
    }
    times = common.alternate(contenders, FLAGS.calls // BLOCK, inner=BLOCK, log=False)
    base = common.median(times["in process"])
    overhead = {n: f"{(common.median(t) - base) * 1e3:.2f}" for n, t in times.items()}
    rows = [(n, *p50_p99(t), overhead[n] if n != "in process" else "") for n, t in times.items()]
    headers = ["1 x 32, encoded", "p50 (ms)", "p99 (ms)", "served overhead (ms)"]
    return common.markdown_table(headers, rows)


def connections(server):
    def client_latencies():  # --calls latencies of a normal REST client (a new connection)
        return [common.time_call(call) for call in [_rest_caller(server)] * FLAGS.calls]

    threads = functools.partial(serving_harness.proc_status, server.proc.pid)
    quiet, threads_quiet = client_latencies(), threads()["Threads"]
    held, start = [], time.monotonic()  # connections that each sent half a POST header
    head = f"POST /v1/models/{MODEL}:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n"
    while len(held) < FLAGS.idle_connections and time.monotonic() - start < FLAGS.open_seconds:
        try:
            sock = socket.create_connection(("127.0.0.1", server.rest_port), timeout=5)
            sock.sendall(head.encode())
            held.append(sock)
        except OSError:
            time.sleep(0.05)
    opened_s = time.monotonic() - start
    time.sleep(1)
    threads_held = threads()["Threads"]
    try:
        loaded = client_latencies()
    finally:
        for sock in held:
            sock.close()
    time.sleep(2)
    start, opened = time.monotonic(), 0
    for _ in range(FLAGS.new_connections):
        with socket.create_connection(("127.0.0.1", server.rest_port), timeout=30) as sock:
            sock.sendall(f"GET /v1/models/{MODEL} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            opened += sock.recv(4096).startswith(b"HTTP/1.1 200")
    rate = opened / (time.monotonic() - start)
    row = (
        " / ".join(p50_p99(quiet)),
        f"{len(held)} in {opened_s:.1f} s",
        " / ".join(p50_p99(loaded)),
        f"{common.percentile(loaded, 99) / common.percentile(quiet, 99):.2f}x",
        f"{threads_quiet} -> {threads_held}",
        f"{rate:.0f} ({opened} answered)",
    )
    headers = ["quiet p50 / p99 (ms)", "connections held", "held: p50 / p99 (ms)"]
    headers += ["p99 held / quiet", "threads quiet -> held", "new connections per s"]
    return common.markdown_table(headers, [row])


def main(argv):
    del argv
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, FLAGS.idle_connections + 1024), hard))
    desc = common.machine_description(["tornado", "orjson"])
    sections = ["### 1. JSON conversion (in process)\n\n" + conversion()]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        path = serving_harness.served_model_dir(None, tmp / "export")
        server_flags = ["--file_system_poll_wait_seconds=0", "--tensorflow_intra_op_parallelism=1"]
        with serving_harness.serve(path, tmp, MODEL, *server_flags, rest=True) as server:
            sections.append("### 2. Served, one request at a time\n\n" + served(server, path))
            sections.append("### 3. Connections\n\n" + connections(server))
    title = "REST port: conversion, served overhead, connections"
    common.report(TOPIC, title, "\n\n".join(sections), desc, FLAGS.append)


if __name__ == "__main__":
    cli.run(main)
