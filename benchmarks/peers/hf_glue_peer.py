"""The Hugging Face / PyTorch GLUE peer of `recipes/run_classifier.py` (SST-2 first), in the
torch venv, with a wall-clock training budget: transformers' run_glue.py semantics (README.md here:
the data it reads, the budget, what still differs from our recipe).

    taskset -c 1 <torch venv>/bin/python benchmarks/peers/hf_glue_peer.py --model_dir=$MODEL \
        --data_dir=$KERAS_BERT_DATA_DIR/glue/sst2 --max_seq_length=64 \
        --per_device_train_batch_size=32 --learning_rate=1e-4 --num_train_epochs=1 \
        --warmup_ratio=0.1 --weight_decay=0.01 --eval_steps=500 --max_train_seconds=1800 \
        --threads=1 --output_dir=OUT

Writes to --output_dir: `metrics.json` (each dev evaluation with its step and train seconds,
`best`, `final`, steps, train seconds, examples per second, whether the budget stopped training,
settings, versions) and `labels.json`. Progress: one line every --log_steps optimizer steps and
one per evaluation.
"""

from __future__ import annotations

import pathlib
import time

import numpy as np
import torch
import transformers

import hf_peer_common  # this folder's, beside the script (run as one)

# the last line of output: metrics.json at these keys
SUMMARY = (
    "best_accuracy final_accuracy steps train_seconds examples_per_second stopped_by_budget"
).split()
PROGRESS = (
    "step {step}/{max_steps} epoch {epoch:.3f} elapsed {elapsed:.1f}s loss {loss:.4f} "
    "lr {lr:.3e} {rate:.1f} examples/s"
)


def parse_args(argv=None):
    return hf_peer_common.parse_args(
        __doc__,
        argv,
        [
            ("data_dir", hf_peer_common.REQUIRED, "GLUE task dir with train.tsv and dev.tsv."),
            ("text_column", "sentence", "Header name of the first text."),
            ("text_b_column", str, "Header name of the second text (pair tasks)."),
            ("label_column", "label", "Header name of the label."),
            ("pad_to_multiple_of", 0, "Round batch lengths up to a multiple of this (0: no)."),
            ("group_by_length", False, "Batches of similar length (Trainer's group_by_length)."),
            ("max_train_seconds", 0.0, "Train seconds (evaluations excluded) to stop after."),
            ("adam_epsilon", 1e-8, "Trainer's default 1e-8 (ours 1e-6)."),
            ("eval_steps", 0, "Evaluate dev every K optimizer steps (0: only after training)."),
            ("log_steps", 50, "Optimizer steps per progress line."),
            hf_peer_common.MAX_STEPS,
        ],
        seq=128,
        eval_batch=8,
        epochs=3,
        nonnegative=("eval_steps", "pad_to_multiple_of", "threads", "max_train_seconds"),
    )


def read_tsv(path, columns, limit=None) -> tuple[list[dict], int]:
    """(rows as {column: str} of `columns`, the first `limit` or all; how many lines had a column
    count other than the header's) of a headed GLUE TSV, one row per physical line, `"` not a
    quote character. Exits when a column is missing from the header."""
    fileio = hf_peer_common.fileio
    lines = fileio.text_lines(fileio.read_user_text(str(path)))
    header = lines[0].rstrip("\r").split("\t")
    missing = [c for c in columns if c not in header]
    if missing:
        raise SystemExit(f"{path}: no column {missing} in header {header}")
    index = {c: header.index(c) for c in columns}
    rows, dropped = [], 0
    for line in lines[1:]:
        fields = line.rstrip("\r").split("\t")
        if len(fields) != len(header):
            dropped += 1
            continue
        rows.append({c: fields[i] for c, i in index.items()})
        if limit and len(rows) == limit:
            break
    return rows, dropped


def encode(tokenizer, rows, args, label_to_id, max_seq_length) -> list[dict]:
    """run_glue.py's `preprocess_function` (padding=False): one feature dict per row."""
    texts = [[r[args.text_column] for r in rows]]
    if args.text_b_column:
        texts.append([r[args.text_b_column] for r in rows])
    enc = tokenizer(*texts, padding=False, max_length=max_seq_length, truncation=True)
    return hf_peer_common.features(enc, [label_to_id[r[args.label_column]] for r in rows])


class Budget(transformers.TrainerCallback):
    """Stops training once --max_train_seconds of `clock` have passed; records evaluations."""

    def __init__(self, clock: hf_peer_common.TrainClock, max_seconds: float):
        self.clock, self.max_seconds = clock, max_seconds
        self.stopped_by_budget = False
        self.evaluations = []

    def on_step_end(self, args, state, control, **kwargs):
        if self.max_seconds and self.clock.seconds() >= self.max_seconds:
            if not control.should_training_stop:
                self.stopped_by_budget = True
                print(
                    f"budget: {self.clock.seconds():.1f}s >= {self.max_seconds:g}s at step "
                    f"{state.global_step}/{state.max_steps}; stopping",
                    flush=True,
                )
            control.should_training_stop = True
        return control

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        metrics = metrics or {}
        record = {
            "step": state.global_step,
            "train_seconds": round(self.clock.seconds(), 3),
            "accuracy": metrics.get("eval_accuracy"),
            "loss": metrics.get("eval_loss"),
            "eval_seconds": metrics.get("eval_runtime"),
        }
        self.evaluations.append(record)
        print(
            f"eval step {record['step']} train {record['train_seconds']:.1f}s accuracy "
            f"{record['accuracy']:.4f} ({record['eval_seconds']:.1f}s)",
            flush=True,
        )


def accuracy(prediction: transformers.EvalPrediction) -> dict:
    logits = (
        prediction.predictions[0]
        if isinstance(prediction.predictions, tuple)
        else prediction.predictions
    )
    return {"accuracy": float((np.argmax(logits, axis=-1) == prediction.label_ids).mean())}


def examples_trained(steps: int, batch_size: int, num_examples: int) -> int:
    """Examples fed in `steps` batches when each epoch ends with its partial batch."""
    per_epoch = -(-num_examples // batch_size)
    return steps // per_epoch * num_examples + min(steps % per_epoch * batch_size, num_examples)


def main(argv=None):
    args = parse_args(argv)
    out = hf_peer_common.start(args)
    data_dir = pathlib.Path(args.data_dir)
    columns = [c for c in (args.text_column, args.text_b_column, args.label_column) if c]
    full_train, train_dropped = read_tsv(data_dir / "train.tsv", columns)
    label_list = sorted({r[args.label_column] for r in full_train})  # run_glue.py: whole file
    train = full_train[: args.max_train_examples] if args.max_train_examples else full_train
    dev, dev_dropped = read_tsv(data_dir / "dev.tsv", columns, args.max_eval_examples)
    unknown = sorted({r[args.label_column] for r in dev} - set(label_list))
    if unknown:
        raise SystemExit(f"dev labels {unknown} not among the train labels {label_list}")
    tokenizer, model = hf_peer_common.load(
        args, transformers.AutoModelForSequenceClassification, num_labels=len(label_list)
    )
    label_to_id = hf_peer_common.set_labels(model, label_list, out)
    max_seq_length = min(args.max_seq_length, tokenizer.model_max_length)

    t0 = time.monotonic()
    train_features = encode(tokenizer, train, args, label_to_id, max_seq_length)
    dev_features = encode(tokenizer, dev, args, label_to_id, max_seq_length)
    encode_seconds = time.monotonic() - t0
    group = {"train_sampling_strategy": "group_by_length"} if args.group_by_length else {}
    trainer = hf_peer_common.trainer(
        args,
        out,
        model,
        PROGRESS,
        dict(
            adam_epsilon=args.adam_epsilon,
            max_steps=args.max_steps,
            eval_strategy="steps" if args.eval_steps else "no",
            eval_steps=args.eval_steps or None,
            logging_steps=args.log_steps,
            **group,
        ),
        train_dataset=train_features,
        eval_dataset=dev_features,
        processing_class=tokenizer,
        compute_metrics=accuracy,
        data_collator=transformers.DataCollatorWithPadding(
            tokenizer, pad_to_multiple_of=args.pad_to_multiple_of or None
        ),
    )
    budget = Budget(trainer.clock, args.max_train_seconds)
    trainer.add_callback(budget)
    print(
        f"{len(train)} train / {len(dev)} dev examples (dropped {train_dropped} / "
        f"{dev_dropped} malformed lines), labels {label_list}, max_seq_length "
        f"{max_seq_length}, torch threads {torch.get_num_threads()}, bf16 {args.bf16}",
        flush=True,
    )

    result, wall = hf_peer_common.train(trainer, args)
    steps = trainer.state.global_step
    if not budget.evaluations or budget.evaluations[-1]["step"] != steps:
        t0 = time.monotonic()
        trainer.evaluate()
        wall += time.monotonic() - t0
    train_seconds = trainer.clock.seconds()
    trained = examples_trained(steps, args.per_device_train_batch_size, len(train))
    accuracies = [e["accuracy"] for e in budget.evaluations]
    metrics = {
        "peer": "transformers run_glue.py semantics",
        "evaluations": budget.evaluations,
        "best": max(budget.evaluations, key=lambda e: e["accuracy"]),
        "final": budget.evaluations[-1],
        "best_accuracy": max(accuracies),
        "final_accuracy": accuracies[-1],
        "train_examples": len(train),
        "dev_examples": len(dev),
        "steps": steps,
        "scheduled_steps": trainer.state.max_steps,
        "stopped_by_budget": budget.stopped_by_budget,
        "train_seconds": train_seconds,
        "examples_trained": trained,
        "examples_per_second": trained / max(train_seconds, 1e-9),
        "wall_seconds_train_and_evaluations": wall,
        "encode_seconds": encode_seconds,
        "train_loss": result.training_loss,
        "settings": hf_peer_common.settings(args, trainer, max_seq_length_used=max_seq_length),
        "versions": hf_peer_common.versions(),
    }
    hf_peer_common.write_results(out, "metrics.json", metrics, SUMMARY)


if __name__ == "__main__":
    main()
