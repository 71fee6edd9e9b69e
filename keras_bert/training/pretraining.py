"""BERT pretraining (masked LM + next sentence, BERT §3.1) on create_pretraining_data TFRecords.

`run_pretraining(PretrainConfig(...))` is the whole run behind `recipes/run_pretraining.py`.
Writes to `output_dir`: `config.json` (settings + BertConfig), `checkpoints/` (resumable: the same
call after a crash or SIGKILL continues from the last checkpoint; a call with other settings is
refused, see HARMLESS_SETTINGS), `logs/` (TensorBoard: loss, mlm_loss, mlm_accuracy, nsp_loss,
nsp_accuracy), `history.jsonl` (one line of metrics per `save_checkpoints_steps`),
`metrics.json`, and `encoder/` (keras-bert checkpoint directory for
`--init_checkpoint` / `keras_bert.from_pretrained`). Ablations (BERT table 5): `no_nsp`, `ltr`
(left-to-right attention, implies no NSP).
"""

from __future__ import annotations

import dataclasses
import time

import keras

from keras_bert import fileio
from keras_bert.checkpoints.keras_format import save_encoder
from keras_bert.checkpoints.loader import load_encoder
from keras_bert.config import BertConfig, check_max_seq_length
from keras_bert.data.file_patterns import expand_file_patterns
from keras_bert.data.pretraining_pipeline import (
    make_pretraining_dataset,
    records_made_with,
    verify_shards,
)
from keras_bert.models.bert_encoder import BertEncoder
from keras_bert.models.bert_pretrainer import BertPretrainer
from keras_bert.tokenization.full_tokenizer import load_vocab
from keras_bert.training.callbacks import standard_callbacks
from keras_bert.training.fit import resumable_fit
from keras_bert.training.args import FinetuneArgs, RuntimeArgs
from keras_bert.training.argument_set import (
    A_FRACTION,
    AT_LEAST_ONE,
    NOT_NEGATIVE,
    arg,
    args_dataclass,
    fields_of,
)
from keras_bert.training.optimizer import create_optimizer, set_mixed_precision
from keras_bert.training.resume_check import check_resume_settings
from keras_bert.training.strategy import get_strategy


# The settings pretraining shares with fine-tuning are the catalogue's fields (one name, help
# text, type, rule and choices each), with pretraining's defaults.
SharedPretrainArgs = fields_of(
    "SharedPretrainArgs",
    FinetuneArgs,
    {
        "output_dir": {},
        "vocab_file": {"required": True},
        "do_lower_case": {"default": True},
        "preset": {"default": "bert_tiny"},
        "bert_config_file": {},
        "init_checkpoint": {},
        "max_seq_length": {},
        "train_batch_size": {},
        "learning_rate": {"default": 1e-4, "derived": False},
        "optimizer": {},
        "gradient_accumulation_steps": {},
        "save_checkpoints_steps": {"default": 100},
        "seed": {"default": 12345, "deprecated_name": "random_seed"},
    },
    bases=(RuntimeArgs,),
)


@args_dataclass
class PretrainConfig(SharedPretrainArgs):
    """Settings of a pretraining run; field names are the recipe's flag names (google-research's
    `run_pretraining.py` where one exists), and the recipe's flags are made from the fields
    (`arg_flags.define_flags`). The settings shared with fine-tuning are the catalogue's
    (`SharedPretrainArgs`); the fields here are pretraining's own. Sizes in tokens, examples and
    optimizer steps."""

    FLAG_TABLE = "pretraining"

    input_file: str = arg(
        help="Pretraining TFRecords: comma-separated paths or globs.", required=True
    )
    max_predictions_per_seq: int = arg(
        20,
        "Masked LM predictions per record at most (pretraining: must match the records).",
        rule=AT_LEAST_ONE,
    )
    num_train_steps: int = arg(
        1000,
        "Optimizer steps (each --gradient_accumulation_steps batches of --train_batch_size).",
        rule=AT_LEAST_ONE,
    )
    num_warmup_steps: int = arg(100, "Linear warmup steps (optimizer steps).", rule=NOT_NEGATIVE)
    no_nsp: bool = arg(False, "Ablation: MLM only, no next-sentence head or loss.")
    ltr: bool = arg(False, "Ablation: left-to-right (causal) attention, no NSP.")
    dynamic_masking: bool = arg(False, "Redraw MLM masks every epoch in the input pipeline.")
    masked_lm_prob: float = arg(0.15, "For --dynamic_masking.", rule=A_FRACTION)

    @property
    def use_nsp(self) -> bool:
        return not (self.no_nsp or self.ltr)


# The settings a record's fixed feature lengths come from: the run must read them as made.
RECORD_SETTINGS = ("max_seq_length", "max_predictions_per_seq")


def check_records_match(config: PretrainConfig, shards) -> None:
    """The records of `shards` were made with `config`'s max_seq_length and
    max_predictions_per_seq, as far as they say (`records_made_with`: their .summary.json, else one
    record per shard); nothing saying is no refusal.

    Raises:
        ValueError: "--max_seq_length=128 but the records in <input_file> were made with
            max_seq_length=32 (their .summary.json); pass --max_seq_length=32" (every differing
            setting, joined by "and"), or the shards were made with different settings.
    """
    made = records_made_with(shards)

    def said(lengths, source):
        return f"{_joined(dict(zip(RECORD_SETTINGS, lengths)), '', ' and ')} ({source})"

    if len(made) > 1:
        raise ValueError(
            f"the records in {config.input_file} were made with different settings: "
            f"{'; '.join(said(k, v) for k, v in made.items())}; pass shards made alike"
        )
    for lengths, source in made.items():
        wanted = dict(zip(RECORD_SETTINGS, lengths))
        wrong = {k: v for k, v in wanted.items() if getattr(config, k) != v}
        if wrong:
            given = {k: getattr(config, k) for k in wrong}
            raise ValueError(
                f"{_joined(given, '--', ' and ')} but the records in {config.input_file} were "
                f"made with {_joined(wrong, '', ' and ')} ({source}); "
                f"pass {_joined(wrong, '--', ' ')}"
            )


def _joined(values: dict, dashes: str, between: str) -> str:
    return between.join(f"{dashes}{k}={v}" for k, v in values.items())


def build_pretrainer(config: PretrainConfig, vocab: dict, precision: str) -> BertPretrainer:
    """Encoder (from init_checkpoint, or random from bert_config_file / preset sized to the vocab)
    with the MLM (+ NSP) heads, compiled. Call under the strategy's scope.

    Raises:
        ValueError: the encoder's vocab_size differs from the vocab file, or max_seq_length does
            not fit its position table.
    """
    if config.init_checkpoint:
        encoder = load_encoder(config.init_checkpoint, causal=config.ltr)
    else:
        cfg = (
            BertConfig.from_json_file(config.bert_config_file)
            if config.bert_config_file
            else BertConfig.from_preset(config.preset)
        )
        encoder = BertEncoder.from_config_object(cfg, vocab_size=len(vocab), causal=config.ltr)
    cfg = encoder.bert_config
    if cfg.vocab_size != len(vocab):
        raise ValueError(
            f"the encoder has vocab_size={cfg.vocab_size} but {config.vocab_file} has "
            f"{len(vocab)} tokens"
        )
    check_max_seq_length(config.max_seq_length, cfg.max_sequence_length, is_pair=True)
    model = BertPretrainer(encoder, use_nsp=config.use_nsp)
    model.build()
    model.compile(
        optimizer=create_optimizer(
            config.learning_rate,
            config.num_train_steps,
            config.num_warmup_steps,
            config.optimizer,
            gradient_accumulation_steps=config.gradient_accumulation_steps,
            loss_scale=precision == "mixed_float16",
        ),
        jit_compile=config.jit_compile,
    )
    return model


def make_train_dataset_fn(config: PretrainConfig, vocab: dict):
    """callable(epoch, skip) -> the batches of one chunk of `save_checkpoints_steps` optimizer
    steps (`chunk_batches`; resumable_fit)."""

    def make_train_dataset(epoch, skip):
        ds = make_pretraining_dataset(
            config.input_file,
            config.train_batch_size,
            config.max_seq_length,
            config.max_predictions_per_seq,
            is_training=True,
            seed=config.seed + epoch,
            dynamic_masking=config.dynamic_masking,
            vocab_size=len(vocab),
            mask_token_id=vocab["[MASK]"],
            cls_token_id=vocab["[CLS]"],
            sep_token_id=vocab["[SEP]"],
            masked_lm_prob=config.masked_lm_prob,
            use_nsp=config.use_nsp,
            verify=False,
        )
        return ds.skip(skip).take(chunk_batches(config) - skip)

    return make_train_dataset


def chunk_batches(config: PretrainConfig) -> int:
    """The batches of one `save_checkpoints_steps` chunk of optimizer steps: a checkpoint, a
    history.jsonl line and a TensorBoard point each; one shuffle of the records each."""
    return config.save_checkpoints_steps * config.gradient_accumulation_steps


def _history_callback(path: str, checkpoint, start: float, accumulation: int):
    def append(epoch, logs):
        record = {
            "step": checkpoint.step // accumulation,  # optimizer steps
            "seconds": round(time.time() - start, 1),
            **{k: float(v) for k, v in logs.items() if k != "learning_rate"},
        }
        # Appended by a whole rewrite: an object store cannot append, and a reader never sees
        # a half line.
        old = fileio.read_user_text(path) if fileio.exists(path) else ""
        fileio.write_text(path, old + fileio.jsonl_text([record]))

    return keras.callbacks.LambdaCallback(on_epoch_end=append)


# Settings a rerun into the same output_dir may change: where the directory is and how the same
# global batches are computed (devices, XLA). Every other flag, and every field of the encoder's
# BertConfig (`bert_config.<field>`), gives the checkpoints their meaning: the batches trained
# (input_file, vocab_file, train_batch_size, max_seq_length, max_predictions_per_seq,
# save_checkpoints_steps (one shuffle per chunk), masking, seed), the learning-rate schedule
# and optimizer state (learning_rate, num_train_steps, num_warmup_steps, optimizer,
# gradient_accumulation_steps,
# mixed_precision's loss scale), the model (preset, bert_config_file, init_checkpoint, no_nsp, ltr)
# and the encoder written (do_lower_case). To train further, start a new output_dir with
# --init_checkpoint=<this output_dir>/encoder.
HARMLESS_SETTINGS = frozenset({"output_dir", "strategy", "tpu", "jit_compile"})
# Flags added since output_dirs were first written, with the value an older config.json (which
# lacks them) stands for.
ADDED_SETTINGS = {"gradient_accumulation_steps": 1}
# Flags that config.json of an output_dir written before recorded under an older name.
RENAMED_FLAGS = {"random_seed": "seed"}


def recorded_settings(record: dict) -> dict:
    """config.json's dict ({"flags", "bert_config", ...}) -> the flat settings the rerun check
    compares: the flags (in today's names, `RENAMED_FLAGS`) and `bert_config.<field>`."""
    flag_settings = {RENAMED_FLAGS.get(k, k): v for k, v in record["flags"].items()}
    return flag_settings | {f"bert_config.{k}": v for k, v in record["bert_config"].items()}


def run_pretraining(config: PretrainConfig) -> dict:
    """Pretrains (resuming from output_dir's last checkpoint) and writes the files listed above.

    Every check comes before anything is written to output_dir, so a refused run leaves it as it
    was: records made with another max_seq_length / max_predictions_per_seq
    (`check_records_match`), a damaged shard, a model that does not fit the vocab, and a rerun
    into an output_dir holding a run with other settings (all but HARMLESS_SETTINGS;
    `resume_check.check_resume_settings`).

    Returns:
        metrics.json's dict: steps and resumed_from_step (optimizer steps), records,
        examples_seen (the batches trained times the recorded train_batch_size), seconds_this_run, final (last history line), history,
        encoder_dir.

    Raises:
        FileNotFoundError: no input shard. CorruptShardError: a damaged shard, by name.
        ValueError: see `check_records_match` and `build_pretrainer`; an output_dir holding a
            run with other settings.
    """
    start = time.time()
    shards = expand_file_patterns(config.input_file, what="pretraining shard")
    check_records_match(config, shards)
    keras.utils.set_random_seed(config.seed)
    precision = set_mixed_precision(config.mixed_precision)
    strategy = get_strategy(config.strategy, config.tpu)
    vocab = load_vocab(config.vocab_file)
    with strategy.scope():
        model = build_pretrainer(config, vocab, precision)
    record = {
        "flags": dataclasses.asdict(config),
        "bert_config": dataclasses.asdict(model.encoder.bert_config),
        "use_nsp": config.use_nsp,
        "causal": config.ltr,
    }
    settings = check_resume_settings(
        config.output_dir,
        recorded_settings(record),
        ignored=HARMLESS_SETTINGS,
        defaults=ADDED_SETTINGS,
        view=recorded_settings,
    )
    settings = settings or recorded_settings(
        record
    )  # what every checkpointed step was trained with
    num_records = sum(verify_shards(shards))  # a damaged shard fails here, by name
    # Every check passed: the first write to output_dir.
    fileio.makedirs(config.output_dir)
    fileio.write_json(fileio.join(config.output_dir, "config.json"), record)
    accumulation = config.gradient_accumulation_steps
    checkpoint, callbacks = standard_callbacks(
        config.output_dir,
        tensorboard_update_freq=config.save_checkpoints_steps,
        accumulation=accumulation,
    )
    history_path = fileio.join(config.output_dir, "history.jsonl")
    callbacks.append(_history_callback(history_path, checkpoint, start, accumulation))
    resumed_from = checkpoint.restore(model) // accumulation
    epochs = -(-config.num_train_steps // config.save_checkpoints_steps)
    batches = resumable_fit(
        model,
        make_train_dataset_fn(config, vocab),
        chunk_batches(config),
        epochs,
        checkpoint,
        callbacks,
        verbose=2,
        total_steps=config.num_train_steps * accumulation,
        accumulation=accumulation,
    )
    encoder_dir = save_encoder(
        model.encoder,
        fileio.join(config.output_dir, "encoder"),
        config.vocab_file,
        config.do_lower_case,
    )
    history = fileio.read_jsonl(history_path)
    metrics = {
        "steps": batches // accumulation,  # optimizer steps
        "resumed_from_step": resumed_from,
        "records": num_records,
        "examples_seen": batches * settings["train_batch_size"],
        "seconds_this_run": round(time.time() - start, 1),
        "final": history[-1] if history else {},
        "history": history,
        "encoder_dir": encoder_dir,
    }
    fileio.write_json(fileio.join(config.output_dir, "metrics.json"), metrics)
    return metrics
