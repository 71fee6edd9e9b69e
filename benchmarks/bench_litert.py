"""A fine-tuned classifier's exports (SavedModel, LiteRT float32 and int8), in process and
through `serving.server` gRPC, against ONNX Runtime and OpenVINO: batch-1 latency, batch-32
throughput, SST-2 dev accuracy and int8 agreement (method: docs/results/export-litert.md).

    KERAS_BERT_PEER_PYTHON=<venv with torch, transformers, onnx, onnxruntime[, openvino, nncf,
        tensorflow]>/bin/python \\
        python -m benchmarks.bench_litert --model_dir=<run_dir> [--repetitions=7] [--append]
"""

import os
import pathlib
import tempfile
import time

import numpy as np
from absl import flags

from benchmarks import common, serving_harness
from keras_bert import cli

TOPIC = "export-litert"
FLAGS = flags.FLAGS
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
# OpenVINO contender name suffix -> benchmarks/peers/openvino_peer.py source
OPENVINO_SOURCES = {"our SavedModel": "ours", "HF ONNX": "hf"}
SERVED = {  # with --prefer_tflite_model or not: served model -> (version, contender name)
    True: {"float32": (1, "gRPC LiteRT float32"), "int8": (2, "gRPC LiteRT int8")},
    False: {"saved_model": (1, "gRPC SavedModel")},
}
HF_AGREEMENT_SENTENCES = 64  # dev sentences whose int8 / float32 encoder outputs are compared


def define_flags() -> None:
    """The flags, defined when the benchmark runs or by a test, never at import."""
    flags.DEFINE_string("model_dir", None, "A run_classifier output_dir or .keras task.")
    flags.DEFINE_integer("repetitions", 7, "Alternating rounds at batch_size x seq_length.")
    common.define_encoder_shape_flags(latency_calls=200)
    flags.DEFINE_integer("litert_threads", 0, "LiteRT threads, also served (0 = per CPU).")
    flags.DEFINE_integer("server_threads", 0, "The SavedModel server's intra-op threads.")
    flags.DEFINE_bool("onnxruntime", True, "Include the ONNX Runtime peer when available.")
    flags.DEFINE_integer("onnxruntime_threads", 0, "ONNX Runtime intra-op threads (0 = default).")
    flags.DEFINE_bool("openvino", True, "Include the OpenVINO peer when available.")
    flags.DEFINE_integer("openvino_threads", 0, "OpenVINO threads (0 = default).", lower_bound=0)
    flags.DEFINE_integer(
        "openvino_calibration_sentences",
        300,
        "SST-2 train sentences calibrating OpenVINO int8.",
        lower_bound=1,
    )
    flags.DEFINE_bool("grpc", True, "Include the serving.server contenders.")
    flags.DEFINE_bool("saved_model", True, "Include the SavedModel contenders (TF runtime).")
    flags.DEFINE_bool("append", False, common.append_help(TOPIC))
    common.bounds(repetitions=1, litert_threads=0, server_threads=0, onnxruntime_threads=0)
    flags.adopt_module_key_flags(common)  # the shapes: listed by --help
    flags.mark_flag_as_required("model_dir")
    common.existing("model_dir")


def export_versions(model_dir, base: pathlib.Path):
    """Exports the task twice (LiteRT float32 -> version 1, int8 -> version 2); returns
    (task, {"float32": dir, "int8": dir}, seconds per export)."""
    from keras_bert.tasks.loading import load_task

    task = load_task(model_dir)
    paths, seconds = {}, {}
    for version, quantize in ((1, "float32"), (2, "int8")):
        start = time.perf_counter()
        paths[quantize] = pathlib.Path(  # Task.export returns the directory as a str
            task.export(base, "model", version=version, dtype="float32", litert=quantize)
        )
        seconds[quantize] = time.perf_counter() - start
    return task, paths, seconds


def litert_runner(path: pathlib.Path, threads: int):
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path / "model.tflite"), num_threads=threads)
    return interpreter.get_signature_runner("encoded")


def openvino_outputs(ov, source: str, ids: dict, tmp: pathlib.Path) -> dict:
    """quant -> the OpenVINO peer's output (benchmarks/peers/openvino_peer.py, "predict") on `ids`."""
    ids_file = str(tmp / f"openvino_{source}_ids.npz")
    np.savez(ids_file, **ids)
    outputs = {}
    for quant in ("float32", "int8"):
        out = tmp / f"openvino_{source}_{quant}.npz"
        threads = FLAGS.openvino_threads
        ov.add("predict", source=source, quant=quant, threads=threads, ids=ids_file, out=str(out))
        with np.load(out) as f:
            outputs[quant] = f["output"]
    return outputs


def token_cosines(a, b, mask) -> np.ndarray:
    """Cosine of a[i, t] and b[i, t] ([N, T, H]) for every real token (mask [N, T] == 1)."""
    keep = np.asarray(mask, bool)
    x, y = a[keep].astype(np.float64), b[keep].astype(np.float64)
    return (x * y).sum(-1) / (np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1))


def agreement(task, paths, threads: int, ov=None, tmp: pathlib.Path | None = None) -> dict:
    """The SST-2 dev agreement of the exports (and of the OpenVINO peer `ov`, files under `tmp`)."""
    import tensorflow as tf

    texts, labels = common.sst2_sentences("dev")
    packed = task.preprocessor(tf.constant(texts))
    ids = {k: np.asarray(packed[k], np.int32) for k in INPUT_NAMES}
    runs = {"SavedModel": tf.saved_model.load(str(paths["float32"])).signatures["encoded"]}
    for quantize in ("float32", "int8"):
        runs[f"LiteRT {quantize}"] = litert_runner(paths[quantize], threads)
    probabilities = {}
    for name, run in runs.items():
        chunks = [
            run(**{k: v[i : i + 64] for k, v in ids.items()}) for i in range(0, len(texts), 64)
        ]
        probabilities[name] = np.concatenate([np.asarray(c["probabilities"]) for c in chunks])
    result = {"examples": len(texts)}
    if ov is not None:
        for quant, output in openvino_outputs(ov, "ours", ids, tmp).items():
            probabilities[f"OpenVINO {quant}"] = output
        few = {k: v[:HF_AGREEMENT_SENTENCES] for k, v in ids.items()}
        hf = openvino_outputs(ov, "hf", few, tmp)
        cos = token_cosines(hf["float32"], hf["int8"], few["input_mask"])
        result["openvino_hf_int8_cosine"] = (float(cos.mean()), float(cos.min()), len(cos))
    preds = {n: p.argmax(-1) for n, p in probabilities.items()}
    result["accuracy"] = {n: float(np.mean(p == labels)) for n, p in preds.items()}
    result["same_prediction"] = {  # int8 against float32 of the same runtime
        n: float(np.mean(preds[n] == preds[n.replace("int8", "float32")]))
        for n in preds
        if "int8" in n
    }
    result["max_prob_diff"] = {
        n: float(np.abs(probabilities[n] - probabilities["SavedModel"]).max())
        for n in probabilities
        if n != "SavedModel"
    }
    return result


def start_server(base: pathlib.Path, tmp: pathlib.Path, litert: bool):
    """serving.server on `base` serving `SERVED[litert]`, its models AVAILABLE."""
    kind = "litert" if litert else "plain"
    configs = [
        serving_harness.model_config(n, base / "model", v) for n, (v, _) in SERVED[litert].items()
    ]
    threads = FLAGS.litert_threads if litert else FLAGS.server_threads
    server_flags = [serving_harness.config_flag(tmp / f"{kind}.config", configs)]
    server_flags += [f"--tensorflow_intra_op_parallelism={threads}"]
    server_flags += ["--prefer_tflite_model"] if litert else []
    server = serving_harness.ServerProcess(server_flags, tmp / f"server_{kind}.log")
    return server.wait_available(*SERVED[litert])


def build_contenders(paths, shapes, servers, ort, ov, threads: int):
    """name -> {(batch, seq): zero-argument callable}, on fixed random ids of each shape."""
    import tensorflow as tf

    features = {shape: common.random_batch(*shape, seed=1) for shape in shapes}
    contenders = {}
    if FLAGS.saved_model:
        loaded = tf.saved_model.load(str(paths["float32"]))  # owns the variables: keep it alive
        tensors = {s: {k: tf.constant(v) for k, v in f.items()} for s, f in features.items()}
        run = loaded.signatures["encoded"]
        contenders["SavedModel (TF)"] = common.calls(
            lambda t, keep=loaded: run(**t)["probabilities"].numpy(), tensors
        )
    for quantize in ("float32", "int8"):  # one interpreter per file: resized per shape
        runner = litert_runner(paths[quantize], threads)
        contenders[f"LiteRT {quantize}"] = common.calls(
            lambda f, r=runner: r(**f)["probabilities"], features
        )
    for name, (address, model) in servers.items():
        requests = {
            s: serving_harness.predict_request(model, f, "encoded") for s, f in features.items()
        }
        contenders[name] = {
            s: serving_harness.predict_call(address, r) for s, r in requests.items()
        }
    for quant in ("float32", "int8") if ort is not None else ():
        contenders[f"onnxruntime {quant}"] = ort.at(
            shapes, quant=quant, threads=FLAGS.onnxruntime_threads
        )
    for quant in ("float32", "int8") if ov is not None else ():
        for label, source in OPENVINO_SOURCES.items():
            contenders[f"OpenVINO {quant} ({label})"] = ov.at(
                shapes, source=source, quant=quant, threads=FLAGS.openvino_threads, seed=1
            )
    return contenders


def table_rows(names, p50: dict, p99: dict, seqs: dict) -> tuple[list[str], list[tuple]]:
    """(peer names, one row per contender name): p50 ms, p99 ms, then the p50 speed and the
    throughput against each peer of the row's precision (ONNX Runtime, the best OpenVINO)."""
    p50, seqs = {n: p50[n] for n in names}, {n: seqs[n] for n in names}
    with_openvino = any(n.startswith("OpenVINO ") for n in names)
    rows = []
    for name in names:
        quant = "int8" if "int8" in name else "float32"
        peers = [f"onnxruntime {quant}", *([f"OpenVINO {quant} "] if with_openvino else [])]
        speed = [common.vs_best(p50[name], p50, p, lower_is_better=True) for p in peers]
        tput = [common.vs_best(seqs[name], seqs, p) for p in peers]
        rows.append((name, p50[name], p99[name], *speed, seqs[name], *tput))
    return ["ONNX Runtime", *(["best OpenVINO"] if with_openvino else [])], rows


def served_overhead_notes(p50: dict) -> list[str]:
    """The served overhead note: served p50 minus in-process p50 at batch 1, where both ran."""
    pairs = {"gRPC SavedModel": "SavedModel (TF)"}
    pairs.update({f"gRPC LiteRT {q}": f"LiteRT {q}" for q in ("float32", "int8")})
    found = [f"{i} {p50[s] - p50[i]:.2f} ms" for s, i in pairs.items() if s in p50 and i in p50]
    note = "Served overhead at batch 1 (served p50 minus in-process p50): "
    return [note + ", ".join(found) + "."] if found else []


def start_openvino(export_dir: pathlib.Path, tmp: pathlib.Path):
    """The OpenVINO peer on `export_dir`, calibrated on SST-2 train sentences, or None (not
    asked for, or its interpreter lacks what it needs: a one-line message)."""
    if not FLAGS.openvino or not common.peer_or_none("OpenVINO"):
        return None
    texts, _ = common.sst2_sentences("train", FLAGS.openvino_calibration_sentences)
    calibration = tmp / "openvino_calibration.npz"
    np.savez(calibration, **common.featurize(texts, FLAGS.seq_length))
    return common.peer("OpenVINO", export_dir, calibration)


def agreement_notes(agree: dict) -> list[str]:
    """The notes of `agreement`'s result: accuracy, int8 against float32, differences."""
    acc, same, diff = agree["accuracy"], agree["same_prediction"], agree["max_prob_diff"]
    notes = [
        f"SST-2 dev ({agree['examples']} sentences): accuracy "
        + ", ".join(f"{n} {100 * a:.2f}%" for n, a in acc.items())
        + "; int8 predictions equal to the same runtime's float32: "
        + ", ".join(f"{n} {100 * x:.2f}%" for n, x in same.items())
        + "; largest probability difference against the SavedModel: "
        + ", ".join(f"{n} {x:.2e}" for n, x in diff.items())
        + "."
    ]
    if "openvino_hf_int8_cosine" in agree:
        mean, low, tokens = agree["openvino_hf_int8_cosine"]
        notes.append(
            f"OpenVINO int8 (HF ONNX) against its float32, last_hidden_state on the first "
            f"{HF_AGREEMENT_SENTENCES} dev sentences ({tokens} real tokens): cosine mean "
            f"{mean:.4f}, minimum {low:.4f}."
        )
    return notes


def main(argv):
    del argv
    common.set_threads_from_env()
    desc = common.machine_description(["ai_edge_litert"])
    ort = common.start_peer("ONNX Runtime", FLAGS.onnxruntime)
    started, servers = [], {}
    shapes = common.encoder_shapes()
    (b, t), (_, lt) = shapes
    with tempfile.TemporaryDirectory(prefix="bench_litert_") as tmp:
        tmp = pathlib.Path(tmp)
        print("exporting (LiteRT float32 -> 1, int8 -> 2) ...", flush=True)
        task, paths, export_seconds = export_versions(FLAGS.model_dir, tmp / "base")
        threads = FLAGS.litert_threads or len(os.sched_getaffinity(0))
        ov = start_openvino(paths["float32"], tmp)
        try:
            print("SST-2 dev agreement ...", flush=True)
            agree = agreement(task, paths, threads, ov, tmp)
            for litert in ((False, True) if FLAGS.saved_model else (True,)) if FLAGS.grpc else ():
                print("starting a server ...", flush=True)
                started.append(start_server(tmp / "base", tmp, litert))
                for model, (_, name) in SERVED[litert].items():
                    servers[name] = (started[-1].address, model)
            contenders = build_contenders(paths, shapes, servers, ort, ov, threads)
            seqs, p50, p99, speed_note = common.encoder_speed(
                contenders, shapes, FLAGS.repetitions, FLAGS.latency_calls, 5
            )
        finally:
            common.close_all(ort, ov, *started)
    peers, rows = table_rows(list(contenders), p50, p99, seqs)
    headers = ["contender", f"p50 ms @1x{lt}", "p99 ms"]
    headers += [f"p50 speed vs {p} (same precision)" for p in peers]
    headers += [f"seq/s @{b}x{t}", *(f"vs {p} (same precision)" for p in peers)]
    calibrated = f", int8 calibrated on {FLAGS.openvino_calibration_sentences} sentences"
    calibrated = calibrated if ov else ""
    notes = [
        f"Model: {pathlib.Path(FLAGS.model_dir).name} ({task.task_name or 'classifier'}, "
        f"{len(task.label_names or [])} labels); exports took {export_seconds['float32']:.0f} s "
        f"(float32 LiteRT) and {export_seconds['int8']:.0f} s (int8).",
        *agreement_notes(agree),
        f"LiteRT threads: {threads} (in process and in the --prefer_tflite_model server); "
        f"TensorFlow threads: {os.environ.get('BENCH_THREADS', 'default')}; ONNX Runtime "
        f"intra-op threads: {FLAGS.onnxruntime_threads or 'default'}; OpenVINO threads: "
        f"{FLAGS.openvino_threads or 'default'}{calibrated}.",
        speed_note,
        *served_overhead_notes(p50),
    ]
    peers = "ONNX Runtime" + (" and OpenVINO" if ov else "")
    title = f"Exported model: LiteRT and SavedModel against {peers} (bench_litert)"
    common.report(
        TOPIC, title, common.markdown_table(headers, rows), desc, FLAGS.append, notes=notes
    )


if __name__ == "__main__":
    define_flags()
    cli.run(main)
