"""What the Hugging Face peers (hf_glue_peer.py, hf_ner_peer.py, hf_squad_peer.py) share: their
flags, the run's setup, checkpoint loading, the `Trainer` they all build alike (its arguments,
train clock and progress lines) and the writing of their results. The peer scripts import it as a
sibling module; like them it never imports TensorFlow or keras_bert. Settings: README.md here.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import platform
import time

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


def parse_args(doc, argv, flags, *, seq, eval_batch, epochs, threads=0, nonnegative=()):
    """The flags every peer takes (transformers' example scripts' names, with the defaults of the
    script it follows: `seq`, `eval_batch`, `epochs`, `threads`), then the peer's own `flags`.
    Exits through `parser.error` unless --warmup_ratio is in [0, 1) and each of `nonnegative` is
    >= 0."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
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


def trainer(args, out, model, progress: str, settings: dict, **kwargs) -> PeerTrainer:
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


def train(run: PeerTrainer, args):
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
