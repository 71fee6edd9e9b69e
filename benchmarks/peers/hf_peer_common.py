"""What the Hugging Face / PyTorch peers (hf_glue_peer.py, hf_ner_peer.py, hf_squad_peer.py)
share: their `Trainer` hyperparameter flags and the `TrainingArguments` they all set alike.

The peers run as scripts in the torch environment (`<torch venv>/bin/python
benchmarks/peers/hf_glue_peer.py ...`), so they import this file as a sibling module (`import
hf_peer_common`: a script's own folder is on `sys.path`). Like them it never imports TensorFlow or
keras_bert; `project_fileio` loads the project's file module alone, for its rules on reading and
writing files (JSON Lines split at "\n" only).
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib

_FILEIO = pathlib.Path(__file__).resolve().parents[2] / "keras_bert" / "fileio.py"


def project_fileio():
    """keras_bert/fileio.py loaded from its file alone (it imports only the standard library; the
    keras_bert package, which loads Keras, is not imported): `read_jsonl`, `write_jsonl`,
    `write_json`."""
    spec = importlib.util.spec_from_file_location("keras_bert_fileio_for_peers", _FILEIO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peer_parser(doc: str) -> argparse.ArgumentParser:
    """The command-line parser of a peer script, described by the first line of `doc` (its module
    docstring), with the flag every peer starts from: `--model_dir`, the Hugging Face checkpoint it
    fine-tunes."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument(
        "--model_dir",
        required=True,
        help="HF checkpoint dir (config.json, weights, tokenizer files).",
    )
    return parser


def add_trainer_flags(parser, eval_batch_size: int, num_train_epochs: float) -> None:
    """Adds `--per_device_train_batch_size` (32), `--per_device_eval_batch_size`
    (`eval_batch_size`), `--learning_rate` (5e-5) and `--num_train_epochs` (`num_train_epochs`):
    the flags of transformers' example scripts that every peer takes under the same names, with
    the defaults of the script it follows."""
    parser.add_argument("--per_device_train_batch_size", type=int, default=32)
    parser.add_argument("--per_device_eval_batch_size", type=int, default=eval_batch_size)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--num_train_epochs", type=float, default=num_train_epochs)


def add_run_flags(
    parser,
    bf16_help: str,
    threads_default: int = 0,
    threads_help: str = "torch.set_num_threads (0: default).",
) -> None:
    """Adds `--seed` (42), `--bf16` (off; `bf16_help`) and `--threads` (`threads_default`;
    `threads_help`), in that order: the seed and precision `training_arguments` reads and the
    torch thread count every peer sets, under the same names in each peer."""
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--bf16", action="store_true", help=bf16_help)
    parser.add_argument("--threads", type=int, default=threads_default, help=threads_help)


def check_warmup_ratio(parser, args) -> None:
    """Exits through `parser.error` unless `--warmup_ratio` is in [0, 1): `training_arguments`
    passes it as `warmup_steps`, which Trainer reads as a step count from 1 on."""
    if not 0 <= args.warmup_ratio < 1:
        parser.error(f"--warmup_ratio must be in [0, 1), got {args.warmup_ratio}")


def training_arguments(args, output_dir: pathlib.Path, **specific):
    """`transformers.TrainingArguments` of a peer run: on the CPU, `--bf16`, `--seed`, the batch
    sizes, learning rate, weight decay and epochs of `args`, `--warmup_ratio` as `warmup_steps`
    (Trainer reads a value below 1 as a fraction of the steps), checkpoints off, plain progress
    lines every `logging_steps` (no tqdm bars, no reporting integrations) and data loaded in the
    main process; the trainer's files under `output_dir`/trainer. `specific`: the peer's own
    further settings (a setting named twice is a TypeError)."""
    import transformers

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
        save_strategy="no",
        logging_strategy="steps",
        disable_tqdm=True,
        report_to="none",
        dataloader_num_workers=0,
        **specific,
    )
