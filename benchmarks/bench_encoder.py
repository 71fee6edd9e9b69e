"""Encoder inference speed, ours (TensorFlow and LiteRT) vs keras-hub BertBackbone vs
Hugging Face on PyTorch and on ONNX Runtime.

All contenders carry the same real weights (`minilm_l6_h384_uncased`, all-MiniLM-L6-v2) and run
in one process, alternating repetitions, medians:
- ours: `keras_bert.from_pretrained(...)` inside `tf.function`, with and without XLA
  (`jit_compile=True`); float32, the `mixed_bfloat16` policy (float32 variables, cast to
  bfloat16 at every call, as training keeps them) and, for inference, the `bfloat16` policy
  ("bfloat16 weights": variables stored in bfloat16, LayerNorm and softmax still in float32;
  outputs bit-identical to `mixed_bfloat16`, without casting ~11M weights per call).
- ours and keras-hub with N TensorFlow threads (`--ours_threads`, default 1): the same float32
  and bfloat16-weights encoders in a child process (benchmarks/peers/tf_peer.py) whose intra-op and
  inter-op pools hold N threads; the counterpart of PyTorch's thread settings below.
- keras-hub: `BertBackbone.from_preset(<the same HF directory>)` inside `tf.function`; float32,
  `mixed_bfloat16` and `bfloat16`.
- PyTorch (optional peer): `transformers.BertModel.from_pretrained(<same directory>)`, eval mode,
  `torch.inference_mode()`; float32 and bfloat16 autocast; in its own process
  (benchmarks/peers/torch_peer.py), timed there, inputs of the same shapes.
- ONNX Runtime (optional peer): the same `BertModel` exported with `torch.onnx.export` (opset 17),
  float32 and dynamic int8 (`onnxruntime.quantization.quantize_dynamic`, int8 weights), run by
  ONNX Runtime's CPU provider with all graph optimizations, `--onnxruntime_threads` intra-op
  threads; in its own process (benchmarks/peers/ort_peer.py), timed there. How BERT is commonly
  deployed with ONNX Runtime.
- ours on LiteRT: our float32 encoder converted by `keras_bert.saved_model.litert.convert_encoder`
  (float32, and int8 dynamic-range quantization), run by `ai_edge_litert`'s Interpreter (XNNPACK)
  with `--litert_threads` threads, one interpreter per input shape, in this process.
  int8 rows are compared with "onnxruntime int8" (the other int8 contender); they have no matmul
  ceiling to compare with.
The PyTorch and ONNX Runtime peers run under `$KERAS_BERT_PEER_PYTHON` (default this interpreter),
e.g. a separate virtual environment holding torch, transformers, onnx and onnxruntime.
Throughput at batch 32 x 128 tokens (sequences/s, achieved GFLOP/s against the matmul ceilings of
`bench_matmul` measured in the same run) and latency at batch 1 x 32 tokens (p50 / p99 ms).

The bfloat16 prediction check (`--check_predictions`) fits a logistic-regression probe
(scikit-learn) on float32 mean-pooled embeddings of the first `--probe_train` SST-2 train
sentences, then compares its predictions and probabilities on SST-2 dev computed from float32
and from bfloat16 embeddings of our encoder.

    [KERAS_BERT_PEER_PYTHON=<torch venv>/bin/python] python -m benchmarks.bench_encoder \
        [--repetitions=5] [--latency_calls=40] [--notorch] [--noonnxruntime] [--nolitert]
"""

import os
import tempfile

import numpy as np
from absl import app, flags

from benchmarks import common

TOPIC = "encoder"
FLAGS = flags.FLAGS
flags.DEFINE_integer("repetitions", 5, "Alternating rounds at batch 32 x 128.")
common.define_encoder_shape_flags(latency_calls=40)
flags.DEFINE_integer("ceiling_size", 4096, "Matmul side for the ceilings (0 = skip).")
common.define_torch_flags()
flags.DEFINE_list(
    "ours_threads",
    ["1"],
    "Extra TensorFlow thread settings for ours, one contender "
    "each, in its own process (benchmarks/peers/tf_peer.py) with N intra-op and N inter-op "
    "threads: the counterpart of --torch_threads (a batch-1 server runs best with 1). "
    "Empty = none.",
)
flags.DEFINE_bool(
    "onnxruntime",
    True,
    "Include the ONNX Runtime peer (float32 and dynamic int8) "
    "when its interpreter has onnxruntime, onnx, torch and transformers.",
)
flags.DEFINE_list(
    "onnxruntime_threads",
    ["0"],
    "ONNX Runtime intra-op thread settings to run, one "
    "pair of contenders each (0 = ONNX Runtime's default, one per core).",
)
flags.DEFINE_bool("litert", True, "Include ours converted to LiteRT (float32 and int8).")
flags.DEFINE_integer(
    "litert_threads",
    len(os.sched_getaffinity(0)),
    "LiteRT interpreter threads (default: the CPUs this process may run on).",
)
flags.DEFINE_bool("keras_hub", True, "Include keras-hub's BertBackbone.")
flags.DEFINE_bool("bfloat16", True, "Include the bfloat16 contenders.")
flags.DEFINE_bool("check_predictions", True, "Run the bfloat16 vs float32 SST-2 dev check.")
flags.DEFINE_integer("probe_train", 1000, "SST-2 train sentences for the logistic probe.")
flags.DEFINE_integer("probe_seq_length", 64, "Sequence length of the prediction check.")
flags.DEFINE_bool("append", True, common.append_help(TOPIC))
flags.DEFINE_string(
    "label", "", "Extra words for the appended section's title (e.g. 'before fix')."
)


def ours_fn(dtype: str, xla: bool):
    import tensorflow as tf
    import keras_bert

    encoder = keras_bert.from_pretrained(common.PRESET, dtype=dtype)

    @tf.function(jit_compile=xla, reduce_retracing=True)
    def run(features):
        return encoder(features, training=False)["sequence_output"]

    return encoder, run


def keras_hub_fn(dtype: str):
    import keras_hub
    import tensorflow as tf

    backbone = keras_hub.models.BertBackbone.from_preset(str(common.model_dir()), dtype=dtype)

    @tf.function(reduce_retracing=True)
    def run(features):
        return backbone(common.keras_hub_inputs(features), training=False)["sequence_output"]

    return run


def litert_fn(encoder, quantize: str, shapes, threads: int, tmp_dir: str):
    """callable(features_numpy) -> numpy [B, T, H]: `encoder` converted to LiteRT (`quantize`
    "float32" or "int8"), one interpreter with `threads` threads per (batch, seq) in `shapes`."""
    from ai_edge_litert.interpreter import Interpreter
    from keras_bert.saved_model import litert

    path = os.path.join(tmp_dir, f"encoder_{quantize}.tflite")
    with open(path, "wb") as f:
        f.write(litert.convert_encoder(encoder, quantize))
    names = ("input_word_ids", "input_mask", "input_type_ids")
    interpreters = {}
    for shape in shapes:
        interpreter = Interpreter(model_path=path, num_threads=threads)
        details = interpreter.get_input_details()
        index = {n: next(d["index"] for d in details if n in d["name"]) for n in names}
        for n in names:
            interpreter.resize_tensor_input(index[n], list(shape))
        interpreter.allocate_tensors()
        interpreters[tuple(shape)] = (
            interpreter,
            index,
            interpreter.get_output_details()[0]["index"],
        )

    def call(features):
        interpreter, index, output = interpreters[features["input_word_ids"].shape]
        for n in names:
            interpreter.set_tensor(index[n], features[n])
        interpreter.invoke()
        return interpreter.get_tensor(output)

    return call


def build_contenders(peer, tf_peers=(), ort_peer=None, tmp_dir=None):
    """name -> callable(features_numpy) -> numpy array, or for a peer in its own process (PyTorch,
    ONNX Runtime, ours with other thread counts; fixed inputs of the same shapes) a dict
    (batch, seq) -> callable(); float32 first."""
    import tensorflow as tf

    contenders = {}

    def tf_call(fn):
        def call(features):
            return fn({k: tf.constant(v) for k, v in features.items()}).numpy()

        return call

    encoders = {}
    for dtype in ("float32", "mixed_bfloat16") if FLAGS.bfloat16 else ("float32",):
        short = "float32" if dtype == "float32" else "bfloat16"
        encoder, run = ours_fn(dtype, xla=False)
        encoders[short] = encoder
        contenders[f"ours {short}"] = tf_call(run)
        _, run_xla = ours_fn(dtype, xla=True)
        contenders[f"ours {short} XLA"] = tf_call(run_xla)
        if FLAGS.keras_hub:
            contenders[f"keras-hub {short}"] = tf_call(keras_hub_fn(dtype))
        for threads in (int(n) for n in FLAGS.torch_threads) if peer is not None else ():
            name = f"pytorch {short}{' autocast' if short == 'bfloat16' else ''}"
            name += common.threads_label(threads)
            contenders[name] = {
                (b, t): peer.add(
                    "encoder", bf16=short == "bfloat16", batch=b, seq=t, threads=threads
                )
                for b, t in ((FLAGS.batch_size, FLAGS.seq_length), (1, FLAGS.latency_seq_length))
            }
    if FLAGS.bfloat16:  # inference-only: variables stored in bfloat16
        contenders["ours bfloat16 weights"] = tf_call(ours_fn("bfloat16", xla=False)[1])
        if FLAGS.keras_hub:
            contenders["keras-hub bfloat16 weights"] = tf_call(keras_hub_fn("bfloat16"))
    shapes = ((FLAGS.batch_size, FLAGS.seq_length), (1, FLAGS.latency_seq_length))
    for threads, tf_peer in tf_peers:
        suffix = common.threads_label(threads)
        stacks = ("ours", "keras-hub") if FLAGS.keras_hub else ("ours",)
        for stack in stacks:
            for dtype, kind in (("float32", "float32"), ("bfloat16", "bfloat16 weights")):
                if dtype == "float32" or FLAGS.bfloat16:
                    contenders[f"{stack} {kind}{suffix}"] = {
                        (b, t): tf_peer.add("encoder", stack=stack, dtype=dtype, batch=b, seq=t)
                        for b, t in shapes
                    }
    if FLAGS.litert:
        for quantize in ("float32", "int8"):
            contenders[f"ours LiteRT {quantize}"] = litert_fn(
                encoders["float32"], quantize, shapes, FLAGS.litert_threads, tmp_dir
            )
    for threads in (int(n) for n in FLAGS.onnxruntime_threads) if ort_peer is not None else ():
        for quant in ("float32", "int8"):
            name = f"onnxruntime {quant}{common.threads_label(threads)}"
            contenders[name] = {
                (b, t): ort_peer.add("encoder", quant=quant, batch=b, seq=t, threads=threads)
                for b, t in shapes
            }
    return contenders, encoders


def check_predictions(encoders, probe_train: int, seq_length: int) -> dict:
    """bfloat16 vs float32 predictions of a logistic probe on our mean-pooled embeddings."""
    import tensorflow as tf
    from sklearn.linear_model import LogisticRegression

    def featurize(texts):
        return common.featurize(texts, seq_length)

    def embed(encoder, feats, batch=64):
        fn = tf.function(
            lambda f: encoder(f, training=False)["sequence_output"], reduce_retracing=True
        )
        out = []
        for i in range(0, len(feats["input_word_ids"]), batch):
            chunk = {k: tf.constant(v[i : i + batch]) for k, v in feats.items()}
            seq = tf.cast(fn(chunk), tf.float32).numpy()
            mask = chunk["input_mask"].numpy()[..., None].astype(np.float32)
            out.append((seq * mask).sum(1) / mask.sum(1))  # sentence-transformers mean pooling
        return np.concatenate(out)

    train_texts, train_labels = common.sst2_sentences("train", probe_train)
    dev_texts, dev_labels = common.sst2_sentences("dev")
    probe = LogisticRegression(max_iter=2000, C=1.0).fit(
        embed(encoders["float32"], featurize(train_texts)), train_labels
    )
    dev = featurize(dev_texts)
    p32 = probe.predict_proba(embed(encoders["float32"], dev))
    p16 = probe.predict_proba(embed(encoders["bfloat16"], dev))
    agree = float(np.mean(p32.argmax(1) == p16.argmax(1)))
    return {
        "dev_examples": len(dev_texts),
        "agreement": agree,
        "max_prob_diff": float(np.abs(p32 - p16).max()),
        "accuracy_float32": float(np.mean(p32.argmax(1) == dev_labels)),
        "accuracy_bfloat16": float(np.mean(p16.argmax(1) == dev_labels)),
    }


def peer_versions() -> str:
    """Python and package versions of `common.peer_python()` (the PyTorch / ONNX Runtime peers)."""
    code = (
        "import importlib.metadata as m, sys\n"
        "def v(p):\n"
        "    try:\n        return m.version(p)\n"
        "    except m.PackageNotFoundError:\n        return 'absent'\n"
        "print(f'Python {sys.version.split()[0]}; ' + ', '.join(f'{p} {v(p)}' for p in "
        "('torch', 'transformers', 'onnx', 'onnxruntime')))"
    )
    proc = common.run_python(common.peer_python(), code, timeout=120)
    return (proc.stdout.strip() if not isinstance(proc, str) else "") or "unknown"


def main(argv):
    del argv
    common.set_threads_from_env()
    desc = common.machine_description(["torch", "transformers", "onnxruntime", "ai-edge-litert"])
    from keras_bert.checkpoints.presets import resolve_preset  # noqa: F401 - fail early

    peer = common.TorchPeer() if FLAGS.torch and common.torch_or_none() else None
    ort_peer = (
        common.OnnxRuntimePeer() if FLAGS.onnxruntime and common.onnxruntime_or_none() else None
    )
    tf_peers = [
        (int(n), common.TensorFlowPeer(int(n), int(n))) for n in FLAGS.ours_threads if int(n)
    ]
    tmp = tempfile.TemporaryDirectory(prefix="bench_encoder_")
    contenders, encoders = build_contenders(peer, tf_peers, ort_peer, tmp.name)
    b, t, lt = FLAGS.batch_size, FLAGS.seq_length, FLAGS.latency_seq_length
    features = {(b, t): common.random_batch(b, t), (1, lt): common.random_batch(1, lt, seed=1)}
    calls = {  # an in-process contender runs the same batches at each shape
        name: fn
        if isinstance(fn, dict)
        else {s: lambda fn=fn, f=f: fn(f) for s, f in features.items()}
        for name, fn in contenders.items()
    }
    seqs, lat = common.encoder_speed(
        calls, (b, t), (1, lt), FLAGS.repetitions, FLAGS.latency_calls, 3
    )
    common.close_all(peer, ort_peer, *(p for _, p in tf_peers))
    ceilings = {}
    if FLAGS.ceiling_size:
        print("ceilings ...", flush=True)
        ceilings = common.measure_ceilings(FLAGS.ceiling_size, 3, with_torch=False)
    flops_tok = common.encoder_flops_per_token(6, 384, 1536, t)

    def best(prefixes, table, lower=False):
        vals = [v for n, v in table.items() if any(n.startswith(p) for p in prefixes)]
        return (min(vals) if lower else max(vals)) if vals else None

    rows = []
    for name in contenders:
        is_bf16, is_int8 = "bfloat16" in name, "int8" in name
        if is_int8:
            peers = ("onnxruntime int8",)
        elif is_bf16:
            peers = ("keras-hub bfloat16", "pytorch bfloat16")
        else:
            peers = ("keras-hub float32", "pytorch float32", "onnxruntime float32")
        peer_tput = best(peers, seqs)
        peer_p50 = best(peers, {n: v[0] for n, v in lat.items()}, lower=True)
        gflops = seqs[name] * t * flops_tok / 1e9
        ceiling = (
            None
            if is_int8
            else ceilings.get("tensorflow bfloat16" if is_bf16 else "tensorflow float32")
        )
        rows.append(
            (
                name,
                seqs[name],
                common.ratio(seqs[name], peer_tput),
                f"{gflops:,.0f}",
                f"{100 * gflops / ceiling:.0f}%" if ceiling else "n/a",
                lat[name][0],
                lat[name][1],
                common.ratio(peer_p50, lat[name][0]),
            )
        )
    table = common.markdown_table(
        [
            "contender",
            f"seq/s @{b}x{t}",
            "vs best peer (same dtype)",
            "GFLOP/s",
            "of TF matmul ceiling (same dtype)",
            f"p50 ms @1x{FLAGS.latency_seq_length}",
            "p99 ms",
            "p50 speed vs best peer",
        ],
        rows,
    )
    notes = [f"FLOPs: {flops_tok / 1e6:.1f} MFLOP/token at T={t} (dense + attention products)."]
    if ceilings:
        notes.append(
            "Ceilings this run: "
            + ", ".join(f"{k} {v:,.0f} GFLOP/s" for k, v in ceilings.items())
            + f" ({FLAGS.ceiling_size}^3 matmul, median of 3)."
        )
    notes.append(
        f"{FLAGS.repetitions} alternating rounds at batch {b}; latency: "
        f"{FLAGS.latency_calls} calls per contender, alternating blocks of 10."
    )
    if FLAGS.litert:
        notes.append(
            f"ours LiteRT: {FLAGS.litert_threads} interpreter thread"
            f"{'s' * (FLAGS.litert_threads > 1)}; int8 = dynamic-range quantization "
            "(int8 weights, activations quantized per call), as onnxruntime int8; "
            "int8 GFLOP/s counts the same FLOPs as float32."
        )
    if peer is not None or ort_peer is not None:
        notes.append("Peer interpreter: " + peer_versions())
    tmp.cleanup()
    if FLAGS.check_predictions and "bfloat16" in encoders:
        print("prediction check ...", flush=True)
        chk = check_predictions(encoders, FLAGS.probe_train, FLAGS.probe_seq_length)
        notes.append(
            f"bfloat16 vs float32 predictions (ours), SST-2 dev ({chk['dev_examples']} sentences, "
            f"T={FLAGS.probe_seq_length}), logistic-regression probe fitted on float32 mean-pooled "
            f"embeddings of the first {FLAGS.probe_train} SST-2 train sentences: agreement "
            f"{100 * chk['agreement']:.2f}%, max probability difference "
            f"{chk['max_prob_diff']:.4f}; dev accuracy float32 {100 * chk['accuracy_float32']:.1f}%"
            f", bfloat16 {100 * chk['accuracy_bfloat16']:.1f}%."
        )
    common.report(
        TOPIC, "Encoder inference (bench_encoder)", table, desc, FLAGS.append, FLAGS.label, notes
    )


if __name__ == "__main__":
    app.run(main)
