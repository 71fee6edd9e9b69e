"""Encoder inference speed, ours (TensorFlow, XLA, bfloat16) against keras-hub's BertBackbone
and Hugging Face on PyTorch and on ONNX Runtime, all with the weights of `minilm_l6_h384_uncased`:
sequences/s at 32 x 128 and GFLOP/s against the machine's float32 / bfloat16 matmul ceilings
(TensorFlow's, and PyTorch's where its peer runs), measured in the same run; p50 / p99 ms at
1 x 32; bfloat16 against float32 predictions on SST-2 dev. The peers run under
`$KERAS_BERT_PEER_PYTHON` (default this interpreter). Our LiteRT exports are bench_litert's.
Contenders and method: docs/results/encoder.md.

    [KERAS_BERT_PEER_PYTHON=<torch venv>/bin/python] python -m benchmarks.bench_encoder \
        [--repetitions=5] [--latency_calls=40] [--ceiling_size=4096] [--notorch] [--noonnxruntime]
"""

import numpy as np
from absl import flags

from benchmarks import common
from keras_bert import cli

TOPIC = "encoder"
FLAGS = flags.FLAGS
flags.DEFINE_integer("repetitions", 5, "Alternating rounds at batch 32 x 128.")
common.define_encoder_shape_flags(latency_calls=40)
flags.DEFINE_integer("ceiling_size", 4096, "Matmul side N of the ceilings (0 = skip).")
common.define_torch_flags()
flags.DEFINE_list(
    "ours_threads",
    ["1"],
    "TensorFlow thread settings for more ours contenders, each in its own process "
    "(benchmarks/peers/tf_peer.py) with N intra-op and N inter-op threads. Empty = none.",
)
flags.DEFINE_bool("onnxruntime", True, "Include the ONNX Runtime peer (float32 and int8).")
flags.DEFINE_list("onnxruntime_threads", ["0"], "ONNX Runtime thread settings (0 = default).")
flags.DEFINE_bool("keras_hub", True, "Include keras-hub's BertBackbone.")
flags.DEFINE_bool("bfloat16", True, "Include the bfloat16 contenders.")
flags.DEFINE_bool("check_predictions", True, "Run the bfloat16 vs float32 SST-2 dev check.")
flags.DEFINE_integer("probe_train", 1000, "SST-2 train sentences for the logistic probe.")
flags.DEFINE_integer("probe_seq_length", 64, "Sequence length of the prediction check.")
flags.DEFINE_bool("append", True, common.append_help(TOPIC))
flags.DEFINE_string("label", "", "Extra words for the appended section's title.")
common.bounds(repetitions=1, ceiling_size=0, probe_train=1, probe_seq_length=2)
flags.adopt_module_key_flags(common)  # --torch*, the shapes: listed by --help
BEST_PEERS = {  # precision -> the peers (name prefixes) a row of that precision is compared with
    "int8": ("onnxruntime int8",),
    "bfloat16": ("keras-hub bfloat16", "pytorch bfloat16"),
    "float32": ("keras-hub float32", "pytorch float32", "onnxruntime float32"),
}


def encoder_fn(stack: str, dtype: str, xla: bool | None = None):
    """(model, run): `stack` ("ours" or "keras-hub") on PRESET's weights under the dtype policy
    `dtype`, and `run(features)` -> its sequence output, inside `tf.function(jit_compile=xla)`."""
    import tensorflow as tf

    model = common.backbone(stack, dtype)
    inputs = (lambda f: f) if stack == "ours" else common.keras_hub_inputs

    @tf.function(jit_compile=xla, reduce_retracing=True)
    def run(features):
        return model(inputs(features), training=False)["sequence_output"]

    return model, run


def build_contenders(shapes, peer, tf_peers, ort_peer):
    """(name -> {(batch, seq): zero-argument call}, float32 first; short dtype -> our encoder).
    In-process contenders run the same fixed random batches at each shape; the peers in their own
    processes (PyTorch, ONNX Runtime, ours with other thread counts) inputs of the same shapes."""
    import tensorflow as tf

    features = {shape: common.random_batch(*shape, seed=i) for i, shape in enumerate(shapes)}

    def tf_call(run):
        return common.calls(
            lambda f: run({k: tf.constant(v) for k, v in f.items()}).numpy(), features
        )

    stacks = ("ours", "keras-hub") if FLAGS.keras_hub else ("ours",)
    contenders, encoders = {}, {}
    for dtype in ("float32", "mixed_bfloat16") if FLAGS.bfloat16 else ("float32",):
        short = dtype.replace("mixed_", "")
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
    for stack in stacks if FLAGS.bfloat16 else ():  # inference-only: variables in bfloat16
        contenders[f"{stack} bfloat16 weights"] = tf_call(encoder_fn(stack, "bfloat16", False)[1])
    for threads, tf_peer in tf_peers:
        for stack in stacks:
            for dtype in ("float32", "bfloat16") if FLAGS.bfloat16 else ("float32",):
                kind = dtype if dtype == "float32" else "bfloat16 weights"
                contenders[f"{stack} {kind}{common.threads_label(threads)}"] = tf_peer.at(
                    shapes, stack=stack, dtype=dtype
                )
    for threads in (int(n) for n in FLAGS.onnxruntime_threads) if ort_peer is not None else ():
        for quant in ("float32", "int8"):
            name = f"onnxruntime {quant}{common.threads_label(threads)}"
            contenders[name] = ort_peer.at(shapes, quant=quant, threads=threads)
    return contenders, encoders


def check_predictions(encoders, probe_train: int, seq_length: int) -> str:
    """The note comparing bfloat16 with float32 predictions of a logistic probe on our
    mean-pooled embeddings."""
    from sklearn.linear_model import LogisticRegression

    def embed(encoder, feats):  # sentence-transformers mean pooling
        seq = encoder.predict(feats, batch_size=64, verbose=0)["sequence_output"]
        mask = feats["input_mask"][..., None].astype(np.float32)
        return (seq.astype(np.float32) * mask).sum(1) / mask.sum(1)

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
    proc = common.run_command([common.peer_python(), "-c", code], timeout=120)
    return (proc.stdout.strip() if not isinstance(proc, str) else "") or "unknown"


def main(argv):
    del argv
    common.set_threads_from_env()
    desc = common.machine_description(["torch", "transformers", "onnxruntime", "ai-edge-litert"])
    peer = common.start_peer("PyTorch", FLAGS.torch)
    ort_peer = common.start_peer("ONNX Runtime", FLAGS.onnxruntime)
    tf_peers = [  # N intra-op and N inter-op threads
        (int(n), common.ChildPeer("benchmarks.peers.tf_peer", n, n))
        for n in FLAGS.ours_threads
        if int(n)
    ]
    shapes = common.encoder_shapes()
    (b, t), (_, lt) = shapes
    contenders, encoders = build_contenders(shapes, peer, tf_peers, ort_peer)
    seqs, p50, p99, speed_note = common.encoder_speed(
        contenders, shapes, FLAGS.repetitions, FLAGS.latency_calls, 3
    )
    common.close_all(peer, ort_peer, *(p for _, p in tf_peers))
    ceilings = {}
    if FLAGS.ceiling_size:
        print("ceilings ...", flush=True)
        ceilings = common.measure_ceilings(FLAGS.ceiling_size, 3, with_torch=FLAGS.torch)
    h, i = 384, 1536  # forward FLOPs per token of MiniLM-L6-H384's 6 layers (docs/results)
    flops_tok = 6.0 * (2 * (4 * h * h + 2 * h * i) + 4 * t * h)
    rows = []
    for name in contenders:
        precision = next((p for p in ("int8", "bfloat16") if p in name), "float32")
        peers, gflops = BEST_PEERS[precision], seqs[name] * t * flops_tok / 1e9
        ceiling = ceilings.get(f"tensorflow {precision}")  # none for int8
        share = f"{100 * gflops / ceiling:.0f}%" if ceiling else "n/a"
        speed = common.vs_best(p50[name], p50, peers, lower_is_better=True)
        vs_seqs = common.vs_best(seqs[name], seqs, peers)
        rows.append(
            (name, seqs[name], vs_seqs, f"{gflops:,.0f}", share, p50[name], p99[name], speed)
        )
    headers = ["contender", f"seq/s @{b}x{t}", "vs best peer (same dtype)", "GFLOP/s"]
    headers += ["of TF matmul ceiling (same dtype)", f"p50 ms @1x{lt}", "p99 ms"]
    table = common.markdown_table([*headers, "p50 speed vs best peer"], rows)
    notes = [f"FLOPs: {flops_tok / 1e6:.1f} MFLOP/token at T={t} (dense + attention products)."]
    if ceilings:
        notes.append(
            "Ceilings this run: "
            + ", ".join(f"{k} {v:,.0f} GFLOP/s" for k, v in ceilings.items())
            + f" ({FLAGS.ceiling_size}^3 matmul, median of 3)."
        )
    notes.append(speed_note)
    if peer is not None or ort_peer is not None:
        notes.append("Peer interpreter: " + peer_versions())
    if FLAGS.check_predictions and "bfloat16" in encoders:
        print("prediction check ...", flush=True)
        notes.append(check_predictions(encoders, FLAGS.probe_train, FLAGS.probe_seq_length))
    common.report(
        TOPIC, "Encoder inference (bench_encoder)", table, desc, FLAGS.append, FLAGS.label, notes
    )


if __name__ == "__main__":
    cli.run(main)
