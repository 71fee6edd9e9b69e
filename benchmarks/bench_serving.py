r"""Served throughput and latency of `python -m serving.server` under closed-loop gRPC clients,
the load --scenario picks (method: docs/results/serving.md, "Method"):

- clients: in process, text in vs ids in; then one SST-2 dev sentence per request, batching off
  and on, beside in-process calls: sentences/s, p50 / p99 ms.
- buckets: batching padded to the longest row against --length_buckets: requests/s, p50 / p99.
- squad: SQuAD questions per request to a SpanQuestionAnswerer export, the first answers checked
  (exit status 1 unless each is context[start:end]): questions/s, p50 / p90 / p99.
- reload: a version published or a config reloaded every --interval_s: failed requests (exit
  status 1 if any), p50 / p99 inside and outside the swap windows.

    python -m benchmarks.bench_serving [--seconds=15] [--clients=1,16]
    python -m benchmarks.bench_serving --scenario=buckets --clients=16 --seconds=60 \
        --repetitions=2 --batch_timeout_micros=5000 --num_batch_threads=2 \
        --allowed_batch_sizes=4,8,16
    python -m benchmarks.bench_serving --scenario=squad --model_dir=models/squad/1 \
        --predict_file=../shared/data/squad/dev-v1.1.json --clients=1,4
    python -m benchmarks.bench_serving --scenario=reload --clients=16 --seconds=120
"""

from __future__ import annotations

import collections
import itertools
import os
import pathlib
import tempfile
import time

import numpy as np
from absl import app, flags

from benchmarks import common, serving_harness

TOPIC = "serving"
FLAGS = flags.FLAGS
MODEL_NAME, SHADOW_NAME = "bench_serving", "bench_serving_shadow"
POLL_FLAG = "--file_system_poll_wait_seconds="


def define_flags():
    flags.DEFINE_enum("scenario", "clients", list(SCENARIOS), "The load (module docstring).")
    flags.DEFINE_string("model_dir", None, "SavedModel version dir (default: export MiniLM-L6).")
    flags.DEFINE_list("clients", ["1", "16"], "Closed-loop gRPC client counts, a run each.")
    flags.DEFINE_float("seconds", 15.0, "Measured seconds of a run (after 1 s of warm-up).")
    flags.DEFINE_integer("repetitions", 5, "Alternating rounds of the contenders.", lower_bound=1)
    flags.DEFINE_multi_string("server_arg", [], "Extra serving.server flag, repeatable.")
    flags.DEFINE_integer("max_batch_size", 16, "Server batching: max_batch_size.")
    flags.DEFINE_list("batch_timeout_micros", ["5000", "20000"], "Server batching, a server each.")
    flags.DEFINE_integer("num_batch_threads", 1, "Server batching: num_batch_threads.")
    flags.DEFINE_list("allowed_batch_sizes", [], "Server batching: allowed_batch_sizes.")
    flags.DEFINE_integer("sentences", None, "Use only the first N SST-2 dev sentences.")
    flags.DEFINE_integer("max_seq_length", 128, "The default export's (not --model_dir's).")
    flags.DEFINE_integer("batch_size", 32, "clients: in-process batch of text in vs ids in.")
    flags.DEFINE_float("long_fraction", 0.125, "buckets: fraction of requests that are long.")
    flags.DEFINE_integer("long_words", 90, "buckets: least words of a long text.", lower_bound=1)
    flags.DEFINE_list("length_buckets", ["16", "32", "64"], "buckets: length_buckets (tokens).")
    flags.DEFINE_string("predict_file", None, "squad: SQuAD v1.1/v2.0 JSON.")
    flags.DEFINE_integer("min_words", 120, "squad: shortest context used (whitespace words).")
    flags.DEFINE_integer("max_words", 180, "squad: longest context used (whitespace words).")
    flags.DEFINE_integer("max_questions", 1000, "squad: at most this many questions, cycled.")
    flags.DEFINE_integer("batch", 1, "squad: questions per request.", lower_bound=1)
    flags.DEFINE_integer("check_requests", 20, "squad: requests checked before timing.")
    flags.DEFINE_float("interval_s", 5.0, "reload: quiet seconds before each event.", lower_bound=0)
    flags.DEFINE_float("poll_s", 0.5, "reload: the server's --file_system_poll_wait_seconds.")
    flags.DEFINE_float("window_margin_s", 0.5, "reload: a swap window's tail.", lower_bound=0)
    flags.DEFINE_bool("append", True, common.append_help(TOPIC))
    common.bounds(
        "seconds",
        "poll_s",
        max_batch_size=1,
        num_batch_threads=1,
        sentences=1,
        max_seq_length=2,
        batch_size=1,
        min_words=1,
        max_words=1,
        max_questions=1,
        check_requests=1,
        clients=1,
        batch_timeout_micros=0,
        allowed_batch_sizes=1,
        length_buckets=1,
    )
    common.existing("model_dir", "predict_file")


def served_load(server, items, clients: int, request_of=None, quantiles=(50, 99)) -> tuple:
    """`closed_loop`'s figures of gRPC Predict of `items` in turn (`predict_rotation`)."""
    make_call = serving_harness.predict_rotation(server.address, items, clients, request_of, 120)
    return serving_harness.closed_loop(make_call, clients, FLAGS.seconds, quantiles=quantiles)


def model_name() -> str:  # --model_dir's model and version directories, or the default export
    if not FLAGS.model_dir:
        return "MiniLM-L6 classifier"
    return "/".join(pathlib.Path(FLAGS.model_dir).parts[-2:])


def batching(timeout_micros: int, length_buckets=()):
    """An arm of `sweep`: work dir -> the server flags of the batching flags' parameters with
    `timeout_micros` and `length_buckets`."""
    sizes = [int(s) for s in FLAGS.allowed_batch_sizes]
    args = FLAGS.max_batch_size, timeout_micros, FLAGS.num_batch_threads, sizes, length_buckets
    return lambda work: serving_harness.batching_flags(work, *args)


def batching_note() -> str:
    return (
        f"batching: max_batch_size {FLAGS.max_batch_size}, batch_timeout_micros "
        f"{', '.join(FLAGS.batch_timeout_micros)} (a server each), num_batch_threads "
        f"{FLAGS.num_batch_threads}, allowed_batch_sizes {[*map(int, FLAGS.allowed_batch_sizes)]}"
    )


# ----------------------------------------------------------------------------- clients
HEADERS = ["path", "clients", "sentences/s", "p50 ms", "p99 ms", "vs in process, same clients"]
HEADERS += ["vs in process, batches of that size", "rows per model call (server metrics)"]


def probabilities(fn, inputs):
    """A call of the signature `fn` on `inputs` (a dict, or a function making it) to numpy."""
    return lambda: fn(**(inputs() if callable(inputs) else inputs))["probabilities"].numpy()


def text_vs_ids(loaded, sentences, max_seq_length: int):
    import tensorflow as tf

    text_fn, ids_fn = loaded.signatures["serving_default"], loaded.signatures["encoded"]
    rows, text, ids = [], "text in (serving_default)", "ids in (encoded)"
    for b in (1, FLAGS.batch_size):
        packed = common.featurize([s.decode() for s in sentences[:b]], max_seq_length)
        full = {k: tf.constant(v) for k, v in packed.items()}
        width = int(packed["input_mask"].sum(1).max())  # the batch's longest row
        calls = {
            text: probabilities(text_fn, {"text": tf.constant(sentences[:b])}),
            f"{ids}, padded to max_seq_length": probabilities(ids_fn, full),
            ids: probabilities(ids_fn, {k: v[:, :width] for k, v in full.items()}),
        }
        np.testing.assert_allclose(calls[text](), calls[ids](), atol=1e-4)
        reps = FLAGS.repetitions if b > 1 else max(2, FLAGS.repetitions // 2)
        times = common.alternate(calls, reps, warmup=2, inner=1 if b > 1 else 10, log=False)
        med = {k: common.median(v) for k, v in times.items()}
        rows += [(n, b, b / med[n], med[n] * 1e3, common.ratio(med[ids], med[n])) for n in calls]
    headers = ["in process", "batch", "sentences/s", "median ms per call", "vs ids in"]
    return common.markdown_table(headers, rows)


def batch_counts(rest_address) -> tuple[float, float]:
    """(rows, model calls) so far, from the server's serving_batch_size Prometheus histogram."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    url = f"http://{rest_address}/monitoring/prometheus/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        families = text_string_to_metric_families(r.read().decode())
        samples = [s for f in families if f.name == "serving_batch_size" for s in f.samples]
    return tuple(sum(s.value for s in samples if s.name.endswith(e)) for e in ("_sum", "_count"))


def in_process_runs(loaded, sentences, clients) -> dict:
    """(path, clients) -> (sentences/s, p50, p99, calls) for in-process calls of serving_default."""
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
        single = serving_harness.closed_loop(inproc(1, c), c, FLAGS.seconds)
        results[("in process, single sentences", c)] = single
        if c > 1:
            batches = serving_harness.closed_loop(inproc(c, 1), 1, FLAGS.seconds, c)
            results[(f"in process, batches of {c} (one caller)", c)] = batches
    return results


def sweep(model_dir, work, arms: dict, texts, clients, server_flags, repetitions=1) -> dict:
    """(arm, clients) -> (requests/s, p50, p99 ms, requests measured, rows per model call or
    "n/a"), medians over `repetitions` (requests summed): a fresh server per arm (label -> its
    flags of a work dir), their order reversed every other repetition, loaded with `texts` (one
    per request) by each client count."""
    runs, order = collections.defaultdict(list), list(arms)

    def text_request(text):  # built inside the timed call
        return serving_harness.predict_request(MODEL_NAME, {"text": [text]})

    for r in range(repetitions):
        for i, arm in enumerate(order if r % 2 == 0 else order[::-1]):
            w = work / f"{r}-{i}"
            args = model_dir, w, MODEL_NAME, *arms[arm](w), *server_flags
            with serving_harness.serve(*args, rest=True) as server:
                for c in clients:
                    print(f"{arm}, {c} client(s), run {r + 1} ...", flush=True)
                    before = batch_counts(server.rest_address)
                    figures = served_load(server, texts, c, text_request)
                    rows, calls = np.subtract(batch_counts(server.rest_address), before)
                    runs[(arm, c)].append((*figures, rows / calls if calls else None))

    def summary(rs):
        medians = [common.median(x) for x in zip(*[r[:3] for r in rs])]
        per_call = [r[4] for r in rs if r[4]]
        per_call = f"{common.median(per_call):.1f}" if per_call else "n/a"
        return (*medians, sum(r[3] for r in rs), per_call)

    return {key: summary(rs) for key, rs in runs.items()}


def clients_scenario(model_dir, work, clients, server_flags):
    import tensorflow as tf

    sentences = [s.encode("utf-8") for s in common.sst2_sentences("dev", FLAGS.sentences)[0]]
    loaded = tf.saved_model.load(str(model_dir))
    print("text in vs ids in ...", flush=True)
    max_seq_length = serving_harness.export_max_seq_length(model_dir)
    table = text_vs_ids(loaded, sentences, max_seq_length)
    print(table, flush=True)
    results = in_process_runs(loaded, sentences, clients)
    del loaded
    arms = {"gRPC Predict, batching off": lambda w: []}
    for t in map(int, FLAGS.batch_timeout_micros):
        arms[f"gRPC Predict, batching on ({t / 1000:g} ms timeout)"] = batching(t)
    if clients:
        results.update(sweep(model_dir, work, arms, sentences, clients, server_flags))
    rows = []
    for (name, c), (tput, p50, p99, _, *per_call) in results.items():
        refs = ("in process, single sentences", f"in process, batches of {c} (one caller)")
        ratios = [common.ratio(tput, results.get((ref, c), [None])[0]) for ref in refs]
        rows.append((name, c, tput, p50, p99, *ratios, *(per_call or ["n/a"])))
    notes = [
        f"{model_name()}, serving_default, "
        f"max_seq_length {max_seq_length}; SST-2 dev sentences, one per request.",
        f"Server {batching_note()}. {FLAGS.seconds:g} s per load window; client and server "
        "share the cores.",
    ]
    if rows:
        table += "\n\n" + common.markdown_table(HEADERS, rows)
    title = "Serving: SavedModel in process and gRPC (bench_serving)"
    return title, common.with_notes(table, notes), []


# ----------------------------------------------------------------------------- buckets
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


def buckets_scenario(model_dir, work, clients, server_flags):
    sentences, _ = common.sst2_sentences("dev", FLAGS.sentences)
    texts = workload(list(sentences), FLAGS.long_fraction, FLAGS.long_words, 4 * len(sentences))
    buckets, pairs, arms = [int(b) for b in FLAGS.length_buckets], [], {}
    for t in map(int, FLAGS.batch_timeout_micros):
        pairs.append((f"pad to longest ({t / 1000:g} ms)", f"length buckets ({t / 1000:g} ms)"))
        arms[pairs[-1][0]], arms[pairs[-1][1]] = batching(t), batching(t, buckets)
    runs = sweep(model_dir, work, arms, texts, clients, server_flags, FLAGS.repetitions)
    rows, lines, missed = [], [], []
    for pair, c in itertools.product(pairs, clients):
        for arm in pair:
            tput, p50, p99, measured, per_call = runs[(arm, c)]
            rows.append((arm, c, tput, p50, p99, per_call, measured))
        (padded, _, padded_p99, *_), (bucketed, _, bucketed_p99, *_) = (runs[(a, c)] for a in pair)
        which = f"{pair[1]} / {pair[0]}, {c} clients"
        throughput, p99 = common.ratio(bucketed, padded), common.ratio(bucketed_p99, padded_p99)
        lines.append(f"{which}: throughput {throughput} (target > 1), p99 {p99} (target < 1).")
        if not (bucketed and padded and bucketed > padded):
            missed.append(f"{which}: throughput {throughput} (target > 1)")
        if not (bucketed_p99 and padded_p99 and bucketed_p99 < padded_p99):
            missed.append(f"{which}: p99 {p99} (target < 1)")
    headers = ["batching", "clients", "requests/s", "p50 ms", "p99 ms", "rows per model call"]
    table = common.markdown_table([*headers, "requests measured"], rows)
    notes = [
        *lines,
        f"{FLAGS.seconds:g} s per run, {FLAGS.repetitions} repetition(s); workload: "
        f"{len(sentences)} SST-2 dev sentences, {FLAGS.long_fraction:.1%} long texts (>= "
        f"{FLAGS.long_words} words); {batching_note()}; length_buckets {buckets}; model: "
        f"{model_name()}.",
    ]
    return "Length-bucketed batching", common.with_notes(table, notes), missed


# ----------------------------------------------------------------------------- squad
def squad_requests(path, batch: int) -> tuple[list, list]:
    """The first --max_questions SquadExamples of `path` with --min_words..--max_words context
    words, and a (PredictRequest, [examples]) per `batch` of them (a partial last one dropped)."""
    from keras_bert.data.squad import read_squad_examples

    lo, hi = FLAGS.min_words, FLAGS.max_words
    examples = read_squad_examples(path, version_2_with_negative=True)
    examples = [e for e in examples if lo <= len(e.context.split()) <= hi][: FLAGS.max_questions]
    if not examples:
        raise app.UsageError(f"{path}: no question has a context of {lo}-{hi} words")
    groups = [examples[i : i + batch] for i in range(0, len(examples) - batch + 1, batch)]
    requests = []
    for g in groups or [examples]:
        fields = {"question": [e.question for e in g], "context": [e.context for e in g]}
        requests.append((serving_harness.predict_request(MODEL_NAME, fields), g))
    return examples, requests


def check_answers(address, requests) -> tuple[str, bool, list]:
    """Sends each request once; returns (the check's sentence, whether every answer is
    context[start:end], the first mismatches)."""
    import tensorflow as tf

    from keras_bert.metrics.squad import dataset_of, official_scores

    predictions, examples, offsets_ok, verbatim, bad = {}, [], 0, 0, []
    stub = serving_harness.predict_stub(address)
    for request, group in requests:
        out = stub.Predict(request, timeout=120).outputs
        texts, starts, ends = (
            tf.make_ndarray(out[k]).tolist() for k in ("answer_text", "start", "end")
        )
        if not len(texts) == len(starts) == len(ends) == len(group):
            raise RuntimeError(f"{len(group)} questions sent, {len(texts)} answers back")
        for e, text, s, t in zip(group, [x.decode() for x in texts], starts, ends):
            predictions[e.qas_id] = text
            examples.append(e)
            span = e.context[s:t]
            offsets_ok += span == text
            if span != text and len(bad) < 3:
                bad.append(f"{e.qas_id}: answer_text {text!r} != context[{s}:{t}] {span!r}")
            verbatim += text in {a for a, _ in e.answers} or (not e.answers and text == "")
    em = official_scores(dataset_of(examples), predictions, True)["exact_match"]  # "" = no answer
    n = len(examples)
    check = (
        f"first {len(requests)} requests ({n} questions): answer_text == context[start:end] "
        f"for {offsets_ok}/{n}; served answer equals a gold answer: EM (official "
        f"normalization) {round(em * n / 100)}/{n}, verbatim {verbatim}/{n}"
    )
    return check, offsets_ok == n, bad


def squad_scenario(model_dir, work, clients, server_flags):
    examples, requests = squad_requests(FLAGS.predict_file, FLAGS.batch)
    with serving_harness.serve(model_dir, work, MODEL_NAME, *server_flags) as server:
        check, ok, bad = check_answers(server.address, requests[: FLAGS.check_requests])
        print(check, flush=True)
        rows = []
        for c in clients:
            print(f"{c} client(s), {FLAGS.seconds:g} s ...", flush=True)
            figures = served_load(server, [r for r, _ in requests], c, None, (50, 90, 99))
            rows.append((c, FLAGS.batch, figures[0] * FLAGS.batch, *figures))
    headers = ["clients", "questions per request", "questions/s", "requests/s", "p50 ms"]
    table = common.markdown_table([*headers, "p90 ms", "p99 ms", "requests measured"], rows)
    words = [len(e.context.split()) for e in examples]
    notes = [
        f"gRPC Predict (`serving_default`) on {model_name()} via `python -m "
        f"serving.server` ({' '.join(server_flags)}).",
        f"{len(examples)} questions from {pathlib.Path(FLAGS.predict_file).name}, contexts "
        f"{min(words)}-{max(words)} words (mean {sum(words) / len(words):.0f}); "
        f"{FLAGS.batch} question(s) per request; latency per request; {FLAGS.seconds:g} s per "
        f"window; client and server share {len(os.sched_getaffinity(0))} core(s).",
        f"Check: {check}.",
        *(["Offset mismatches: " + "; ".join(bad)] if bad else []),
    ]
    title = "SQuAD serving: gRPC Predict (bench_serving --scenario=squad)"
    return title, common.with_notes(table, notes), [] if ok else [f"answers check: {check}"]


# ----------------------------------------------------------------------------- reload
EVENTS = ("publish", "reload: add model", "publish", "reload: remove model")
RELOAD_SENTENCES = [
    "a gripping, funny film",
    "the plot never quite comes together, and the second half drags on far too long",
    "fine",
    "an uneven but often rewarding piece of work whose best moments stay with you for days",
]


def summarize(calls: list, windows: list) -> dict:
    """Of `client_threads` records (start, end, PredictResponse or error) and the swap windows
    (kind of EVENTS, start, the event's end plus the margin): {"rows": [(group, requests,
    failed, p50 ms, p99 ms or "n/a")], "failed", "requests", "p99_ratio": p99 inside / outside
    (None without both), "versions": sorted versions that answered, "events": [kinds done]}."""
    groups = {"outside swap windows": [], "inside swap windows": []}
    groups |= {f"inside: {kind}": [] for kind in dict.fromkeys(EVENTS)}
    for call in calls:  # inside the first window its [start, end] overlaps
        window = next((w for w in windows if call[0] <= w[2] and call[1] >= w[1]), None)
        if window is None:
            groups["outside swap windows"].append(call)
        else:
            groups["inside swap windows"].append(call)
            groups[f"inside: {window[0]}"].append(call)
    rows, p99 = [], {}
    for group, members in groups.items():
        ok = [end - start for start, end, r in members if not isinstance(r, Exception)]
        p50_ms, p99[group] = (common.percentile(ok, q) * 1e3 if ok else "n/a" for q in (50, 99))
        rows.append((group, len(members), len(members) - len(ok), p50_ms, p99[group]))
    out, into = p99["outside swap windows"], p99["inside swap windows"]
    answered = [r for _, _, r in calls if not isinstance(r, Exception)]
    return {
        "rows": rows,
        "requests": len(calls),
        "failed": len(calls) - len(answered),
        "p99_ratio": into / out if "n/a" not in (out, into) else None,
        "versions": sorted({r.model_spec.version.value for r in answered}),
        "events": [kind for kind, _, _ in windows],
    }


def reload_run(model_dir, clients, work, *flags, seconds, interval_s, poll_s, window_margin_s):
    """One reload-under-load measurement in `work` (a fresh directory); `summarize`'s dict."""
    import grpc

    server = serving_harness.serve(model_dir, work, MODEL_NAME, f"{POLL_FLAG}{poll_s}", *flags)
    controller, base = server.controller, server.base
    windows, begin = [], []

    def during():  # EVENTS in a cycle, `interval_s` apart, for `seconds` and one whole cycle
        time.sleep(1.0)  # warm-up: channels, first calls
        begin.append(time.perf_counter())
        version = 1
        while len(windows) < len(EVENTS) or time.perf_counter() < begin[0] + seconds:
            time.sleep(interval_s)
            kind, start = EVENTS[len(windows) % len(EVENTS)], time.perf_counter()
            if kind == "publish":
                version += 1
                end = server.swap_version(model_dir, version)
            else:
                both = {MODEL_NAME: base, SHADOW_NAME: shadow}
                controller.reload(both if kind.endswith("add model") else {MODEL_NAME: base})
                end = time.perf_counter()
            windows.append((kind, start, end + window_margin_s))
        time.sleep(interval_s)  # a last quiet stretch

    with server:
        shadow = serving_harness.stage_model(model_dir, work, SHADOW_NAME)
        names = serving_harness.string_inputs(server.address, MODEL_NAME)
        inputs = [{n: [t if n == "text" else ""] for n in names} for t in RELOAD_SENTENCES]
        requests = [serving_harness.predict_request(MODEL_NAME, x) for x in inputs]
        make_call = serving_harness.predict_rotation(server.address, requests, clients)
        records = serving_harness.client_threads(make_call, clients, during, (grpc.RpcError,))
    return summarize([c for c in records if c[0] >= begin[0]], windows)


def reload_report(result: dict) -> str:
    table = common.markdown_table(
        ["requests", "count", "failed", "p50 ms", "p99 ms"], result["rows"]
    )
    ratio = result["p99_ratio"]
    counts = collections.Counter(result["events"])
    events = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    return (
        f"{table}\n\nFailed requests: {result['failed']} of {result['requests']} (target 0). "
        f"p99 inside / outside swap windows: {'n/a' if ratio is None else f'{ratio:.2f}x'} "
        f"(target at most 2x). Events: {events}. Versions that answered: "
        f"{result['versions']}.\n"
    )


def reload_scenario(model_dir, work, clients, server_flags):
    sections, missed = [], []
    timing = {k: FLAGS[k].value for k in ("seconds", "interval_s", "poll_s", "window_margin_s")}
    for c in clients:
        print(f"{c} client(s), reloads every {FLAGS.interval_s:g} s ...", flush=True)
        result = reload_run(model_dir, c, work / str(c), *server_flags, **timing)
        missed += reload_missed(result, c)
        sections.append(
            reload_report(result) + f"\n{c} clients, at least {FLAGS.seconds:g} s, an event "
            f"every {FLAGS.interval_s:g} s, server poll {FLAGS.poll_s:g} s, window margin "
            f"{FLAGS.window_margin_s:g} s; model: {model_name()}.\n"
        )
    return "Reload under load", "\n".join(sections), missed


def reload_missed(result: dict, clients: int) -> list[str]:
    """The reload run's missed targets (`reload_report`'s): 0 failed requests, and a p99 inside
    the swap windows at most 2x the one outside."""
    missed = []
    if result["failed"]:
        missed.append(f"{clients} clients: {result['failed']} of {result['requests']} failed")
    if result["p99_ratio"] is not None and result["p99_ratio"] > 2:
        missed.append(f"{clients} clients: p99 inside swap windows {result['p99_ratio']:.2f}x")
    return missed


SCENARIOS = {"clients": clients_scenario, "buckets": buckets_scenario}
SCENARIOS |= {"squad": squad_scenario, "reload": reload_scenario}


def main(argv):
    del argv
    if FLAGS.scenario == "squad" and not (FLAGS.model_dir and FLAGS.predict_file):
        raise app.UsageError("--scenario=squad needs --model_dir and --predict_file")
    if FLAGS.scenario != "clients" and not FLAGS.clients:
        raise app.UsageError(f"--scenario={FLAGS.scenario} needs at least one --clients count")
    if FLAGS.model_dir and FLAGS["max_seq_length"].present:
        raise app.UsageError("--max_seq_length is the default export's; --model_dir has its own")
    common.set_threads_from_env()
    desc = common.machine_description(["grpcio", "tensorflow-serving-api"])
    clients = [int(c) for c in FLAGS.clients]
    server_flags = [f"--grpc_max_threads={max([16, *clients])}", *FLAGS.server_arg]
    with tempfile.TemporaryDirectory(prefix="bench_serving_") as tmp:
        tmp = pathlib.Path(tmp)
        args = FLAGS.model_dir, tmp / "export", FLAGS.max_seq_length
        model_dir = serving_harness.served_model_dir(*args)
        title, body, missed = SCENARIOS[FLAGS.scenario](
            model_dir, tmp / "run", clients, server_flags
        )
    common.report(TOPIC, title, body, desc, FLAGS.append)
    return common.targets_status(missed, "bench_serving")


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    define_flags()
    common.run_with_targets(main)
