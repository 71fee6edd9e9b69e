"""The Hugging Face / PyTorch peers of our fine-tuning recipes (GLUE, CoNLL-2003 NER, SQuAD), each
a `Trainer` with a train clock, never importing TensorFlow or keras_bert, run by the scripts beside
it. What each measures and writes, and the commands of the published runs: README.md here.

    <torch venv>/bin/python benchmarks/peers/hf_glue_peer.py --model_dir=$MODEL \
        --data_dir=$KERAS_BERT_DATA_DIR/glue/sst2 --max_train_seconds=1800 --output_dir=OUT
    <torch venv>/bin/python benchmarks/peers/hf_ner_peer.py --model_dir=$MODEL \
        --train_file=D/train.json --validation_file=D/valid.json --output_dir=OUT
    <torch venv>/bin/python benchmarks/peers/hf_squad_peer.py --model_dir=$MODEL \
        --train_file=D/train.json --validation_file=D/heldout.json --output_dir=OUT
"""

import argparse
import collections
import importlib.util
import json
import math
import pathlib
import platform
import sys
import time

import numpy as np
import torch
import transformers

# keras_bert/fileio.py loaded alone (standard library only; the keras_bert package loads Keras)
_FILEIO = pathlib.Path(__file__).resolve().parents[2] / "keras_bert" / "fileio.py"
_SPEC = importlib.util.spec_from_file_location("keras_bert_fileio_for_peers", _FILEIO)
fileio = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fileio)
REQUIRED = "required"  # a flag's default in `parse_args`: the flag must be given
MAX_STEPS = ("max_steps", -1, "Optimizer steps to schedule and train (-1: the epochs say).")


def parse_args(description, argv, flags, *, seq, eval_batch, epochs, threads=0, nonnegative=()):
    """The flags every peer takes (the example scripts' names; `seq`, `eval_batch`, `epochs` and
    `threads` the defaults of the script it follows), then `flags`; each (name, default, help):
    False a switch, REQUIRED a required string, a type an optional flag of that type, any other
    value the default. Exits unless --warmup_ratio is in [0, 1) and each `nonnegative` is >= 0."""
    parser = argparse.ArgumentParser(description=description)
    examples = "(file order; score with the same N)"
    for name, default, text in [
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
    ]:
        if default is False:
            kind = {"action": "store_true"}
        elif default is REQUIRED:
            kind = {"required": True}
        else:
            typed = isinstance(default, type)
            kind = {"type": default} if typed else {"type": type(default), "default": default}
        parser.add_argument(f"--{name}", help=text, **kind)
    args = parser.parse_args(argv)
    if not 0 <= args.warmup_ratio < 1:
        parser.error(f"--warmup_ratio must be in [0, 1), got {args.warmup_ratio}")
    for name in nonnegative:
        if getattr(args, name) < 0:
            parser.error(f"--{name} must be >= 0, got {getattr(args, name)}")
    return args


def setup(args, model_class, interop_threads: int = 0, **config):
    """(--output_dir made, fast tokenizer, `model_class` model of --model_dir with `config`), after
    setting torch's threads (--threads, `interop_threads`: 0 leaves them), progress bars off and
    the seed."""
    if args.threads:
        torch.set_num_threads(args.threads)
    if interop_threads:
        torch.set_num_interop_threads(interop_threads)
    out = pathlib.Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    transformers.utils.logging.disable_progress_bar()  # no carriage-return bars in logs
    sys.stdout.reconfigure(line_buffering=True)  # each progress line in a log as it is printed
    transformers.set_seed(args.seed)
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model_dir, use_fast=True)
    config = transformers.AutoConfig.from_pretrained(args.model_dir, **config)
    return out, tokenizer, model_class.from_pretrained(args.model_dir, config=config)


def rows(enc, **columns) -> list[dict]:
    """One feature dict per row of the tokenizer's output `enc`: its model inputs and that row's
    value of each of `columns`."""
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
    return [
        {k: enc[k][i] for k in keys} | {c: v[i] for c, v in columns.items()}
        for i in range(len(enc["input_ids"]))
    ]


def set_labels(model, label_list: list[str], out: pathlib.Path) -> dict:
    """Names the model's classes `label_list` in that order, writes them to `out`/labels.json;
    returns label -> class id."""
    label_to_id = {label: i for i, label in enumerate(label_list)}
    model.config.label2id = dict(label_to_id)
    model.config.id2label = dict(enumerate(label_list))
    fileio.write_json(str(out / "labels.json"), label_list, indent=None)
    return label_to_id


class Clock(transformers.TrainerCallback):
    """A peer's train clock (evaluations taken out: `PeerTrainer.evaluate` pauses it), its progress
    lines (`progress` formatted with the TrainerState's fields, loss, lr, elapsed and rate), one
    every `predict_lines` prediction batches, its evaluations, and its budget `max_seconds`."""

    def __init__(self, progress: str, batch_size: int, max_seconds=0.0, predict_lines=0):
        self.progress, self.batch_size, self.max_seconds = progress, batch_size, max_seconds
        self.predict_lines, self.predicted = predict_lines, 0
        self.total, self.since, self.paused = 0.0, None, False
        self.stopped_by_budget, self.evaluations = False, []

    def seconds(self) -> float:
        return self.total + (0.0 if self.since is None else time.monotonic() - self.since)

    def pause(self):
        self.total, self.since, self.paused = self.seconds(), None, self.since is not None

    def resume(self):
        if self.paused:
            self.since, self.paused = time.monotonic(), False

    def on_train_begin(self, args, state, control, **kwargs):
        self.total, self.since, self.paused = 0.0, time.monotonic(), False

    def on_train_end(self, args, state, control, **kwargs):
        self.pause()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if "loss" in (logs or {}):  # not the end-of-training summary
            elapsed = self.seconds()
            line = self.progress.format(
                **vars(state),
                loss=logs["loss"],
                lr=logs.get("learning_rate", float("nan")),
                elapsed=elapsed,
                rate=state.global_step * self.batch_size / max(elapsed, 1e-9),
            )
            print(line)

    def on_step_end(self, args, state, control, **kwargs):
        if self.max_seconds and self.seconds() >= self.max_seconds:
            if not control.should_training_stop:
                self.stopped_by_budget = True
                print(
                    f"budget: {self.seconds():.1f}s >= {self.max_seconds:g}s at step "
                    f"{state.global_step}/{state.max_steps}; stopping"
                )
            control.should_training_stop = True

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        self.predicted += 1
        if self.predict_lines and self.predicted % self.predict_lines == 0:
            print(f"predict batch {self.predicted}/{len(eval_dataloader)}")

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        metrics = metrics or {}
        step, seconds = state.global_step, round(self.seconds(), 3)
        accuracy, eval_seconds = metrics.get("eval_accuracy"), metrics.get("eval_runtime")
        self.evaluations.append(
            {"step": step, "train_seconds": seconds, "accuracy": accuracy}
            | {"loss": metrics.get("eval_loss"), "eval_seconds": eval_seconds}
        )
        print(
            f"eval step {step} train {seconds:.1f}s accuracy {accuracy:.4f} ({eval_seconds:.1f}s)"
        )


class PeerTrainer(transformers.Trainer):
    """Trainer of `model` with the settings of README.md here (--warmup_ratio as `warmup_steps`,
    which Trainer reads as a fraction below 1) and `training`, timed by `clock` (in place of its
    PrinterCallback; `evaluate` pauses it); `kwargs`: datasets, collator..."""

    def __init__(self, args, model, clock: Clock, training: dict, **kwargs):
        same = "bf16 seed per_device_train_batch_size per_device_eval_batch_size learning_rate"
        arguments = transformers.TrainingArguments(
            output_dir=str(pathlib.Path(args.output_dir, "trainer")),
            use_cpu=True,
            **{k: getattr(args, k) for k in f"{same} weight_decay num_train_epochs".split()},
            warmup_steps=args.warmup_ratio,
            save_strategy="no",
            disable_tqdm=True,
            report_to="none",
            **training,
        )
        super().__init__(model=model, args=arguments, **kwargs)
        self.clock, self.threads = clock, args.threads
        self.remove_callback(transformers.trainer_callback.PrinterCallback)
        self.add_callback(clock)

    def evaluate(self, *a, **kw):
        self.clock.pause()
        try:
            return super().evaluate(*a, **kw)
        finally:
            self.clock.resume()

    def train(self, *a, **kw):
        if self.threads:  # again: setup may change torch's thread count
            torch.set_num_threads(self.threads)
        return super().train(*a, **kw)

    def optimizer_name(self) -> str:
        return str(getattr(self.args.optim, "value", self.args.optim))

    def settings_and_versions(self, args, **extra) -> dict:
        """The "settings" (flags, the optimizer, warmup steps, torch threads and mixed precision
        used, and `extra`) and "versions" of a peer's results."""
        settings = vars(args) | {
            "optim": self.optimizer_name(),
            "warmup_steps": self.args.get_warmup_steps(self.state.max_steps),
            "torch_threads": torch.get_num_threads(),
            "mixed_precision": str(self.accelerator.mixed_precision),
            **extra,
        }
        versions = {"torch": torch.__version__, "transformers": transformers.__version__}
        return {"settings": settings, "versions": versions | {"python": platform.python_version()}}


def timed(function, *args):
    """(`function(*args)`, its wall seconds)."""
    begin = time.monotonic()
    return function(*args), time.monotonic() - begin


def write_results(out: pathlib.Path, name: str, results: dict, summary=None) -> None:
    """Writes `results` to `out`/`name` (JSON, whole or not at all), then prints them: at the
    keys `summary` on one line, or all of them indented (sorted keys) without `summary`."""
    fileio.write_json(str(out / name), results)
    if summary:
        print(json.dumps({k: results[k] for k in summary}))
    else:
        print(json.dumps(results, indent=2, sort_keys=True))


def read_tsv(data_dir, name, columns, limit=None) -> tuple[list[dict], int]:
    """(rows as {column: str} of `columns`, the first `limit` or all; how many lines had a column
    count other than the header's) of a headed GLUE TSV, one row per physical line, `"` not a
    quote character. Exits when a column is missing from the header."""
    path = pathlib.Path(data_dir, name)
    lines = fileio.text_lines(fileio.read_user_text(str(path)))
    header = lines[0].rstrip("\r").split("\t")
    missing = [c for c in columns if c not in header]
    if missing:
        raise SystemExit(f"{path}: no column {missing} in header {header}")
    rows, dropped = [], 0
    for line in lines[1:]:
        fields = line.rstrip("\r").split("\t")
        if len(fields) != len(header):
            dropped += 1
            continue
        rows.append({c: fields[header.index(c)] for c in columns})
        if limit and len(rows) == limit:
            break
    return rows, dropped


def accuracy(prediction: transformers.EvalPrediction) -> dict:
    logits = prediction.predictions
    logits = logits[0] if isinstance(logits, tuple) else logits
    return {"accuracy": float((np.argmax(logits, axis=-1) == prediction.label_ids).mean())}


GLUE_FLAGS = [
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
]


def glue(argv=None):
    """The Hugging Face / PyTorch GLUE peer of `recipes/run_classifier.py` (run_glue.py)."""
    nonnegative = ("eval_steps", "pad_to_multiple_of", "threads", "max_train_seconds")
    args = parse_args(
        glue.__doc__, argv, GLUE_FLAGS, seq=128, eval_batch=8, epochs=3, nonnegative=nonnegative
    )
    texts = [c for c in (args.text_column, args.text_b_column) if c]
    columns = [*texts, args.label_column]
    full_train, train_dropped = read_tsv(args.data_dir, "train.tsv", columns)
    label_list = sorted({r[args.label_column] for r in full_train})  # run_glue.py: whole file
    train = full_train[: args.max_train_examples or None]
    dev, dev_dropped = read_tsv(args.data_dir, "dev.tsv", columns, args.max_eval_examples)
    unknown = sorted({r[args.label_column] for r in dev} - set(label_list))
    if unknown:
        raise SystemExit(f"dev labels {unknown} not among the train labels {label_list}")
    task = transformers.AutoModelForSequenceClassification
    out, tokenizer, model = setup(args, task, num_labels=len(label_list))
    label_to_id = set_labels(model, label_list, out)
    max_seq_length = min(args.max_seq_length, tokenizer.model_max_length)

    def encode(part):  # run_glue.py's `preprocess_function` (padding=False)
        enc = tokenizer(
            *[[r[c] for r in part] for c in texts], max_length=max_seq_length, truncation=True
        )
        return rows(enc, labels=[label_to_id[r[args.label_column]] for r in part])

    (train_features, dev_features), encode_seconds = timed(lambda: (encode(train), encode(dev)))
    progress = (
        "step {global_step}/{max_steps} epoch {epoch:.3f} elapsed {elapsed:.1f}s loss {loss:.4f} "
        "lr {lr:.3e} {rate:.1f} examples/s"
    )
    clock = Clock(progress, args.per_device_train_batch_size, args.max_train_seconds)
    evaluation = dict(eval_strategy="steps", eval_steps=args.eval_steps) if args.eval_steps else {}
    group = {"train_sampling_strategy": "group_by_length"} if args.group_by_length else {}
    training = dict(adam_epsilon=args.adam_epsilon, max_steps=args.max_steps, **evaluation, **group)
    trainer = PeerTrainer(
        args,
        model,
        clock,
        dict(logging_steps=args.log_steps, **training),
        train_dataset=train_features,
        eval_dataset=dev_features,
        processing_class=tokenizer,
        compute_metrics=accuracy,
        data_collator=transformers.DataCollatorWithPadding(
            tokenizer, pad_to_multiple_of=args.pad_to_multiple_of or None
        ),
    )
    print(
        f"{len(train)} train / {len(dev)} dev examples (dropped {train_dropped} / "
        f"{dev_dropped} malformed lines), labels {label_list}, max_seq_length "
        f"{max_seq_length}, torch threads {torch.get_num_threads()}, bf16 {args.bf16}"
    )

    result, wall = timed(trainer.train)
    steps = trainer.state.global_step
    if not clock.evaluations or clock.evaluations[-1]["step"] != steps:
        wall += timed(trainer.evaluate)[1]
    train_seconds = clock.seconds()
    # examples fed in `steps` batches, each epoch ending with its partial batch
    per_epoch = -(-len(train) // args.per_device_train_batch_size)
    trained = steps // per_epoch * len(train) + min(
        steps % per_epoch * args.per_device_train_batch_size, len(train)
    )
    accuracies = [e["accuracy"] for e in clock.evaluations]
    metrics = {
        "peer": "transformers run_glue.py semantics",
        "evaluations": clock.evaluations,
        "best": max(clock.evaluations, key=lambda e: e["accuracy"]),
        "final": clock.evaluations[-1],
        "best_accuracy": max(accuracies),
        "final_accuracy": accuracies[-1],
        "train_examples": len(train),
        "dev_examples": len(dev),
        "steps": steps,
        "scheduled_steps": trainer.state.max_steps,
        "stopped_by_budget": clock.stopped_by_budget,
        "train_seconds": train_seconds,
        "examples_trained": trained,
        "examples_per_second": trained / max(train_seconds, 1e-9),
        "wall_seconds_train_and_evaluations": wall,
        "encode_seconds": encode_seconds,
        "train_loss": result.training_loss,
        **trainer.settings_and_versions(args, max_seq_length_used=max_seq_length),
    }
    summary = (
        "best_accuracy final_accuracy steps train_seconds examples_per_second stopped_by_budget"
    )
    write_results(out, "metrics.json", metrics, summary.split())


def ner_features(tokenizer, sentences, label_to_id, max_seq_length):
    """run_ner.py's `tokenize_and_align_labels` (label_all_tokens off, no padding): (one feature
    dict per sentence, labels the word's tag id at its first piece and -100 elsewhere; per
    sentence the (position, word) of each word's first piece)."""
    enc = tokenizer(
        [s["tokens"] for s in sentences],
        truncation=True,
        max_length=max_seq_length,
        is_split_into_words=True,
    )
    firsts, labels = [], []
    for i, sentence in enumerate(sentences):
        ids = enc.word_ids(batch_index=i)  # None at special tokens
        pairs = enumerate(zip(ids, [None, *ids]))
        firsts.append([(p, w) for p, (w, previous) in pairs if w is not None and w != previous])
        labels.append([-100] * len(ids))
        for position, word in firsts[-1]:
            labels[-1][position] = label_to_id[sentence["ner_tags"][word]]
    return rows(enc, labels=labels), firsts


NER_FLAGS = [
    ("train_file", REQUIRED, "JSON lines {tokens, ner_tags}."),
    ("validation_file", str, "JSON lines; predicted after training."),
    ("test_file", str, "JSON lines; predicted after training."),
    ("log_steps", 50, "Optimizer steps per progress line."),
    ("save_model", False, "Save the trained model."),
]


def ner(argv=None):
    """The Hugging Face / PyTorch peer of `recipes/run_ner.py` (CoNLL-2003 NER; run_ner.py)."""
    args = parse_args(ner.__doc__, argv, NER_FLAGS, seq=128, eval_batch=8, epochs=3, threads=1)
    full_train = fileio.read_jsonl(str(args.train_file))
    # run_ner.py's `get_label_list`: the sorted set of tags of the whole train file
    label_list = sorted({tag for s in full_train for tag in s["ner_tags"]})
    train = full_train[: args.max_train_examples or None]
    evals = {
        name: fileio.read_jsonl(str(path))[: args.max_eval_examples or None]
        for name, path in (("valid", args.validation_file), ("test", args.test_file))
        if path
    }
    task = transformers.AutoModelForTokenClassification
    out, tokenizer, model = setup(args, task, 1, num_labels=len(label_list), finetuning_task="ner")
    if not getattr(tokenizer, "is_fast", False):
        raise SystemExit(f"{args.model_dir}: no fast tokenizer (word_ids needs one)")
    config_class = getattr(transformers, "PreTrainedConfig", None) or transformers.PretrainedConfig
    default = config_class(num_labels=len(label_list)).label2id
    if model.config.label2id != default and sorted(model.config.label2id) == label_list:
        label_list = [model.config.id2label[i] for i in range(len(label_list))]
    label_to_id = set_labels(model, label_list, out)

    train_features, _ = ner_features(tokenizer, train, label_to_id, args.max_seq_length)
    progress = (
        "step {global_step}/{max_steps} epoch {epoch:.3f} loss {loss:.4f} lr {lr:.3e} "
        "elapsed {elapsed:.1f}s {rate:.2f} sentences/s"
    )
    trainer = PeerTrainer(
        args,
        model,
        Clock(progress, args.per_device_train_batch_size),
        dict(logging_steps=args.log_steps),
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
        f"{torch.get_num_threads()}, bf16 {args.bf16}"
    )
    result, train_seconds = timed(trainer.train)
    hook.remove()
    if args.save_model:
        trainer.save_model(str(out / "model"))

    def truncated(features):
        return sum(len(f["input_ids"]) == args.max_seq_length for f in features)

    predictions = {}
    for name, sentences in evals.items():
        # one tag per word: the argmax at the word's first piece, "O" for a word with no piece
        features, firsts = ner_features(tokenizer, sentences, label_to_id, args.max_seq_length)
        output, seconds = timed(trainer.predict, features)
        records = []
        for row, first_pieces, sentence in zip(output.predictions, firsts, sentences):
            tags = ["O"] * len(sentence["tokens"])
            for position, word in first_pieces:
                tags[word] = label_list[int(np.argmax(row[position]))]
            cut = len(tags) - len(first_pieces)
            records.append({"tokens": sentence["tokens"], "pred_tags": tags, "cut_words": cut})
        fileio.write_jsonl(str(out / f"predictions_{name}.json"), records)
        predictions[name] = {
            "sentences": len(sentences),
            "words": sum(len(s["tokens"]) for s in sentences),
            "cut_words": sum(r["cut_words"] for r in records),
            "predict_seconds": seconds,
            "truncated_sentences": truncated(features),
        }
        print(f"{name}: {json.dumps(predictions[name])}")

    timing = {
        "train_seconds": train_seconds,
        "train_sentences": len(train),
        "num_train_epochs": args.num_train_epochs,
        "sentences_per_second": len(train) * args.num_train_epochs / train_seconds,
        "steps": trainer.state.global_step,
        "train_truncated_sentences": truncated(train_features),
        "trainer_metrics": result.metrics,
        "predict": predictions,
        **trainer.settings_and_versions(args, classifier_output_dtype=seen_dtype.get("dtype")),
    }
    summary = ("train_seconds", "train_sentences", "sentences_per_second", "steps")
    write_results(out, "peer_timing.json", timing, summary)


def squad_windows(tokenizer, records, args, train: bool):
    """run_qa.py's `prepare_train_features` (`train`: feature dicts with the answer's token start
    and end) or `prepare_validation_features` (feature dicts, each window's example index and
    offsets, None outside the context)."""
    enc = tokenizer(
        [r["question"].lstrip() for r in records],
        [r["context"] for r in records],
        truncation="only_second",
        max_length=args.max_seq_length,
        stride=args.doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length",
    )
    windows = enc["overflow_to_sample_mapping"]
    sequences = [enc.sequence_ids(i) for i in range(len(windows))]
    if not train:
        offsets = [
            [o if k == 1 else None for k, o in zip(seq, window)]
            for seq, window in zip(sequences, enc["offset_mapping"])
        ]
        return rows(enc), list(windows), offsets
    starts, ends = [], []
    for i, (offsets, seq) in enumerate(zip(enc["offset_mapping"], sequences)):
        ids, answers = enc["input_ids"][i], records[windows[i]]["answers"]
        s = e = ids.index(tokenizer.cls_token_id) if tokenizer.cls_token_id in ids else 0
        if answers["answer_start"]:
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            first = seq.index(1)  # first and last context token of the window
            last = len(seq) - 1 - seq[::-1].index(1)
            if offsets[first][0] <= start_char and offsets[last][1] >= end_char:
                s, e = first, last
                while s < len(offsets) and offsets[s][0] <= start_char:
                    s += 1
                while offsets[e][1] >= end_char:
                    e -= 1
                s, e = s - 1, e + 1
        starts.append(s)
        ends.append(e)
    return rows(enc, start_positions=starts, end_positions=ends)


def postprocess(records, window_example, offsets, start_logits, end_logits, args):
    """utils_qa.py `postprocess_qa_predictions`: (predictions, null_odds, best_non_null), each
    keyed by question id; the last two are empty for v1.1."""
    by_example = collections.defaultdict(list)
    for w, e in enumerate(window_example):
        by_example[e].append(w)
    predictions, null_odds, best_non_null = {}, {}, {}
    v2, n_best = args.version_2_with_negative, args.n_best_size

    def span(offsets, start_logit, end_logit) -> dict:  # an n-best entry
        scores = {"score": start_logit + end_logit, "start_logit": start_logit}
        return {"offsets": offsets, **scores, "end_logit": end_logit}

    for index, record in enumerate(records):
        null, prelim = None, []
        for w in by_example[index]:
            sl, el, om = start_logits[w], end_logits[w], offsets[w]
            if null is None or null["score"] > sl[0] + el[0]:
                null = span((0, 0), sl[0], el[0])
            for s in np.argsort(sl)[-1 : -n_best - 1 : -1].tolist():
                for e in np.argsort(el)[-1 : -n_best - 1 : -1].tolist():
                    if s >= len(om) or e >= len(om) or om[s] is None or om[e] is None:
                        continue
                    if e < s or e - s + 1 > args.max_answer_length:
                        continue
                    prelim.append(span((om[s][0], om[e][1]), sl[s], el[e]))
        nbest = sorted(prelim + [null] * v2, key=lambda x: x["score"], reverse=True)[:n_best]
        if v2 and not any(p["offsets"] == (0, 0) for p in nbest):
            nbest.append(null)
        for p in nbest:
            p["text"] = record["context"][p["offsets"][0] : p["offsets"][1]]
        if not nbest or (len(nbest) == 1 and nbest[0]["text"] == ""):
            nbest.insert(0, {"text": "empty", "start_logit": 0.0, "end_logit": 0.0, "score": 0.0})
        qid = record["id"]
        if not v2:
            predictions[qid] = nbest[0]["text"]
            continue
        best = next(p for p in nbest if p["text"] != "")
        null_odds[qid] = float(null["score"] - best["start_logit"] - best["end_logit"])
        best_non_null[qid] = best["text"]
        predictions[qid] = "" if null_odds[qid] > args.null_score_diff_threshold else best["text"]
    return predictions, null_odds, best_non_null


SQUAD_FLAGS = [
    ("train_file", str, "Flat SQuAD JSON (squad_peer_data train.json)."),
    ("validation_file", str, "Flat SQuAD JSON to predict (heldout.json)."),
    ("doc_stride", 128, "Tokens of overlap between a context's windows."),
    ("version_2_with_negative", False, None),
    ("null_score_diff_threshold", 0.0, None),
    ("n_best_size", 20, None),
    ("max_answer_length", 30, None),
    ("logging_steps", 10, "One progress line per N steps."),
    MAX_STEPS,
]


def squad(argv=None):
    """The Hugging Face / PyTorch SQuAD peer of `recipes/run_squad.py` (run_qa.py)."""
    args = parse_args(squad.__doc__, argv, SQUAD_FLAGS, seq=384, eval_batch=32, epochs=1)
    out, tokenizer, model = setup(args, transformers.AutoModelForQuestionAnswering, args.threads)
    if args.max_seq_length > (limit := tokenizer.model_max_length):
        print(f"max_seq_length {args.max_seq_length} > model_max_length {limit}; using the latter")
        args.max_seq_length = limit
    recorded = (  # the flags peer_metrics.json records under their own names
        "bf16 max_seq_length doc_stride learning_rate num_train_epochs warmup_ratio weight_decay "
        "seed version_2_with_negative"
    )
    metrics = {
        "peer": "transformers run_qa.py semantics",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "train_batch_size": args.per_device_train_batch_size,
        **{name: getattr(args, name) for name in recorded.split()},
    }
    train, windows = [], []
    if args.train_file:
        train = fileio.read_json(str(args.train_file))["data"][: args.max_train_examples]
        windows, metrics["train_feature_seconds"] = timed(
            squad_windows, tokenizer, train, args, True
        )
        print(f"train: {len(train)} questions -> {len(windows)} windows")
    progress = (
        "step {global_step}/{max_steps} loss {loss:.4f} lr {lr:.3g} {rate:.2f} windows/s "
        "{elapsed:.0f}s"
    )
    trainer = PeerTrainer(
        args,
        model,
        Clock(progress, args.per_device_train_batch_size, predict_lines=args.logging_steps),
        dict(max_steps=args.max_steps, logging_steps=args.logging_steps, logging_first_step=True),
        train_dataset=windows or None,
        data_collator=transformers.default_data_collator,
    )
    if args.train_file:
        metrics["optimizer"] = trainer.optimizer_name()
        result, seconds = timed(trainer.train)
        # windows seen: full batches, the last batch of each epoch may be short
        batches = result.global_step * args.per_device_train_batch_size
        trained = min(batches, math.ceil(args.num_train_epochs * len(windows)))
        metrics.update(
            {
                "train_examples": len(train),
                "train_windows": len(windows),
                "train_steps": result.global_step,
                "train_seconds": seconds,
                "train_windows_per_second": trained / max(seconds, 1e-9),
                "train_loss": result.training_loss,
            }
        )
    if args.validation_file:
        records = fileio.read_json(str(args.validation_file))["data"][: args.max_eval_examples]
        t0 = time.monotonic()
        features, window_example, offsets = squad_windows(tokenizer, records, args, train=False)
        output, logits_seconds = timed(trainer.predict, features)
        answers = postprocess(records, window_example, offsets, *output.predictions, args)
        seconds = time.monotonic() - t0
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
