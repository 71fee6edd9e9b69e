"""Encoder inference speed, ours (TensorFlow, XLA, bfloat16, LiteRT) against keras-hub's
BertBackbone and Hugging Face on PyTorch and on ONNX Runtime, all with the weights of
`minilm_l6_h384_uncased`: sequences/s at 32 x 128 (and GFLOP/s against the matmul ceilings measured
in the same run), p50 / p99 ms at 1 x 32, and bfloat16 against float32 predictions on SST-2 dev.
The PyTorch and ONNX Runtime peers run under `$KERAS_BERT_PEER_PYTHON` (default this
interpreter). Contenders and method: docs/results/encoder.md.

    [KERAS_BERT_PEER_PYTHON=<torch venv>/bin/python] python -m benchmarks.bench_encoder \
        [--repetitions=5] [--latency_calls=40] [--notorch] [--noonnxruntime] [--nolitert]
"""

import os

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


def encoder_fn(stack: str, dtype: str, xla: bool | None = None):
    """(model, run): `stack` ("ours" or "keras-hub") on PRESET's weights under the dtype policy
    `dtype`, and `run(features)` -> its sequence output, inside `tf.function(jit_compile=xla)`."""
    import tensorflow as tf

    if stack == "ours":
        import keras_bert

        model, inputs = keras_bert.from_pretrained(common.PRESET, dtype=dtype), lambda f: f
    else:
        import keras_hub

        model = keras_hub.models.BertBackbone.from_preset(str(common.model_dir()), dtype=dtype)
        inputs = common.keras_hub_inputs

    @tf.function(jit_compile=xla, reduce_retracing=True)
    def run(features):
        return model(inputs(features), training=False)["sequence_output"]

    return model, run


def litert_fn(encoder, quantize: str, shapes, threads: int):
    """callable(features_numpy) -> numpy [B, T, H]: `encoder` converted to LiteRT (`quantize`
    "float32" or "int8"), one interpreter with `threads` threads per (batch, seq) in `shapes`."""
    from ai_edge_litert.interpreter import Interpreter
    from keras_bert.saved_model import litert

    model = litert.convert_encoder(encoder, quantize)
    names = ("input_word_ids", "input_mask", "input_type_ids")
    interpreters = {}
    for shape in shapes:
        interpreter = Interpreter(model_content=model, num_threads=threads)
        details = interpreter.get_input_details()
        index = {n: next(d["index"] for d in details if n in d["name"]) for n in names}
        for n in names:
            interpreter.resize_tensor_input(index[n], list(shape))
        interpreter.allocate_tensors()
        output = interpreter.get_output_details()[0]["index"]
        interpreters[tuple(shape)] = (interpreter, index, output)

    def call(features):
        interpreter, index, output = interpreters[features["input_word_ids"].shape]
        for n in names:
            interpreter.set_tensor(index[n], features[n])
        interpreter.invoke()
        return interpreter.get_tensor(output)

    return call


def build_contenders(peer, tf_peers=(), ort_peer=None):
    """name -> callable(features_numpy) -> numpy array, or for a peer in its own process (PyTorch,
    ONNX Runtime, ours with other thread counts; fixed inputs of the same shapes) a dict
    (batch, seq) -> callable(); float32 first."""
    import tensorflow as tf

    def tf_call(fn):
        return lambda features: fn({k: tf.constant(v) for k, v in features.items()}).numpy()

    shapes = common.encoder_shapes()
    contenders, encoders = {}, {}
    for dtype in ("float32", "mixed_bfloat16") if FLAGS.bfloat16 else ("float32",):
        short = "float32" if dtype == "float32" else "bfloat16"
        encoders[short], run = encoder_fn("ours", dtype, xla=False)
        contenders[f"ours {short}"] = tf_call(run)
        contenders[f"ours {short} XLA"] = tf_call(encoder_fn("ours", dtype, xla=True)[1])
        if FLAGS.keras_hub:
            contenders[f"keras-hub {short}"] = tf_call(encoder_fn("keras-hub", dtype)[1])
        for threads in (int(n) for n in FLAGS.torch_threads) if peer is not None else ():
            name = f"pytorch {short}{' autocast' if short == 'bfloat16' else ''}"
            contenders[name + common.threads_label(threads)] = peer.at(
                shapes, bf16=short == "bfloat16", threads=threads
            )
    if FLAGS.bfloat16:  # inference-only: variables stored in bfloat16
        contenders["ours bfloat16 weights"] = tf_call(encoder_fn("ours", "bfloat16", False)[1])
        if FLAGS.keras_hub:
            contenders["keras-hub bfloat16 weights"] = tf_call(
                encoder_fn("keras-hub", "bfloat16")[1]
            )
    for threads, tf_peer in tf_peers:
        for stack in ("ours", "keras-hub") if FLAGS.keras_hub else ("ours",):
            for dtype, kind in (("float32", "float32"), ("bfloat16", "bfloat16 weights")):
                if dtype == "float32" or FLAGS.bfloat16:
                    contenders[f"{stack} {kind}{common.threads_label(threads)}"] = tf_peer.at(
                        shapes, stack=stack, dtype=dtype
                    )
    if FLAGS.litert:
        for quantize in ("float32", "int8"):
            contenders[f"ours LiteRT {quantize}"] = litert_fn(
                encoders["float32"], quantize, shapes, FLAGS.litert_threads
            )
    for threads in (int(n) for n in FLAGS.onnxruntime_threads) if ort_peer is not None else ():
        for quant in ("float32", "int8"):
            name = f"onnxruntime {quant}{common.threads_label(threads)}"
            contenders[name] = ort_peer.at(shapes, quant=quant, threads=threads)
    return contenders, encoders


def check_predictions(encoders, probe_train: int, seq_length: int) -> str:
    """The note comparing bfloat16 with float32 predictions of a logistic probe on our
    mean-pooled embeddings."""
    import tensorflow as tf
    from sklearn.linear_model import LogisticRegression

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
        embed(encoders["float32"], common.featurize(train_texts, seq_length)), train_labels
    )
    dev = common.featurize(dev_texts, seq_length)
    p32 = probe.predict_proba(embed(encoders["float32"], dev))
    p16 = probe.predict_proba(embed(encoders["bfloat16"], dev))
    agree = float(np.mean(p32.argmax(1) == p16.argmax(1)))
    acc32, acc16 = (float(np.mean(p.argmax(1) == dev_labels)) for p in (p32, p16))
    return (
        f"bfloat16 vs float32 predictions (ours), SST-2 dev ({len(dev_texts)} sentences, "
        f"T={seq_length}), logistic-regression probe fitted on float32 mean-pooled "
        f"embeddings of the first {probe_train} SST-2 train sentences: agreement "
        f"{100 * agree:.2f}%, max probability difference "
        f"{float(np.abs(p32 - p16).max()):.4f}; dev accuracy float32 {100 * acc32:.1f}%"
        f", bfloat16 {100 * acc16:.1f}%."
    )


def peer_versions() -> str:
    """Python and package versions of `common.peer_python()` (the PyTorch / ONNX Runtime peers)."""
    code = (
        "import sys; from benchmarks import common; print(f'Python {sys.version.split()[0]}; ' "
        "+ common.versions(('torch', 'transformers', 'onnx', 'onnxruntime')))"
    )
    proc = common.run_python(common.peer_python(), code, timeout=120)
    return (proc.stdout.strip() if not isinstance(proc, str) else "") or "unknown"


BEST_PEERS = {  # precision -> the peers (name prefixes) a row of that precision is compared with
    "int8": ("onnxruntime int8",),
    "bfloat16": ("keras-hub bfloat16", "pytorch bfloat16"),
    "float32": ("keras-hub float32", "pytorch float32", "onnxruntime float32"),
}


def flops_per_token(num_layers: int, hidden: int, intermediate: int, seq_len: int) -> float:
    """Forward FLOPs per token of the encoder, embeddings and pooler excluded (the count:
    docs/results/encoder.md)."""
    return float(
        num_layers * (2 * (4 * hidden * hidden + 2 * hidden * intermediate) + 4 * seq_len * hidden)
    )


def main(argv):
    del argv
    common.set_threads_from_env()
    desc = common.machine_description(["torch", "transformers", "onnxruntime", "ai-edge-litert"])
    from keras_bert.checkpoints.presets import resolve_preset  # noqa: F401 - fail early

    peer = common.start_peer("PyTorch", FLAGS.torch)
    ort_peer = common.start_peer("ONNX Runtime", FLAGS.onnxruntime)
    tf_peers = [  # N intra-op and N inter-op threads
        (int(n), common.ChildPeer("benchmarks.peers.tf_peer", n, n))
        for n in FLAGS.ours_threads
        if int(n)
    ]
    contenders, encoders = build_contenders(peer, tf_peers, ort_peer)
    shapes = common.encoder_shapes()
    (b, t), (_, lt) = shapes
    features = {shape: common.random_batch(*shape, seed=i) for i, shape in enumerate(shapes)}
    calls = {  # an in-process contender runs the same batches at each shape
        name: fn
        if isinstance(fn, dict)
        else {s: lambda fn=fn, f=f: fn(f) for s, f in features.items()}
        for name, fn in contenders.items()
    }
    seqs, lat = common.encoder_speed(calls, shapes, FLAGS.repetitions, FLAGS.latency_calls, 3)
    common.close_all(peer, ort_peer, *(p for _, p in tf_peers))
    ceilings = {}
    if FLAGS.ceiling_size:
        print("ceilings ...", flush=True)
        ceilings = common.measure_ceilings(FLAGS.ceiling_size, 3, with_torch=False)
    flops_tok = flops_per_token(6, 384, 1536, t)

    def best(peers, table, pick=max):
        vals = [v for n, v in table.items() if n.startswith(peers)]
        return pick(vals) if vals else None

    rows, p50 = [], {n: v[0] for n, v in lat.items()}
    for name in contenders:
        precision = next((p for p in ("int8", "bfloat16") if p in name), "float32")
        peers = BEST_PEERS[precision]
        gflops = seqs[name] * t * flops_tok / 1e9
        ceiling = ceilings.get(f"tensorflow {precision}")  # none for int8
        rows.append(
            (
                name,
                seqs[name],
                common.ratio(seqs[name], best(peers, seqs)),
                f"{gflops:,.0f}",
                f"{100 * gflops / ceiling:.0f}%" if ceiling else "n/a",
                *lat[name],
                common.ratio(best(peers, p50, min), lat[name][0]),
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
    if FLAGS.check_predictions and "bfloat16" in encoders:
        print("prediction check ...", flush=True)
        notes.append(check_predictions(encoders, FLAGS.probe_train, FLAGS.probe_seq_length))
    common.report(
        TOPIC, "Encoder inference (bench_encoder)", table, desc, FLAGS.append, FLAGS.label, notes
    )


if __name__ == "__main__":
    app.run(main)
