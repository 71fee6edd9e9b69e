"""The Hugging Face / PyTorch peers of our fine-tuning recipes, in the torch venv: GLUE
(`recipes/run_classifier.py`; run_glue.py semantics, with a wall-clock budget), CoNLL-2003 NER
(`recipes/run_ner.py`; run_ner.py) and SQuAD (`recipes/run_squad.py`; run_qa.py), each trained by
a `Trainer` built alike, never importing TensorFlow or keras_bert. Methods, settings, what each
writes to --output_dir and what differs from our recipes: README.md here. Run by the scripts
beside it, which import this file as a sibling module; data and scoring from ner_peer_data.py and
squad_peer_data.py (project venv):

    taskset -c 1 <torch venv>/bin/python benchmarks/peers/hf_glue_peer.py --model_dir=$MODEL \
        --data_dir=$KERAS_BERT_DATA_DIR/glue/sst2 --max_seq_length=64 \
        --per_device_train_batch_size=32 --learning_rate=1e-4 --num_train_epochs=1 \
        --warmup_ratio=0.1 --weight_decay=0.01 --eval_steps=500 --max_train_seconds=1800 \
        --threads=1 --output_dir=OUT
    taskset -c 1 <torch venv>/bin/python benchmarks/peers/hf_ner_peer.py --model_dir=$MODEL \
        --train_file=D/train.json --validation_file=D/valid.json --test_file=D/test.json \
        --max_seq_length=128 --per_device_train_batch_size=32 --learning_rate=5e-5 \
        --num_train_epochs=3 --bf16 --threads=1 --output_dir=OUT
    taskset -c 1 <torch venv>/bin/python benchmarks/peers/hf_squad_peer.py --model_dir=CKPT \
        --train_file=runs/squad_peer/data/train.json \
        --validation_file=runs/squad_peer/data/heldout.json --learning_rate=1e-4 \
        --num_train_epochs=1 --warmup_ratio=0.1 --bf16 --threads=1 --output_dir=runs/squad_peer/v1
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import math
import pathlib
import platform
import time

import numpy as np
import torch
import transformers


# keras_bert/fileio.py loaded alone (standard library only; the keras_bert package loads Keras)
_FILEIO = pathlib.Path(__file__).resolve().parents[2] / "keras_bert" / "fileio.py"
_SPEC = importlib.util.spec_from_file_location("keras_bert_fileio_for_peers", _FILEIO)
fileio = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fileio)
REQUIRED = "required"  # a flag's default in `add_flags`: the flag must be given
MAX_STEPS = ("max_steps", -1, "Optimizer steps to schedule and train (-1: the epochs say).")


def add_flags(parser, flags) -> None:
    """Adds `flags`, each (name, default, help): a default of False is a switch, REQUIRED a
    required string, a type (int, float, str) an optional flag of that type without default, any
    other value the default of a flag of its type."""
    for name, default, text in flags:
        if default is False:
            parser.add_argument(f"--{name}", action="store_true", help=text)
        elif default is REQUIRED:
            parser.add_argument(f"--{name}", required=True, help=text)
        elif isinstance(default, type):
            parser.add_argument(f"--{name}", type=default, help=text)
        else:
            parser.add_argument(f"--{name}", type=type(default), default=default, help=text)


def parse_args(description, argv, flags, *, seq, eval_batch, epochs, threads=0, nonnegative=()):
    """The flags every peer takes (transformers' example scripts' names, with the defaults of the
    script it follows: `seq`, `eval_batch`, `epochs`, `threads`), then the peer's own `flags`.
    Exits through `parser.error` unless --warmup_ratio is in [0, 1) and each of `nonnegative` is
    >= 0."""
    parser = argparse.ArgumentParser(description=description)
    examples = "(file order; score with the same N)"
    add_flags(
        parser,
        [
            ("model_dir", REQUIRED, "HF checkpoint dir (config.json, weights, tokenizer files)."),
            ("output_dir", REQUIRED, "Where the results go."),
            ("max_seq_length", seq, "Pieces incl. [CLS]/[SEP]."),
            ("per_device_train_batch_size", 32, None),
            ("per_device_eval_batch_size", eval_batch, None),
            ("learning_rate", 5e-5, None),
            ("num_train_epochs", float(epochs), None),
            ("weight_decay", 0.0, "AdamW decoupled weight decay (Trainer's 0, our recipes' 0.01)."),
            ("warmup_ratio", 0.0, "Fraction of the scheduled steps, [0, 1) (Trainer's 0)."),
            ("seed", 42, None),
            ("bf16", False, "CPU autocast bfloat16, training and prediction (default float32)."),
            ("threads", threads, "torch intra-op threads (torch.set_num_threads; 0: default)."),
            ("max_train_examples", int, f"Only the first N training examples {examples}."),
            ("max_eval_examples", int, f"Only the first N examples to predict {examples}."),
            *flags,
        ],
    )
    args = parser.parse_args(argv)
    if not 0 <= args.warmup_ratio < 1:
        parser.error(f"--warmup_ratio must be in [0, 1), got {args.warmup_ratio}")
    for name in nonnegative:
        if getattr(args, name) < 0:
            parser.error(f"--{name} must be >= 0, got {getattr(args, name)}")
    return args


def start(args, interop_threads: int = 0) -> pathlib.Path:
    """Sets the torch threads (--threads unless 0, `interop_threads` unless 0), progress bars off
    and the seed; returns --output_dir, made."""
    if args.threads:
        torch.set_num_threads(args.threads)
    if interop_threads:
        torch.set_num_interop_threads(interop_threads)
    out = pathlib.Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    transformers.utils.logging.disable_progress_bar()  # no carriage-return bars in logs
    transformers.set_seed(args.seed)
    return out


def load(args, model_class, **config):
    """(fast tokenizer, `model_class` model) of --model_dir, its config read with `config`."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model_dir, use_fast=True)
    config = transformers.AutoConfig.from_pretrained(args.model_dir, **config)
    return tokenizer, model_class.from_pretrained(args.model_dir, config=config)


def first(rows: list, n) -> list:
    """The first `n` of `rows` (file order), or all of them when `n` is not set."""
    return rows[:n] if n else rows


def features(enc, labels) -> list[dict]:
    """One feature dict per row of the tokenizer's output `enc`, with that row's `labels`."""
    return [
        {k: enc[k][i] for k in enc.keys()} | {"labels": label} for i, label in enumerate(labels)
    ]


def set_labels(model, label_list: list[str], out: pathlib.Path) -> dict:
    """Names the model's classes `label_list` in that order, writes them to `out`/labels.json;
    returns label -> class id."""
    label_to_id = {label: i for i, label in enumerate(label_list)}
    model.config.label2id = dict(label_to_id)
    model.config.id2label = dict(enumerate(label_list))
    fileio.write_json(str(out / "labels.json"), label_list, indent=None)
    return label_to_id


class TrainClock(transformers.TrainerCallback):
    """Seconds of training since `on_train_begin` with paused intervals (evaluations) taken out,
    stopped at `on_train_end`."""

    def __init__(self):
        self.begin = self.paused_at = self.ended_at = None
        self.excluded = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.begin, self.excluded, self.paused_at, self.ended_at = time.monotonic(), 0.0, None, None

    def on_train_end(self, args, state, control, **kwargs):
        self.resume()
        if self.begin is not None and self.ended_at is None:
            self.ended_at = time.monotonic()

    def pause(self):
        if self.begin is not None and self.ended_at is None and self.paused_at is None:
            self.paused_at = time.monotonic()

    def resume(self):
        if self.paused_at is not None:
            self.excluded += time.monotonic() - self.paused_at
            self.paused_at = None

    def seconds(self) -> float:
        if self.begin is None:
            return 0.0
        now = self.ended_at or self.paused_at or time.monotonic()
        return now - self.begin - self.excluded


class ProgressLines(transformers.TrainerCallback):
    """One plain line per logging step with a loss: `template` formatted with step, max_steps,
    epoch, loss, lr, elapsed (train clock seconds) and rate (examples per second so far)."""

    def __init__(self, clock: TrainClock, batch_size: int, template: str):
        self.clock, self.batch_size, self.template = clock, batch_size, template

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "loss" not in logs:  # the end-of-training summary
            return
        elapsed = self.clock.seconds()
        line = self.template.format(
            step=state.global_step,
            max_steps=state.max_steps,
            epoch=state.epoch,
            loss=logs["loss"],
            lr=logs.get("learning_rate", float("nan")),
            elapsed=elapsed,
            rate=state.global_step * self.batch_size / max(elapsed, 1e-9),
        )
        print(line, flush=True)


class PeerTrainer(transformers.Trainer):
    """Trainer whose `evaluate` pauses its train clock (evaluation time is not training time)."""

    def __init__(self, *a, clock: TrainClock, **kw):
        super().__init__(*a, **kw)
        self.clock = clock

    def evaluate(self, *a, **kw):
        self.clock.pause()
        try:
            return super().evaluate(*a, **kw)
        finally:
            self.clock.resume()


def build_trainer(args, out, model, progress: str, settings: dict, **kwargs) -> PeerTrainer:
    """The peer's `PeerTrainer` of `model`: `training_arguments(args, out, **settings)`, `kwargs`
    (datasets, collator, ...), its `TrainClock` as `.clock` and `ProgressLines(progress)` in
    place of Trainer's PrinterCallback."""
    clock = TrainClock()
    run = PeerTrainer(
        model=model, args=training_arguments(args, out, **settings), clock=clock, **kwargs
    )
    run.remove_callback(transformers.trainer_callback.PrinterCallback)
    run.add_callback(clock)
    run.add_callback(ProgressLines(clock, args.per_device_train_batch_size, progress))
    return run


def run_training(run: PeerTrainer, args):
    """(`run.train()`'s result, its wall seconds), with --threads set again first (setup may
    change torch's thread count)."""
    if args.threads:
        torch.set_num_threads(args.threads)
    begin = time.monotonic()
    result = run.train()
    return result, time.monotonic() - begin


def training_arguments(args, output_dir: pathlib.Path, **specific):
    """`transformers.TrainingArguments` of a peer run (README.md), `--warmup_ratio` as
    `warmup_steps` (a value below 1 is a fraction of the steps); `specific`: the peer's own."""
    return transformers.TrainingArguments(
        output_dir=str(output_dir / "trainer"),
        use_cpu=True,
        bf16=args.bf16,
        seed=args.seed,
        per_device_train_batch_size=args.per_device_train_batch_size,
        per_device_eval_batch_size=args.per_device_eval_batch_size,
        learning_rate=args.learning_rate,
        weight_decay=args.weight_decay,
        num_train_epochs=args.num_train_epochs,
        warmup_steps=args.warmup_ratio,
        max_grad_norm=1.0,
        lr_scheduler_type="linear",
        save_strategy="no",
        logging_strategy="steps",
        disable_tqdm=True,
        report_to="none",
        dataloader_num_workers=0,
        **specific,
    )


def optimizer_name(run: PeerTrainer) -> str:
    """The name of the optimizer Trainer built (`TrainingArguments.optim`)."""
    return str(getattr(run.args.optim, "value", run.args.optim))


def settings(args, run: PeerTrainer, **extra) -> dict:
    """The "settings" of a peer's results: its flags, the optimizer, warmup steps, torch threads
    and mixed precision Trainer used, and `extra`."""
    return vars(args) | {
        "optim": optimizer_name(run),
        "warmup_steps": run.args.get_warmup_steps(run.state.max_steps),
        "torch_threads": torch.get_num_threads(),
        "mixed_precision": str(run.accelerator.mixed_precision),
        **extra,
    }


def versions() -> dict:
    """The "versions" of a peer's results: torch, transformers, Python."""
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }


def write_results(out: pathlib.Path, name: str, results: dict, summary=None) -> None:
    """Writes `results` to `out`/`name` (JSON, whole or not at all), then prints them: at the
    keys `summary` on one line, or all of them indented (sorted keys) without `summary`."""
    fileio.write_json(str(out / name), results)
    if summary:
        print(json.dumps({k: results[k] for k in summary}), flush=True)
    else:
        print(json.dumps(results, indent=2, sort_keys=True), flush=True)


# GLUE (run_glue.py). The last line of output: metrics.json at these keys
GLUE_SUMMARY = (
    "best_accuracy final_accuracy steps train_seconds examples_per_second stopped_by_budget"
).split()
GLUE_PROGRESS = (
    "step {step}/{max_steps} epoch {epoch:.3f} elapsed {elapsed:.1f}s loss {loss:.4f} "
    "lr {lr:.3e} {rate:.1f} examples/s"
)


def glue_args(argv=None):
    return parse_args(
        "The Hugging Face / PyTorch GLUE peer of `recipes/run_classifier.py`.",
        argv,
        [
            ("data_dir", REQUIRED, "GLUE task dir with train.tsv and dev.tsv."),
            ("text_column", "sentence", "Header name of the first text."),
            ("text_b_column", str, "Header name of the second text (pair tasks)."),
            ("label_column", "label", "Header name of the label."),
            ("pad_to_multiple_of", 0, "Round batch lengths up to a multiple of this (0: no)."),
            ("group_by_length", False, "Batches of similar length (Trainer's group_by_length)."),
            ("max_train_seconds", 0.0, "Train seconds (evaluations excluded) to stop after."),
            ("adam_epsilon", 1e-8, "Trainer's default 1e-8 (ours 1e-6)."),
            ("eval_steps", 0, "Evaluate dev every K optimizer steps (0: only after training)."),
            ("log_steps", 50, "Optimizer steps per progress line."),
            MAX_STEPS,
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


def glue_encode(tokenizer, rows, args, label_to_id, max_seq_length) -> list[dict]:
    """run_glue.py's `preprocess_function` (padding=False): one feature dict per row."""
    texts = [[r[args.text_column] for r in rows]]
    if args.text_b_column:
        texts.append([r[args.text_b_column] for r in rows])
    enc = tokenizer(*texts, padding=False, max_length=max_seq_length, truncation=True)
    return features(enc, [label_to_id[r[args.label_column]] for r in rows])


class Budget(transformers.TrainerCallback):
    """Stops training once --max_train_seconds of `clock` have passed; records evaluations."""

    def __init__(self, clock: TrainClock, max_seconds: float):
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


def glue(argv=None):
    args = glue_args(argv)
    out = start(args)
    data_dir = pathlib.Path(args.data_dir)
    columns = [c for c in (args.text_column, args.text_b_column, args.label_column) if c]
    full_train, train_dropped = read_tsv(data_dir / "train.tsv", columns)
    label_list = sorted({r[args.label_column] for r in full_train})  # run_glue.py: whole file
    train = first(full_train, args.max_train_examples)
    dev, dev_dropped = read_tsv(data_dir / "dev.tsv", columns, args.max_eval_examples)
    unknown = sorted({r[args.label_column] for r in dev} - set(label_list))
    if unknown:
        raise SystemExit(f"dev labels {unknown} not among the train labels {label_list}")
    tokenizer, model = load(
        args, transformers.AutoModelForSequenceClassification, num_labels=len(label_list)
    )
    label_to_id = set_labels(model, label_list, out)
    max_seq_length = min(args.max_seq_length, tokenizer.model_max_length)

    t0 = time.monotonic()
    train_features = glue_encode(tokenizer, train, args, label_to_id, max_seq_length)
    dev_features = glue_encode(tokenizer, dev, args, label_to_id, max_seq_length)
    encode_seconds = time.monotonic() - t0
    group = {"train_sampling_strategy": "group_by_length"} if args.group_by_length else {}
    trainer = build_trainer(
        args,
        out,
        model,
        GLUE_PROGRESS,
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

    result, wall = run_training(trainer, args)
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
        "settings": settings(args, trainer, max_seq_length_used=max_seq_length),
        "versions": versions(),
    }
    write_results(out, "metrics.json", metrics, GLUE_SUMMARY)


# CoNLL-2003 NER (run_ner.py)
IGNORE_LABEL = -100
OUTSIDE = "O"


def ner_args(argv=None):
    return parse_args(
        "The Hugging Face / PyTorch peer of `recipes/run_ner.py` (CoNLL-2003 NER).",
        argv,
        [
            ("train_file", REQUIRED, "JSON lines {tokens, ner_tags}."),
            ("validation_file", str, "JSON lines; predicted after training."),
            ("test_file", str, "JSON lines; predicted after training."),
            ("log_steps", 50, "Optimizer steps per progress line."),
            ("save_model", False, "Save the trained model."),
        ],
        seq=128,
        eval_batch=8,
        epochs=3,
        threads=1,
    )


def get_label_list(sentences) -> list[str]:
    """run_ner.py's `get_label_list`: the sorted set of tags (labels not a ClassLabel)."""
    return sorted({tag for s in sentences for tag in s["ner_tags"]})


def tokenize_and_align_labels(tokenizer, sentences, label_to_id, max_seq_length):
    """run_ner.py's `tokenize_and_align_labels` (label_all_tokens off, no padding): (one feature
    dict per sentence, labels the word's tag id at its first piece and -100 elsewhere; per
    sentence the tokenizer's word index of each position, None at special tokens)."""
    enc = tokenizer(
        [s["tokens"] for s in sentences],
        padding=False,
        truncation=True,
        max_length=max_seq_length,
        is_split_into_words=True,
    )
    word_ids = [enc.word_ids(batch_index=i) for i in range(len(sentences))]
    labels = []
    for ids, sentence in zip(word_ids, sentences):
        row = [IGNORE_LABEL] * len(ids)
        for position, word in first_pieces(ids):
            row[position] = label_to_id[sentence["ner_tags"][word]]
        labels.append(row)
    return features(enc, labels), word_ids


def first_pieces(word_ids):
    """(position, word) of each word's first piece, from a row's tokenizer word ids (None at
    special tokens)."""
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word != previous:
            yield position, word
        previous = word


def words_to_tags(logits, word_ids, num_words, label_list) -> tuple[list[str], int]:
    """(one tag per word: the argmax of `logits` [T' >= len(word_ids), labels] at the word's
    first piece, "O" for a word with no piece; how many words had no piece)."""
    ids = np.argmax(logits[: len(word_ids)], axis=-1)
    tags = [None] * num_words
    for position, word in first_pieces(word_ids):
        tags[word] = label_list[int(ids[position])]
    cut = sum(t is None for t in tags)
    return [OUTSIDE if t is None else t for t in tags], cut


def predict_split(trainer, tokenizer, sentences, label_to_id, label_list, max_seq_length):
    """Tags for every word of `sentences` -> (records for predictions_<split>.json, info)."""
    features, word_ids = tokenize_and_align_labels(
        tokenizer, sentences, label_to_id, max_seq_length
    )
    start = time.monotonic()
    logits = trainer.predict(features, metric_key_prefix="predict").predictions
    seconds = time.monotonic() - start
    records, cut_total = [], 0
    for row, ids, sentence in zip(logits, word_ids, sentences):
        tags, cut = words_to_tags(row, ids, len(sentence["tokens"]), label_list)
        cut_total += cut
        records.append({"tokens": sentence["tokens"], "pred_tags": tags, "cut_words": cut})
    return records, {
        "sentences": len(sentences),
        "words": sum(len(s["tokens"]) for s in sentences),
        "cut_words": cut_total,
        "predict_seconds": seconds,
        "truncated_sentences": sum(len(f["input_ids"]) == max_seq_length for f in features),
    }


def ner(argv=None):
    args = ner_args(argv)
    out = start(args, interop_threads=1)
    full_train = fileio.read_jsonl(str(args.train_file))
    label_list = get_label_list(full_train)  # from the whole train file, as run_ner.py does
    train = first(full_train, args.max_train_examples)
    evals = {
        name: first(fileio.read_jsonl(str(path)), args.max_eval_examples)
        for name, path in (("valid", args.validation_file), ("test", args.test_file))
        if path
    }
    tokenizer, model = load(
        args,
        transformers.AutoModelForTokenClassification,
        num_labels=len(label_list),
        finetuning_task="ner",
    )
    if not getattr(tokenizer, "is_fast", False):
        raise SystemExit(f"{args.model_dir}: no fast tokenizer (word_ids needs one)")
    config_class = getattr(transformers, "PreTrainedConfig", None) or transformers.PretrainedConfig
    default = config_class(num_labels=len(label_list)).label2id
    if model.config.label2id != default and sorted(model.config.label2id) == label_list:
        label_list = [model.config.id2label[i] for i in range(len(label_list))]
    label_to_id = set_labels(model, label_list, out)

    train_features, _ = tokenize_and_align_labels(
        tokenizer, train, label_to_id, args.max_seq_length
    )
    trainer = build_trainer(
        args,
        out,
        model,
        "step {step}/{max_steps} epoch {epoch:.3f} loss {loss:.4f} lr {lr:.3e} "
        "elapsed {elapsed:.1f}s {rate:.2f} sentences/s",
        dict(eval_strategy="no", logging_steps=args.log_steps),
        train_dataset=train_features,
        processing_class=tokenizer,
        data_collator=transformers.DataCollatorForTokenClassification(tokenizer),
    )
    seen_dtype = {}  # the classifier's output dtype in training: bfloat16 under --bf16's autocast

    def record_dtype(module, inputs, output):  # returns None: the output is left as it is
        seen_dtype.setdefault("dtype", str(output.dtype))

    hook = model.classifier.register_forward_hook(record_dtype)
    print(
        f"{len(train)} training sentences, labels {label_list}, torch threads "
        f"{torch.get_num_threads()}, bf16 {args.bf16}",
        flush=True,
    )
    result, train_seconds = run_training(trainer, args)
    hook.remove()
    if args.save_model:
        trainer.save_model(str(out / "model"))

    predictions = {}
    for name, sentences in evals.items():
        records, info = predict_split(
            trainer, tokenizer, sentences, label_to_id, label_list, args.max_seq_length
        )
        fileio.write_jsonl(str(out / f"predictions_{name}.json"), records)
        predictions[name] = info
        print(f"{name}: {json.dumps(info)}", flush=True)

    timing = {
        "train_seconds": train_seconds,
        "train_sentences": len(train),
        "num_train_epochs": args.num_train_epochs,
        "sentences_per_second": len(train) * args.num_train_epochs / train_seconds,
        "steps": trainer.state.global_step,
        "train_truncated_sentences": sum(
            len(f["input_ids"]) == args.max_seq_length for f in train_features
        ),
        "trainer_metrics": result.metrics,
        "predict": predictions,
        "settings": settings(args, trainer, classifier_output_dtype=seen_dtype.get("dtype")),
        "versions": versions(),
    }
    summary = ("train_seconds", "train_sentences", "sentences_per_second", "steps")
    write_results(out, "peer_timing.json", timing, summary)


# SQuAD (run_qa.py). The flags peer_metrics.json records under their own names
RECORDED_FLAGS = (
    "bf16 max_seq_length doc_stride learning_rate num_train_epochs warmup_ratio weight_decay seed "
    "version_2_with_negative"
).split()


def squad_args(argv=None):
    return parse_args(
        "The Hugging Face / PyTorch SQuAD peer of `recipes/run_squad.py`.",
        argv,
        [
            ("train_file", str, "Flat SQuAD JSON (squad_peer_data train.json)."),
            ("validation_file", str, "Flat SQuAD JSON to predict (heldout.json)."),
            ("doc_stride", 128, "Tokens of overlap between a context's windows."),
            ("version_2_with_negative", False, None),
            ("null_score_diff_threshold", 0.0, None),
            ("n_best_size", 20, None),
            ("max_answer_length", 30, None),
            ("logging_steps", 10, "One progress line per N steps."),
            MAX_STEPS,
        ],
        seq=384,
        eval_batch=32,
        epochs=1,
    )


def read_flat(path, limit=None) -> list[dict]:
    """Records of a flat SQuAD JSON (`{"data": [{"id", "context", "question", "answers"}]}`)."""
    records = fileio.read_json(str(path))["data"]
    return records[:limit]


def squad_tokenize(tokenizer, records, args):
    """run_qa.py's tokenizer call: question first, only the context truncated into windows."""
    return tokenizer(
        [r["question"].lstrip() for r in records],
        [r["context"] for r in records],
        truncation="only_second",
        max_length=args.max_seq_length,
        stride=args.doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length",
    )


def squad_train_features(tokenizer, records, args) -> dict:
    """Windows with start/end labels (run_qa.py `prepare_train_features`)."""
    enc = squad_tokenize(tokenizer, records, args)
    starts, ends = [], []
    for i, offsets in enumerate(enc["offset_mapping"]):
        ids = enc["input_ids"][i]
        cls = ids.index(tokenizer.cls_token_id) if tokenizer.cls_token_id in ids else 0
        seq = enc.sequence_ids(i)
        answers = records[enc["overflow_to_sample_mapping"][i]]["answers"]
        if not answers["answer_start"]:
            starts.append(cls)
            ends.append(cls)
            continue
        start_char = answers["answer_start"][0]
        end_char = start_char + len(answers["text"][0])
        first = seq.index(1)  # first and last context token of the window
        last = len(seq) - 1 - seq[::-1].index(1)
        if not (offsets[first][0] <= start_char and offsets[last][1] >= end_char):
            starts.append(cls)
            ends.append(cls)
            continue
        s = first
        while s < len(offsets) and offsets[s][0] <= start_char:
            s += 1
        e = last
        while offsets[e][1] >= end_char:
            e -= 1
        starts.append(s - 1)
        ends.append(e + 1)
    return {
        "input_ids": enc["input_ids"],
        "token_type_ids": enc["token_type_ids"],
        "attention_mask": enc["attention_mask"],
        "start_positions": starts,
        "end_positions": ends,
    }


def squad_eval_features(tokenizer, records, args):
    """(model inputs, per-window example index, per-window offsets with None outside the
    context) (run_qa.py `prepare_validation_features`)."""
    enc = squad_tokenize(tokenizer, records, args)
    offsets = []
    for i, window in enumerate(enc["offset_mapping"]):
        seq = enc.sequence_ids(i)
        offsets.append([o if seq[k] == 1 else None for k, o in enumerate(window)])
    inputs = {k: enc[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    return inputs, list(enc["overflow_to_sample_mapping"]), offsets


class Windows(torch.utils.data.Dataset):
    """Dict of equal-length lists -> one dict of int64 tensors per window."""

    def __init__(self, columns: dict):
        self.columns = {k: torch.tensor(v, dtype=torch.long) for k, v in columns.items()}
        self.n = len(next(iter(self.columns.values())))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {k: v[i] for k, v in self.columns.items()}


def span(offsets, start_logit, end_logit) -> dict:
    """An n-best entry: character offsets, score = start + end logit, and the two logits."""
    score = start_logit + end_logit
    return {"offsets": offsets, "score": score, "start_logit": start_logit, "end_logit": end_logit}


def postprocess(records, window_example, offsets, start_logits, end_logits, args):
    """utils_qa.py `postprocess_qa_predictions`: (predictions, null_odds, best_non_null).

    Returns three dicts keyed by question id; the last two are empty for v1.1.
    """
    by_example = collections.defaultdict(list)
    for w, e in enumerate(window_example):
        by_example[e].append(w)
    predictions, null_odds, best_non_null = {}, {}, {}
    for index, record in enumerate(records):
        null = None
        prelim = []
        for w in by_example[index]:
            sl, el, om = start_logits[w], end_logits[w], offsets[w]
            if null is None or null["score"] > sl[0] + el[0]:
                null = span((0, 0), sl[0], el[0])
            top_starts = np.argsort(sl)[-1 : -args.n_best_size - 1 : -1].tolist()
            top_ends = np.argsort(el)[-1 : -args.n_best_size - 1 : -1].tolist()
            for s in top_starts:
                for e in top_ends:
                    if s >= len(om) or e >= len(om) or om[s] is None or om[e] is None:
                        continue
                    if e < s or e - s + 1 > args.max_answer_length:
                        continue
                    prelim.append(span((om[s][0], om[e][1]), sl[s], el[e]))
        if args.version_2_with_negative:
            prelim.append(null)
        nbest = sorted(prelim, key=lambda x: x["score"], reverse=True)[: args.n_best_size]
        if args.version_2_with_negative and not any(p["offsets"] == (0, 0) for p in nbest):
            nbest.append(null)
        context = record["context"]
        for p in nbest:
            p["text"] = context[p["offsets"][0] : p["offsets"][1]]
        if not nbest or (len(nbest) == 1 and nbest[0]["text"] == ""):
            nbest.insert(0, {"text": "empty", "start_logit": 0.0, "end_logit": 0.0, "score": 0.0})
        qid = record["id"]
        if not args.version_2_with_negative:
            predictions[qid] = nbest[0]["text"]
            continue
        best = next(p for p in nbest if p["text"] != "")
        diff = float(null["score"] - best["start_logit"] - best["end_logit"])
        null_odds[qid] = diff
        best_non_null[qid] = best["text"]
        predictions[qid] = "" if diff > args.null_score_diff_threshold else best["text"]
    return predictions, null_odds, best_non_null


def squad(argv=None):
    args = squad_args(argv)
    out = start(args, interop_threads=args.threads)
    tokenizer, model = load(args, transformers.AutoModelForQuestionAnswering)
    if args.max_seq_length > tokenizer.model_max_length:
        print(
            f"max_seq_length {args.max_seq_length} > model_max_length "
            f"{tokenizer.model_max_length}; using the latter",
            flush=True,
        )
        args.max_seq_length = tokenizer.model_max_length
    metrics = {
        "peer": "transformers run_qa.py semantics",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "train_batch_size": args.per_device_train_batch_size,
        **{name: getattr(args, name) for name in RECORDED_FLAGS},
    }
    if args.train_file:
        records = read_flat(args.train_file, args.max_train_examples)
        t0 = time.perf_counter()
        train_set = Windows(squad_train_features(tokenizer, records, args))
        metrics["train_feature_seconds"] = time.perf_counter() - t0
        print(f"train: {len(records)} questions -> {len(train_set)} windows", flush=True)
        trainer = build_trainer(
            args,
            out,
            model,
            "step {step}/{max_steps} loss {loss:.4f} lr {lr:.3g} {rate:.2f} windows/s {elapsed:.0f}s",
            dict(
                max_steps=args.max_steps,
                adam_epsilon=1e-8,
                logging_steps=args.logging_steps,
                logging_first_step=True,
                eval_strategy="no",
            ),
            train_dataset=train_set,
            data_collator=transformers.default_data_collator,
        )
        metrics["optimizer"] = optimizer_name(trainer)
        result, seconds = run_training(trainer, args)
        steps = result.global_step
        # windows seen: full batches, the last batch of each epoch may be short
        trained = min(
            steps * args.per_device_train_batch_size,
            math.ceil(args.num_train_epochs * len(train_set)),
        )
        metrics.update(
            {
                "train_examples": len(records),
                "train_windows": len(train_set),
                "train_steps": steps,
                "train_seconds": seconds,
                "train_windows_per_second": trained / max(seconds, 1e-9),
                "train_loss": result.training_loss,
            }
        )
        model = trainer.model
    if args.validation_file:
        records = read_flat(args.validation_file, args.max_eval_examples)
        t0 = time.perf_counter()
        inputs, window_example, offsets = squad_eval_features(tokenizer, records, args)
        loader = torch.utils.data.DataLoader(
            Windows(inputs), batch_size=args.per_device_eval_batch_size
        )
        model.eval()
        t1 = time.perf_counter()
        starts, ends = [], []
        with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16, enabled=args.bf16):
            for k, batch in enumerate(loader):
                output = model(**batch)
                starts.append(output.start_logits.float().numpy())
                ends.append(output.end_logits.float().numpy())
                if (k + 1) % args.logging_steps == 0:
                    print(
                        f"predict batch {k + 1}/{len(loader)} {time.perf_counter() - t1:.0f}s",
                        flush=True,
                    )
        logits_seconds = time.perf_counter() - t1
        answers = postprocess(
            records, window_example, offsets, np.concatenate(starts), np.concatenate(ends), args
        )
        seconds = time.perf_counter() - t0
        names = ("predictions", "null_odds", "best_non_null_predictions")
        for name, values in zip(names[: 3 if args.version_2_with_negative else 1], answers):
            fileio.write_json(str(out / f"{name}.json"), values, indent=1)
        metrics.update(
            {
                "predict_examples": len(records),
                "predict_windows": len(window_example),
                "predict_seconds": seconds,
                "predict_logits_seconds": logits_seconds,
                "predict_questions_per_second": len(records) / max(seconds, 1e-9),
                "predict_windows_per_second": len(window_example) / max(logits_seconds, 1e-9),
            }
        )
    write_results(out, "peer_metrics.json", metrics)
