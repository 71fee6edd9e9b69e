"""Fine-tuning throughput (examples/s), ours vs keras-hub vs PyTorch.

Same data (the first SST-2 train sentences, tokenized once by our FullTokenizer with the
checkpoint's vocab, padded to --seq_length), same batch, same optimizer settings (AdamW, lr 2e-5,
weight decay 0.01; ours runs it as `FusedAdamW`, the fused-kernel AdamW of run_classifier.py,
`--ours_optimizer=keras` for Keras's own), same real starting weights (minilm_l6_h384_uncased):
- ours: `keras_bert.tasks.TextClassifier(from_pretrained(...), 2)`, `compile()` + `train_on_batch`;
- keras-hub: `BertTextClassifier(BertBackbone.from_preset(<same dir>), 2, preprocessor=None)`;
- PyTorch (optional): `transformers.BertForSequenceClassification`, `torch.optim.AdamW`,
  bfloat16 through `torch.autocast`, in its own process (benchmarks/peers/torch_peer.py).
Keras contenders compile with the same `jit_compile` (default "auto", which is XLA on the
TensorFlow backend, the setting a user gets by default). float32 and `mixed_bfloat16`.
Train steps alternate between contenders (--steps_per_round each), medians over rounds.

With --pipeline_batches=N > 0, a second comparison cycles through the first N shuffled batches of
SST-2 train: ours as `run_classifier.py` feeds them (dynamic padding: each batch cut to its
longest row rounded up to 8 tokens, `--pad_to_multiple_of`), keras-hub as its preprocessor feeds
them (every batch padded to --seq_length). Same examples, batch size, max length and optimizer;
one timed unit is the whole cycle of N steps.

With --accuracy_steps > 0, ours is also fine-tuned that many steps in float32 and in bfloat16
from the same weights, data order and seed, and evaluated on SST-2 dev (872 sentences).

    python -m benchmarks.bench_finetune [--repetitions=4] [--pipeline_batches=16] [--accuracy_steps=150] [--notorch]
"""

import time

import numpy as np
from absl import app, flags

from benchmarks import common

TOPIC = "fine-tuning"
FLAGS = flags.FLAGS
flags.DEFINE_integer("repetitions", 4, "Alternating rounds.")
flags.DEFINE_integer("steps_per_round", 2, "Timed train steps per contender per round.")
flags.DEFINE_integer("batch_size", 32, "Examples per step.")
flags.DEFINE_integer("seq_length", 64, "Tokens per example (SST-2 sentences fit in 64).")
flags.DEFINE_enum("jit_compile", "auto", ["auto", "true", "false"], "Keras compile(jit_compile).")
flags.DEFINE_enum(
    "ours_optimizer",
    "fused",
    ["fused", "keras"],
    "Ours trains with FusedAdamW "
    "(what run_classifier.py uses) or with keras.optimizers.AdamW like the peers.",
)
common.define_torch_flags()
flags.DEFINE_bool("keras_hub", True, "Include keras-hub's BertTextClassifier.")
flags.DEFINE_integer(
    "pipeline_batches", 16, "Batches per cycle of the dynamic-padding comparison (0 = skip)."
)
flags.DEFINE_integer(
    "accuracy_steps", 0, "Steps of the float32 vs bfloat16 dev-accuracy check (0 = skip)."
)
flags.DEFINE_bool("append", True, common.append_help(TOPIC))
flags.DEFINE_string("label", "", "Extra words for the appended section's title.")

LR = 2e-5


featurize = common.featurize  # also used by tools/device_check.py


def _jit():
    return {"auto": "auto", "true": True, "false": False}[FLAGS.jit_compile]


def _keras_optimizer():
    import keras

    return keras.optimizers.AdamW(learning_rate=LR, weight_decay=0.01, epsilon=1e-6)


def _ours_optimizer():
    """The optimizer run_classifier.py uses, with the peers' hyperparameters: `FusedAdamW`
    (Keras AdamW's update through TensorFlow's fused Adam kernel), or Keras AdamW itself with
    --ours_optimizer=keras (the before/after of the fused step)."""
    if FLAGS.ours_optimizer == "keras":
        return _keras_optimizer()
    from keras_bert.training import FusedAdamW

    return FusedAdamW(learning_rate=LR, weight_decay=0.01, epsilon=1e-6)


def _compiled(model, optimizer):
    """`model` compiled as every contender here is: `optimizer`, the --jit_compile choice and
    sparse cross-entropy on the logits of the two classes."""
    import keras

    model.compile(
        optimizer=optimizer,
        jit_compile=_jit(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def ours_model(dtype):
    import keras

    import keras_bert
    from keras_bert.tasks import TextClassifier

    keras.utils.set_random_seed(0)
    model = TextClassifier(keras_bert.from_pretrained(common.PRESET, dtype=dtype), num_classes=2)
    return _compiled(model, _ours_optimizer())


def keras_hub_model(dtype):
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone.from_preset(str(common.model_dir()), dtype=dtype)
    model = keras_hub.models.BertTextClassifier(
        backbone, num_classes=2, preprocessor=None, dtype=dtype
    )
    return _compiled(model, _keras_optimizer())


def real_batches(data, labels, n_batches, batch_size, multiple=8):
    """The first n_batches shuffled (seed 0) batches: (padded to seq_length, cut to longest row)."""
    order = np.random.default_rng(0).permutation(len(labels))[: n_batches * batch_size]
    padded, cut = [], []
    for i in range(n_batches):
        idx = order[i * batch_size : (i + 1) * batch_size]
        full = {k: v[idx] for k, v in data.items()}
        longest = int(full["input_mask"].sum(1).max())
        width = min(full["input_mask"].shape[1], -(-longest // multiple) * multiple)
        y = labels[idx].astype(np.int32)
        padded.append((full, y))
        cut.append(({k: v[:, :width] for k, v in full.items()}, y))
    return padded, cut


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
    """Examples/s over one cycle of real batches: ours dynamic padding vs keras-hub fixed padding."""
    b, n = FLAGS.batch_size, FLAGS.pipeline_batches
    padded, cut = real_batches(data, labels, n, b)
    widths = [x["input_word_ids"].shape[1] for x, _ in cut]
    contenders = {}
    for dtype in ("float32", "mixed_bfloat16"):
        short = "float32" if dtype == "float32" else "bfloat16"
        ours = ours_model(dtype)
        contenders[f"ours {short}, dynamic padding"] = lambda m=ours: [
            m.train_on_batch(x, y) for x, y in cut
        ]
        if FLAGS.keras_hub:
            hub = keras_hub_model(dtype)
            hub_batches = [(common.keras_hub_inputs(x), y) for x, y in padded]
            contenders[f"keras-hub {short}, padded to {FLAGS.seq_length}"] = (
                lambda m=hub, bs=hub_batches: [m.train_on_batch(x, y) for x, y in bs]
            )
    times = common.alternate(contenders, max(2, FLAGS.repetitions // 2), warmup=1)
    eps = {name: n * b / common.median(ts) for name, ts in times.items()}
    table = keras_hub_table(eps, f"examples/s ({n} real batches of {b})")
    note = (
        f"Real SST-2 train batches (seed 0 order); ours cut to widths {widths} "
        f"(mean {np.mean(widths):.1f} tokens), keras-hub padded to {FLAGS.seq_length}; one timed "
        f"unit = {n} train_on_batch steps."
    )
    return table, note


def accuracy_check(train, train_labels, dev, dev_labels, steps, batch_size):
    """Fine-tunes ours `steps` steps in float32 and in bfloat16 (same order); dev accuracy."""
    results = {}
    for dtype in ("float32", "mixed_bfloat16"):
        model = ours_model(dtype)
        start = time.perf_counter()
        n = len(train_labels)
        for s in range(steps):
            idx = np.arange(s * batch_size, (s + 1) * batch_size) % n
            model.train_on_batch({k: v[idx] for k, v in train.items()}, train_labels[idx])
        seconds = time.perf_counter() - start
        logits = model.predict(dev, batch_size=128, verbose=0)
        results[dtype] = (float(np.mean(logits.argmax(1) == dev_labels)), seconds)
        print(
            f"  {dtype}: dev accuracy {results[dtype][0]:.4f} after {steps} steps "
            f"({seconds:.0f} s)",
            flush=True,
        )
    return results


def main(argv):
    del argv
    common.set_threads_from_env()
    desc = common.machine_description(["torch", "transformers"])
    b, t = FLAGS.batch_size, FLAGS.seq_length
    texts, labels = common.sst2_sentences("train", max(b, FLAGS.accuracy_steps * b, 8000))
    data = featurize(texts, t)
    batch = {k: v[:b] for k, v in data.items()}
    y = labels[:b].astype(np.int32)

    peer = common.TorchPeer() if FLAGS.torch and common.torch_or_none() else None
    contenders = {}
    for dtype in ("float32", "mixed_bfloat16"):
        short = "float32" if dtype == "float32" else "bfloat16"
        model = ours_model(dtype)
        contenders[f"ours {short}"] = lambda m=model: m.train_on_batch(batch, y)
        if FLAGS.keras_hub:
            hub = keras_hub_model(dtype)
            hub_batch = common.keras_hub_inputs(batch)
            contenders[f"keras-hub {short}"] = lambda m=hub, x=hub_batch: m.train_on_batch(x, y)
        for threads in (int(n) for n in FLAGS.torch_threads) if peer is not None else ():
            name = f"pytorch {short}{common.threads_label(threads)}"
            contenders[name] = peer.add(
                "classifier",
                bf16=short == "bfloat16",
                lr=LR,
                threads=threads,
                ids=batch["input_word_ids"].tolist(),
                mask=batch["input_mask"].tolist(),
                labels=y.tolist(),
            )
    times = common.alternate(contenders, FLAGS.repetitions, warmup=2, inner=FLAGS.steps_per_round)
    if peer is not None:
        peer.close()
    eps = {name: b / common.median(ts) for name, ts in times.items()}

    table = keras_hub_table(eps, f"examples/s (batch {b} x {t})")
    opt_name = "FusedAdamW" if FLAGS.ours_optimizer == "fused" else "keras AdamW"
    notes = [
        (
            f"Keras compile(jit_compile={FLAGS.jit_compile!r}); AdamW lr {LR} (ours: {opt_name}, "
            "the same update through TensorFlow's fused Adam kernel; keras-hub: keras AdamW); "
            f"{FLAGS.repetitions} alternating rounds x {FLAGS.steps_per_round} steps; "
            "train_on_batch on one fixed real SST-2 batch (no input pipeline in the timing)."
        )
    ]
    if FLAGS.pipeline_batches:
        print("dynamic padding comparison ...", flush=True)
        pipe_table, pipe_note = pipeline_comparison(data, labels)
        table += "\n\n" + pipe_table
        notes.append(pipe_note)
    if FLAGS.accuracy_steps:
        print("accuracy check ...", flush=True)
        dev_texts, dev_labels = common.sst2_sentences("dev")
        acc = accuracy_check(
            data,
            labels.astype(np.int32),
            featurize(dev_texts, t),
            dev_labels,
            FLAGS.accuracy_steps,
            b,
        )
        notes.append(
            f"Dev accuracy (SST-2 dev, 872) after {FLAGS.accuracy_steps} steps of batch {b} "
            f"(ours, same data order and seed, constant lr {LR}): float32 "
            f"{100 * acc['float32'][0]:.2f}%, bfloat16 {100 * acc['mixed_bfloat16'][0]:.2f}%."
        )
    common.report(
        TOPIC,
        "Fine-tuning throughput (bench_finetune)",
        table,
        desc,
        FLAGS.append,
        FLAGS.label,
        notes,
    )


if __name__ == "__main__":
    app.run(main)
