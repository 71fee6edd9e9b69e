"""SQuAD question answering served over gRPC: questions/s and latency p50/p90/p99 per request.

Starts `python -m serving.server` on an exported `SpanQuestionAnswerer` and loads it with
--clients closed-loop gRPC clients, each request --batch real SQuAD questions with their contexts
of --min_words to --max_words words; the first --check_requests requests are checked first
(answer_text == context[start:end], EM against the gold answers; exit status 1 on a mismatch).
Method: docs/results/serving.md, "Method".

    python -m benchmarks.bench_squad_serving --model_base_path=models/squad --model_name=squad \
        --predict_file=../shared/data/squad/dev-v1.1.json [--seconds=15] [--clients=1,4] \
        [--batch=1] [--tensorflow_intra_op_parallelism=1] [--server_arg=--enable_batching]
"""

import os
import pathlib
import signal
import sys
import tempfile

from absl import app, flags

from benchmarks import common, serving_harness

TOPIC = "serving"
FLAGS = flags.FLAGS
flags.DEFINE_string("model_base_path", None, "Versioned export base dir (holds 1/, 2/, ...).")
flags.DEFINE_string("model_name", "squad", "Name the server serves the model under.")
flags.DEFINE_string(
    "predict_file", None, "SQuAD v1.1/v2.0 JSON, e.g. ../shared/data/squad/dev-v1.1.json."
)
flags.DEFINE_integer("min_words", 120, "Shortest context used (whitespace-split words).")
flags.DEFINE_integer("max_words", 180, "Longest context used (whitespace-split words).")
flags.DEFINE_integer("max_questions", 1000, "At most this many questions (file order) are cycled.")
flags.DEFINE_integer("batch", 1, "Questions (each with its context) per request.")
flags.DEFINE_float("seconds", 15.0, "Measured seconds per client count (after 1 s warm-up).")
flags.DEFINE_list("clients", ["1", "4"], "Concurrent client counts (threads, one channel each).")
flags.DEFINE_integer("check_requests", 20, "Requests checked for offsets and EM before timing.")
flags.DEFINE_integer(
    "port", 0, "gRPC port of the server; 0: the server binds a free one (read back from its log)."
)
flags.DEFINE_integer("grpc_max_threads", 16, "serving.server --grpc_max_threads.")
flags.DEFINE_integer("tensorflow_intra_op_parallelism", 0, "serving.server flag (0 = default).")
flags.DEFINE_integer("tensorflow_inter_op_parallelism", 0, "serving.server flag (0 = default).")
flags.DEFINE_multi_string(
    "server_arg",
    [],
    "Extra serving.server flag, repeatable, e.g. "
    "--server_arg=--enable_batching "
    "--server_arg=--batching_parameters_file=batching.config.",
)
flags.DEFINE_float("start_timeout", 300.0, "Seconds to wait for the model to be AVAILABLE.")
flags.DEFINE_bool("append", False, common.append_help(TOPIC))
flags.mark_flags_as_required(["model_base_path", "predict_file"])
HEADERS = ["clients", "questions per request", "questions/s", "requests/s", "p50 ms", "p90 ms"]
HEADERS += ["p99 ms", "requests measured"]


def squad_questions(path, min_words, max_words, limit):
    """SquadExamples whose context has min_words..max_words whitespace-split words."""
    from keras_bert.data.squad import read_squad_examples

    examples = [
        e
        for e in read_squad_examples(path, version_2_with_negative=True)
        if min_words <= len(e.context.split()) <= max_words
    ]
    if not examples:
        raise app.UsageError(f"{path}: no question has a context of {min_words}-{max_words} words")
    return examples[:limit]


def build_requests(examples, model_name, batch):
    """(PredictRequest, [examples]) per group of `batch` consecutive questions (a partial last
    group is dropped unless it is the only one)."""
    groups = [examples[i : i + batch] for i in range(0, len(examples) - batch + 1, batch)]
    groups = groups or [examples]
    return [
        (
            serving_harness.predict_request(
                model_name,
                {"question": [e.question for e in group], "context": [e.context for e in group]},
            ),
            group,
        )
        for group in groups
    ]


def check_answers(address, requests):
    """Sends each request once; returns (offset-consistent, EM, verbatim, questions, first bad)."""
    import tensorflow as tf
    from keras_bert.metrics.squad import dataset_of, evaluate_v1

    predictions, answerable, offsets_ok, verbatim, empty_ok, bad = {}, [], 0, 0, 0, []
    n, stub = 0, serving_harness.predict_stub(address)
    for request, group in requests:
        out = stub.Predict(request, timeout=120).outputs
        texts = [t.decode("utf-8") for t in tf.make_ndarray(out["answer_text"]).tolist()]
        starts = tf.make_ndarray(out["start"]).tolist()
        ends = tf.make_ndarray(out["end"]).tolist()
        if not len(texts) == len(starts) == len(ends) == len(group):
            raise RuntimeError(f"{len(group)} questions sent, {len(texts)} answers back")
        for e, text, s, t in zip(group, texts, starts, ends):
            n += 1
            if e.context[s:t] == text:
                offsets_ok += 1
            elif len(bad) < 3:
                bad.append(
                    f"{e.qas_id}: answer_text {text!r} != context[{s}:{t}] {e.context[s:t]!r}"
                )
            verbatim += text in {a for a, _ in e.answers} or (not e.answers and text == "")
            if e.answers:
                predictions[e.qas_id] = text
                answerable.append(e)
            else:
                empty_ok += text == ""
    em = empty_ok
    if answerable:
        em_percent = evaluate_v1(dataset_of(answerable), predictions)["exact_match"]
        em += round(em_percent * len(answerable) / 100)
    return offsets_ok, em, verbatim, n, bad


def run(server, examples):
    requests = build_requests(examples, FLAGS.model_name, FLAGS.batch)
    print(
        f"{len(examples)} questions, {len(requests)} requests of {FLAGS.batch}; waiting for the "
        "server ...",
        flush=True,
    )
    server.wait_available(FLAGS.model_name, timeout=FLAGS.start_timeout)
    print(f"model {FLAGS.model_name} AVAILABLE at {server.address}", flush=True)
    checked = requests[: FLAGS.check_requests]
    offsets_ok, em, verbatim, n, bad = check_answers(server.address, checked)
    check = (
        f"first {len(checked)} requests ({n} questions): answer_text == context[start:end] "
        f"for {offsets_ok}/{n}; served answer equals a gold answer: EM (official "
        f"normalization) {em}/{n}, verbatim {verbatim}/{n}"
    )
    print(check, flush=True)
    rows = []
    for c in [int(x) for x in FLAGS.clients]:
        print(f"{c} client(s), {FLAGS.seconds:g} s ...", flush=True)
        make_call = serving_harness.predict_rotation(server.address, [r for r, _ in requests], c, None, 120)
        lat, window = serving_harness.closed_loop(make_call, c, FLAGS.seconds)
        requests_per_s, *ms = serving_harness.load_figures(lat, window, quantiles=(50, 90, 99))
        rows.append((c, FLAGS.batch, requests_per_s * FLAGS.batch, requests_per_s, *ms, len(lat)))
    table = common.markdown_table(HEADERS, rows)
    words = [len(e.context.split()) for e in examples]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    notes = [
        f"gRPC Predict (`serving_default`) on `{FLAGS.model_name}` via `python -m "
        f"serving.server` (grpc_max_threads {FLAGS.grpc_max_threads}, TensorFlow intra/inter "
        f"op {FLAGS.tensorflow_intra_op_parallelism}/{FLAGS.tensorflow_inter_op_parallelism} "
        f"(0 = default){', ' + ' '.join(FLAGS.server_arg) if FLAGS.server_arg else ''}).",
        f"{len(examples)} questions from {pathlib.Path(FLAGS.predict_file).name}, contexts "
        f"{min(words)}-{max(words)} words (mean {sum(words) / len(words):.0f}); "
        f"{FLAGS.batch} question(s) per request; latency per request; each window "
        f"{FLAGS.seconds:g} s after 1 s warm-up; client and server share {cores} core(s) "
        "(this process's affinity).",
        "Check: " + check + ".",
    ]
    if bad:
        notes.append("Offset mismatches: " + "; ".join(bad))
    return common.with_notes(table, notes), offsets_ok == n


def main(argv):
    del argv
    if FLAGS.batch < 1:
        raise app.UsageError("--batch must be >= 1")
    desc = common.machine_description(["grpcio", "tensorflow-serving-api"])
    examples = squad_questions(
        FLAGS.predict_file, FLAGS.min_words, FLAGS.max_words, FLAGS.max_questions
    )
    # SIGTERM (e.g. timeout, kill) raises SystemExit here so `finally` stops the server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="bench_squad_serving_") as tmp:
        server = serving_harness.ServerProcess(
            [
                "--host=127.0.0.1",
                f"--model_name={FLAGS.model_name}",
                f"--model_base_path={os.path.abspath(FLAGS.model_base_path)}",
                f"--grpc_max_threads={FLAGS.grpc_max_threads}",
                f"--tensorflow_intra_op_parallelism={FLAGS.tensorflow_intra_op_parallelism}",
                f"--tensorflow_inter_op_parallelism={FLAGS.tensorflow_inter_op_parallelism}",
                *FLAGS.server_arg,
            ],
            pathlib.Path(tmp) / "server.log",
            port=FLAGS.port,
        )
        try:
            body, offsets_ok = run(server, examples)
        except BaseException:
            print(f"server log tail:\n{server.log_tail()}", file=sys.stderr)
            raise
        finally:
            server.stop()
            print(
                f"server (pid {server.proc.pid}) stopped, exit code {server.proc.returncode}",
                flush=True,
            )
    print(f"\n{common.describe_run(desc)}\n\n{body}")
    if FLAGS.append:
        common.append_results(
            TOPIC, "SQuAD serving: gRPC Predict (bench_squad_serving)", body, desc
        )
    return 0 if offsets_ok else 1


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    app.run(main)
