"""The Hugging Face / PyTorch peer of `recipes/run_ner.py` (CoNLL-2003 NER), in the torch venv.

transformers' run_ner.py semantics, predicting one tag per word of every sentence (README.md
here: what differs from the script and from our recipe); data and scorer are ner_peer_data.py's.

    python -m benchmarks.peers.ner_peer_data --data_dir=$KERAS_BERT_DATA_DIR/conll2003 --output_dir=D
    taskset -c 1 <torch venv>/bin/python benchmarks/peers/hf_ner_peer.py --model_dir=$MODEL \
        --train_file=D/train.json --validation_file=D/valid.json --test_file=D/test.json \
        --max_seq_length=128 --per_device_train_batch_size=32 --learning_rate=5e-5 \
        --num_train_epochs=3 --bf16 --threads=1 --output_dir=OUT

Writes to --output_dir: `predictions_valid.json` / `predictions_test.json` (JSON lines
`{"tokens", "pred_tags", "cut_words"}`; score them with `python -m benchmarks.peers.ner_peer_data
--mode=score`), `peer_timing.json` (train seconds, sentences per second = train sentences x
epochs / train seconds, steps, settings, versions) and `labels.json`.
"""

from __future__ import annotations

import json
import time

import numpy as np
import torch
import transformers

import hf_peer_common  # this folder's, beside the script (run as one)

IGNORE_LABEL = -100
OUTSIDE = "O"


def parse_args(argv=None):
    return hf_peer_common.parse_args(
        __doc__,
        argv,
        [
            ("train_file", hf_peer_common.REQUIRED, "JSON lines {tokens, ner_tags}."),
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


def read_jsonl(path, limit=None) -> list[dict]:
    rows = hf_peer_common.fileio.read_jsonl(str(path))
    return rows[:limit] if limit else rows


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
    return hf_peer_common.features(enc, labels), word_ids


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


def main(argv=None):
    args = parse_args(argv)
    out = hf_peer_common.start(args, interop_threads=1)
    full_train = read_jsonl(args.train_file)
    label_list = get_label_list(full_train)  # from the whole train file, as run_ner.py does
    train = full_train[: args.max_train_examples] if args.max_train_examples else full_train
    evals = {
        name: read_jsonl(path, args.max_eval_examples)
        for name, path in (("valid", args.validation_file), ("test", args.test_file))
        if path
    }
    tokenizer, model = hf_peer_common.load(
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
    label_to_id = hf_peer_common.set_labels(model, label_list, out)

    train_features, _ = tokenize_and_align_labels(
        tokenizer, train, label_to_id, args.max_seq_length
    )
    trainer = hf_peer_common.trainer(
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
    result, train_seconds = hf_peer_common.train(trainer, args)
    hook.remove()
    if args.save_model:
        trainer.save_model(str(out / "model"))

    predictions = {}
    for name, sentences in evals.items():
        records, info = predict_split(
            trainer, tokenizer, sentences, label_to_id, label_list, args.max_seq_length
        )
        hf_peer_common.fileio.write_jsonl(str(out / f"predictions_{name}.json"), records)
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
        "settings": hf_peer_common.settings(
            args, trainer, classifier_output_dtype=seen_dtype.get("dtype")
        ),
        "versions": hf_peer_common.versions(),
    }
    summary = ("train_seconds", "train_sentences", "sentences_per_second", "steps")
    hf_peer_common.write_results(out, "peer_timing.json", timing, summary)


if __name__ == "__main__":
    main()
