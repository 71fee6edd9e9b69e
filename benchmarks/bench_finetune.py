"""Fine-tuning throughput (examples/s), ours against keras-hub and PyTorch, float32 and
mixed_bfloat16; with --pipeline_batches, real SST-2 batches with our dynamic padding against
keras-hub's fixed padding; with --accuracy_steps, SST-2 dev accuracy after fine-tuning ours in
float32 and in bfloat16 (method: docs/results/fine-tuning.md).

    python -m benchmarks.bench_finetune [--repetitions=4] [--pipeline_batches=16] \
        [--accuracy_steps=150] [--notorch]
"""

import time

import numpy as np
from absl import flags

from benchmarks import common
from keras_bert import cli

TOPIC = "fine-tuning"
FLAGS = flags.FLAGS
flags.DEFINE_integer("repetitions", 4, "Alternating rounds.")
flags.DEFINE_integer("steps_per_round", 2, "Timed train steps per contender per round.")
flags.DEFINE_integer("batch_size", 32, "Examples per step.")
flags.DEFINE_integer("seq_length", 64, "Tokens per example (SST-2 sentences fit in 64).")
flags.DEFINE_enum("jit_compile", "auto", ["auto", "true", "false"], "Keras compile(jit_compile).")
common.define_torch_flags()
flags.DEFINE_bool("keras_hub", True, "Include keras-hub's BertTextClassifier.")
flags.DEFINE_integer("pipeline_batches", 16, "Batches of the dynamic-padding cycle (0 = skip).")
flags.DEFINE_integer("accuracy_steps", 0, "Steps of the bfloat16 dev-accuracy check (0 = skip).")
flags.DEFINE_bool("append", True, common.append_help(TOPIC))
flags.adopt_module_key_flags(common)  # --torch*, the shapes: listed by --help
flags.DEFINE_string("label", "", "Extra words for the appended section's title.")
common.bounds(
    repetitions=1,
    steps_per_round=1,
    batch_size=1,
    seq_length=2,
    pipeline_batches=0,
    accuracy_steps=0,
)

LR = 2e-5
DTYPES = {"float32": "float32", "bfloat16": "mixed_bfloat16"}  # short name -> Keras policy


def model(stack: str, dtype: str):
    """`stack` ("ours" or "keras-hub") as a two-class classifier on PRESET's weights (seed 0)
    under the dtype policy `dtype`, compiled as every contender here is: AdamW (lr LR, weight
    decay 0.01; ours as run_classifier.py's FusedAdamW), the --jit_compile choice, sparse
    cross-entropy on the logits."""
    import keras
    import keras_hub

    from keras_bert.tasks import TextClassifier
    from keras_bert.training import FusedAdamW

    keras.utils.set_random_seed(0)
    encoder = common.backbone(stack, dtype)
    optimizer = FusedAdamW if stack == "ours" else keras.optimizers.AdamW
    if stack == "ours":
        classifier = TextClassifier(encoder, num_classes=2)
    else:
        classifier = keras_hub.models.BertTextClassifier(
            encoder, num_classes=2, preprocessor=None, dtype=dtype
        )
    classifier.compile(
        optimizer=optimizer(learning_rate=LR, weight_decay=0.01, epsilon=1e-6),
        jit_compile={"auto": "auto", "true": True, "false": False}[FLAGS.jit_compile],
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return classifier


def keras_hub_table(eps: dict, measure: str) -> str:
    """The table of `eps` (contender -> examples/s, its column named `measure`) with each row's
    ratios to the keras-hub contender of the same dtype and to keras-hub float32."""
    hub = {"bfloat16" in k: v for k, v in reversed(eps.items()) if k.startswith("keras-hub")}
    rows = [
        (name, v, common.ratio(v, hub.get("bfloat16" in name)), common.ratio(v, hub.get(False)))
        for name, v in eps.items()
    ]
    headers = ["contender", measure, "vs keras-hub same dtype", "vs keras-hub float32"]
    return common.markdown_table(headers, rows)


def pipeline_comparison(data, labels):
    """(table, note): examples/s over one cycle of the first --pipeline_batches shuffled (seed 0)
    real batches, ours cut to each batch's longest row (rounded up to 8) against keras-hub
    padded to --seq_length."""
    b, n = FLAGS.batch_size, FLAGS.pipeline_batches
    order = np.random.default_rng(0).permutation(len(labels))[: n * b]
    padded, cut = [], []
    for i in range(n):
        idx = order[i * b : (i + 1) * b]
        full, y = {k: v[idx] for k, v in data.items()}, labels[idx].astype(np.int32)
        width = min(FLAGS.seq_length, -(-int(full["input_mask"].sum(1).max()) // 8) * 8)
        padded.append((common.keras_hub_inputs(full), y))
        cut.append(({k: v[:, :width] for k, v in full.items()}, y))
    widths = [x["input_word_ids"].shape[1] for x, _ in cut]
    contenders = {}
    for short, dtype in DTYPES.items():
        for stack, name, batches in (
            ("ours", f"ours {short}, dynamic padding", cut),
            ("keras-hub", f"keras-hub {short}, padded to {FLAGS.seq_length}", padded),
        ):
            if stack == "ours" or FLAGS.keras_hub:
                contenders[name] = lambda m=model(stack, dtype), bs=batches: [
                    m.train_on_batch(x, y) for x, y in bs
                ]
    eps = common.rates(contenders, n * b, max(2, FLAGS.repetitions // 2), warmup=1)
    note = (
        f"Real SST-2 train batches (seed 0 order); ours cut to widths {widths} "
        f"(mean {np.mean(widths):.1f} tokens), keras-hub padded to {FLAGS.seq_length}; one timed "
        f"unit = {n} train_on_batch steps."
    )
    return keras_hub_table(eps, f"examples/s ({n} real batches of {b})"), note


def accuracy_note(train, train_labels, steps: int, batch_size: int) -> str:
    """Fine-tunes ours `steps` steps in float32 and in bfloat16 (same order); dev accuracy."""
    dev_texts, dev_labels = common.sst2_sentences("dev")
    dev = common.featurize(dev_texts, FLAGS.seq_length)
    accuracy = {}
    for dtype in DTYPES.values():
        classifier = model("ours", dtype)
        start = time.perf_counter()
        for s in range(steps):
            idx = np.arange(s * batch_size, (s + 1) * batch_size) % len(train_labels)
            classifier.train_on_batch({k: v[idx] for k, v in train.items()}, train_labels[idx])
        seconds = time.perf_counter() - start
        logits = classifier.predict(dev, batch_size=128, verbose=0)
        accuracy[dtype] = float(np.mean(logits.argmax(1) == dev_labels))
        print(
            f"  {dtype}: dev accuracy {accuracy[dtype]:.4f} after {steps} steps ({seconds:.0f} s)"
        )
    return (
        f"Dev accuracy (SST-2 dev, {len(dev_labels)}) after {steps} steps of batch {batch_size} "
        f"(ours, same data order and seed, constant lr {LR}): float32 "
        f"{100 * accuracy['float32']:.2f}%, bfloat16 {100 * accuracy['mixed_bfloat16']:.2f}%."
    )


def main(argv):
    del argv
    common.set_threads_from_env()
    desc = common.machine_description(["torch", "transformers"])
    b, t = FLAGS.batch_size, FLAGS.seq_length
    texts, labels = common.sst2_sentences("train", max(b, FLAGS.accuracy_steps * b, 8000))
    data = common.featurize(texts, t)
    batch, y = {k: v[:b] for k, v in data.items()}, labels[:b].astype(np.int32)
    peer = common.start_peer("PyTorch", FLAGS.torch)
    contenders = {}
    for short, dtype in DTYPES.items():
        contenders[f"ours {short}"] = lambda m=model("ours", dtype): m.train_on_batch(batch, y)
        if FLAGS.keras_hub:
            hub_batch = common.keras_hub_inputs(batch)
            contenders[f"keras-hub {short}"] = lambda m=model("keras-hub", dtype), x=hub_batch: (
                m.train_on_batch(x, y)
            )
        for threads in (int(n) for n in FLAGS.torch_threads) if peer is not None else ():
            contenders[f"pytorch {short}{common.threads_label(threads)}"] = peer.add(
                "classifier",
                bf16=short == "bfloat16",
                lr=LR,
                threads=threads,
                ids=batch["input_word_ids"].tolist(),
                mask=batch["input_mask"].tolist(),
                labels=y.tolist(),
            )
    eps = common.rates(contenders, b, FLAGS.repetitions, inner=FLAGS.steps_per_round)
    common.close_all(peer)
    table = keras_hub_table(eps, f"examples/s (batch {b} x {t})")
    notes = [
        f"Keras compile(jit_compile={FLAGS.jit_compile!r}); AdamW lr {LR} (ours: FusedAdamW); "
        f"{FLAGS.repetitions} alternating rounds x {FLAGS.steps_per_round} steps on one fixed "
        "real SST-2 batch."
    ]
    if FLAGS.pipeline_batches:
        print("dynamic padding comparison ...", flush=True)
        pipe_table, pipe_note = pipeline_comparison(data, labels)
        table += "\n\n" + pipe_table
        notes.append(pipe_note)
    if FLAGS.accuracy_steps:
        print("accuracy check ...", flush=True)
        notes.append(accuracy_note(data, labels.astype(np.int32), FLAGS.accuracy_steps, b))
    title = "Fine-tuning throughput (bench_finetune)"
    common.report(TOPIC, title, table, desc, FLAGS.append, FLAGS.label, notes)


if __name__ == "__main__":
    cli.run(main)
