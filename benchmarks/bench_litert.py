"""The exported model's fast paths against ONNX Runtime: batch-1 latency, batch-32 throughput and
int8 accuracy, in process and through `serving.server` gRPC.

From one fine-tuned classifier (`--model_dir`: a run_classifier `--output_dir` or a `.keras`
task, e.g. SST-2 from `FULL=1 bash scripts/main_job.sh`) it writes two exports into a temporary
base: version 1 with `litert="float32"` and version 2 with `litert="int8"` (`Task.export`; both
hold the same float32 SavedModel beside their `model.tflite`). Then:

1. Agreement on SST-2 dev (872 sentences, the task's own preprocessor): accuracy of the
   SavedModel's `encoded`, of LiteRT float32 and of LiteRT int8; the share of int8 predictions
   equal to float32 ones; the largest probability difference of each LiteRT file against the
   SavedModel.
2. Speed, all contenders alternating (`common.alternate`), medians: p50 / p99 at 1 x
   `--latency_seq_length` (default 32) and sequences/s at `--batch_size` x `--seq_length`
   (default 32 x 128), on fixed random ids (`common.random_batch`):
   - "SavedModel (TF)": the `encoded` signature of the loaded SavedModel, TensorFlow's default
     thread pools (`BENCH_THREADS` sets them);
   - "SavedModel frozen (TF)": the same function with its variables frozen to constants
     (`convert_variables_to_constants_v2`), the lever of letting grappler's oneDNN remapper see
     constant LayerNorm parameters; an A/B, not a product path;
   - "LiteRT float32" / "LiteRT int8": `model.tflite` of each version through the
     `ai_edge_litert` signature runner with `--litert_threads` (default: one per CPU);
   - "gRPC SavedModel" / "gRPC LiteRT float32" / "gRPC LiteRT int8": Predict on `encoded`
     through `python -m serving.server` (two server processes: one plain, one with
     `--prefer_tflite_model`), official `tensorflow_serving` stubs, one channel, one request at
     a time (the client's proto building is done before the clock starts);
   - "onnxruntime float32" / "onnxruntime int8" (optional peer, own process,
     benchmarks/ort_peer.py under `$KERAS_BERT_PEER_PYTHON`): Hugging Face BertModel from the
     same pretrained checkpoint via torch.onnx.export, int8 by `quantize_dynamic`. It runs the
     encoder only (no classifier head, no softmax), so it does slightly less work than ours.
   Ratios: each row's p50 speed and throughput against ONNX Runtime float32 (float32 rows) or
   ONNX Runtime int8 (int8 rows).

    KERAS_BERT_PEER_PYTHON=<venv with torch, transformers, onnx, onnxruntime>/bin/python \\
        python -m benchmarks.bench_litert --model_dir=<run_dir> [--repetitions=7] [--append]
"""

import os
import pathlib
import subprocess
import tempfile
import time

import numpy as np
from absl import app, flags

from benchmarks import common

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "model_dir", None, "Fine-tuned classifier: run_classifier output_dir or .keras."
)
flags.DEFINE_integer("repetitions", 7, "Alternating rounds at batch_size x seq_length.")
common.define_encoder_shape_flags(latency_calls=200)
flags.DEFINE_integer(
    "litert_threads",
    0,
    "LiteRT interpreter threads, in process and in the "
    "server (0 = one per CPU this process may use).",
)
flags.DEFINE_integer(
    "server_threads",
    0,
    "serving.server --tensorflow_intra_op_parallelism "
    "(0 = TensorFlow's default); the LiteRT server uses --litert_threads.",
)
flags.DEFINE_bool("onnxruntime", True, "Include the ONNX Runtime peer when available.")
flags.DEFINE_integer("onnxruntime_threads", 0, "ONNX Runtime intra-op threads (0 = its default).")
flags.DEFINE_bool("grpc", True, "Include the serving.server contenders.")
flags.DEFINE_bool("append", False, "Append the tables to benchmarks/RESULTS.md.")
flags.mark_flag_as_required("model_dir")

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def export_versions(model_dir, base: pathlib.Path):
    """Exports the task twice (LiteRT float32 -> version 1, int8 -> version 2); returns
    (task, {"float32": dir, "int8": dir}, seconds per export)."""
    from keras_bert.tasks.loading import load_task

    task = load_task(model_dir)
    paths, seconds = {}, {}
    for version, quantize in ((1, "float32"), (2, "int8")):
        start = time.perf_counter()
        paths[quantize] = task.export(
            base, "model", version=version, dtype="float32", litert=quantize
        )
        seconds[quantize] = time.perf_counter() - start
    return task, paths, seconds


def litert_runner(path: pathlib.Path, threads: int):
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter(
        model_path=str(path / "model.tflite"), num_threads=threads
    ).get_signature_runner("encoded")


def agreement(task, paths, threads: int) -> dict:
    """SST-2 dev accuracy of SavedModel / LiteRT float32 / LiteRT int8 and their agreement."""
    import tensorflow as tf

    texts, labels = common.sst2_sentences("dev")
    packed = task.preprocessor(tf.constant(texts))
    ids = {k: np.asarray(packed[k], np.int32) for k in INPUT_NAMES}
    saved = tf.saved_model.load(str(paths["float32"])).signatures["encoded"]

    def saved_run(**features):
        return {
            k: v.numpy()
            for k, v in saved(**{n: tf.constant(x) for n, x in features.items()}).items()
        }

    runs = {"SavedModel": saved_run}
    for quantize in ("float32", "int8"):
        runs[f"LiteRT {quantize}"] = litert_runner(paths[quantize], threads)
    probabilities = {}
    for name, run in runs.items():
        chunks = [
            run(**{k: v[i : i + 64] for k, v in ids.items()}) for i in range(0, len(texts), 64)
        ]
        probabilities[name] = np.concatenate([c["probabilities"] for c in chunks])
    preds = {n: p.argmax(-1) for n, p in probabilities.items()}
    return {
        "examples": len(texts),
        "accuracy": {n: float(np.mean(p == labels)) for n, p in preds.items()},
        "int8_same_prediction": float(np.mean(preds["LiteRT int8"] == preds["LiteRT float32"])),
        "max_prob_diff": {
            n: float(np.abs(probabilities[n] - probabilities["SavedModel"]).max())
            for n in ("LiteRT float32", "LiteRT int8")
        },
    }


def start_server(base: pathlib.Path, tmp: pathlib.Path, litert: bool):
    """serving.server on `base`: the LiteRT one serves "float32" (version 1) and "int8"
    (version 2) with --prefer_tflite_model; the plain one serves "saved_model" (version 1).
    Returns (process, address)."""
    from serving.client import model_status

    port = common.free_port()
    config = tmp / ("litert.config" if litert else "plain.config")
    names = (("float32", 1), ("int8", 2)) if litert else (("saved_model", 1),)
    config.write_text(
        "model_config_list { "
        + " ".join(
            f'config {{ name: "{n}" base_path: "{base / "model"}" model_platform: "tensorflow" '
            f"model_version_policy {{ specific {{ versions: {v} }} }} }}"
            for n, v in names
        )
        + " }"
    )
    threads = FLAGS.litert_threads if litert else FLAGS.server_threads
    log_path = tmp / f"server_{'litert' if litert else 'plain'}.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        common.server_command(
            f"--port={port}",
            "--rest_api_port=0",
            f"--model_config_file={config}",
            f"--tensorflow_intra_op_parallelism={threads}",
            *(["--prefer_tflite_model"] if litert else []),
        ),
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=common.RESULTS_FILE.parent.parent,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    address = f"127.0.0.1:{port}"
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log_path.read_text(errors='replace')[-2000:]}")
        try:
            if all(
                any(s == "AVAILABLE" for _, s, _ in model_status(address, n, timeout=2))
                for n, _ in names
            ):
                return proc, address
        except Exception:
            pass
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError("server did not make its models AVAILABLE in 300 s")


def grpc_call(address, model, features):
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    channel = grpc.insecure_channel(address)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    request = predict_pb2.PredictRequest()
    request.model_spec.name, request.model_spec.signature_name = model, "encoded"
    for k, v in features.items():
        request.inputs[k].CopyFrom(tf.make_tensor_proto(v))
    return lambda: stub.Predict(request, timeout=60)


def build_contenders(paths, shapes, servers, ort):
    """name -> {(batch, seq): zero-argument callable}."""
    import tensorflow as tf
    from tensorflow.python.framework import convert_to_constants

    loaded = tf.saved_model.load(str(paths["float32"]))  # owns the variables: keep it alive
    saved = loaded.signatures["encoded"]
    frozen = convert_to_constants.convert_variables_to_constants_v2(saved)
    threads = FLAGS.litert_threads or len(os.sched_getaffinity(0))
    runners = {q: litert_runner(paths[q], threads) for q in ("float32", "int8")}
    contenders = {}
    for shape in shapes:
        features = common.random_batch(*shape, seed=1)
        tensors = {k: tf.constant(v) for k, v in features.items()}
        contenders.setdefault("SavedModel (TF)", {})[shape] = lambda t=tensors, keep=loaded: saved(
            **t
        )["probabilities"].numpy()
        contenders.setdefault("SavedModel frozen (TF)", {})[shape] = lambda t=tensors: frozen(**t)
        for quantize, runner in runners.items():  # one interpreter per file: resized per shape
            contenders.setdefault(f"LiteRT {quantize}", {})[shape] = lambda r=runner, f=features: r(
                **f
            )["probabilities"]
        for name, (address, model) in servers.items():
            contenders.setdefault(name, {})[shape] = grpc_call(address, model, features)
        if ort is not None:
            for quant in ("float32", "int8"):
                contenders.setdefault(f"onnxruntime {quant}", {})[shape] = ort.add(
                    "encoder",
                    quant=quant,
                    batch=shape[0],
                    seq=shape[1],
                    threads=FLAGS.onnxruntime_threads,
                )
    return contenders


def main(argv):
    del argv
    common.set_threads_from_env()
    desc = common.machine_description(["ai_edge_litert"])
    ort = common.OnnxRuntimePeer() if FLAGS.onnxruntime and common.onnxruntime_or_none() else None
    procs = []
    with tempfile.TemporaryDirectory(prefix="bench_litert_") as tmp:
        tmp = pathlib.Path(tmp)
        print("exporting (LiteRT float32 -> 1, int8 -> 2) ...", flush=True)
        task, paths, export_seconds = export_versions(FLAGS.model_dir, tmp / "base")
        threads = FLAGS.litert_threads or len(os.sched_getaffinity(0))
        print("SST-2 dev agreement ...", flush=True)
        agree = agreement(task, paths, threads)
        servers = {}
        try:
            if FLAGS.grpc:
                print("starting servers ...", flush=True)
                for litert in (False, True):
                    proc, address = start_server(tmp / "base", tmp, litert)
                    procs.append(proc)
                    models = ("float32", "int8") if litert else ("saved_model",)
                    for model in models:
                        label = f"LiteRT {model}" if litert else "SavedModel"
                        servers[f"gRPC {label}"] = (address, model)
            b, t, lt = FLAGS.batch_size, FLAGS.seq_length, FLAGS.latency_seq_length
            contenders = build_contenders(paths, [(b, t), (1, lt)], servers, ort)
            print(f"throughput at {b} x {t} ...", flush=True)
            tput = common.alternate(
                {n: c[(b, t)] for n, c in contenders.items()}, FLAGS.repetitions, warmup=2
            )
            print(f"latency at 1 x {lt} ...", flush=True)
            inner = 10
            lat = common.alternate(
                {n: c[(1, lt)] for n, c in contenders.items()},
                max(1, FLAGS.latency_calls // inner),
                warmup=5,
                inner=inner,
                log=False,
            )
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=30)
            if ort is not None:
                ort.close()
    seqs = {n: b / common.median(v) for n, v in tput.items()}
    p50 = {n: common.percentile(v, 50) * 1e3 for n, v in lat.items()}
    p99 = {n: common.percentile(v, 99) * 1e3 for n, v in lat.items()}
    rows = []
    for name in contenders:
        peer = "onnxruntime int8" if "int8" in name else "onnxruntime float32"
        rows.append(
            (
                name,
                p50[name],
                p99[name],
                common.ratio(p50.get(peer), p50[name]),
                seqs[name],
                common.ratio(seqs[name], seqs.get(peer)),
            )
        )
    table = common.markdown_table(
        [
            "contender",
            f"p50 ms @1x{lt}",
            "p99 ms",
            "p50 speed vs ONNX Runtime (same precision)",
            f"seq/s @{b}x{t}",
            "vs ONNX Runtime (same precision)",
        ],
        rows,
    )
    acc = agree["accuracy"]
    notes = [
        f"Model: {pathlib.Path(FLAGS.model_dir).name} ({task.task_name or 'classifier'}, "
        f"{len(task.label_names or [])} labels); exports took {export_seconds['float32']:.0f} s "
        f"(float32 LiteRT) and {export_seconds['int8']:.0f} s (int8).",
        f"SST-2 dev ({agree['examples']} sentences): accuracy SavedModel "
        f"{100 * acc['SavedModel']:.2f}%, LiteRT float32 {100 * acc['LiteRT float32']:.2f}%, "
        f"LiteRT int8 {100 * acc['LiteRT int8']:.2f}%; int8 predictions equal to float32: "
        f"{100 * agree['int8_same_prediction']:.2f}%; largest probability difference against "
        f"the SavedModel: float32 {agree['max_prob_diff']['LiteRT float32']:.2e}, int8 "
        f"{agree['max_prob_diff']['LiteRT int8']:.4f}.",
        f"LiteRT threads: {threads} (in process and in the --prefer_tflite_model server); "
        f"TensorFlow threads: {os.environ.get('BENCH_THREADS', 'default')}; ONNX Runtime "
        f"intra-op threads: {FLAGS.onnxruntime_threads or 'default'}.",
        f"{FLAGS.repetitions} alternating rounds at {b} x {t}; latency: "
        f"{FLAGS.latency_calls} calls per contender in alternating blocks of 10.",
        "ONNX Runtime runs the encoder only (Hugging Face BertModel, same pretrained weights), "
        "ours the whole classifier (encoder, pooler, head, softmax, labels).",
    ]
    body = common.with_notes(table, notes)
    common.report(
        "Exported model: LiteRT and SavedModel against ONNX Runtime (bench_litert)",
        body,
        desc,
        FLAGS.append,
    )


if __name__ == "__main__":
    app.run(main)
