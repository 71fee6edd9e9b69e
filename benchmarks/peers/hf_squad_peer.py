"""The Hugging Face / PyTorch SQuAD peer of `recipes/run_squad.py` (runs in a torch venv, never
imports tensorflow or keras_bert): transformers' run_qa.py and utils_qa.py semantics, without
`datasets`/`evaluate` (README.md here: features, post-processing, what differs from ours).

    python -m benchmarks.peers.squad_peer_data --input_file=dev-v1.1.json --holdout_fraction=0.5 \
        --output_dir=runs/squad_peer/data
    taskset -c 1 /path/to/torchenv/bin/python benchmarks/peers/hf_squad_peer.py --model_dir=CKPT \
        --train_file=runs/squad_peer/data/train.json \
        --validation_file=runs/squad_peer/data/heldout.json --learning_rate=1e-4 \
        --num_train_epochs=1 --warmup_ratio=0.1 --bf16 --threads=1 --output_dir=runs/squad_peer/v1
    python -m benchmarks.peers.squad_peer_data --mode=score --input_file=dev-v1.1.json \
        --holdout_fraction=0.5 --predictions_dir=runs/squad_peer/v1

Writes to --output_dir: predictions.json, null_odds.json and best_non_null_predictions.json
(v2.0), peer_metrics.json (train/predict seconds, windows, windows per second). Without
--train_file it predicts with --model_dir as it is.
"""

from __future__ import annotations

import collections
import contextlib
import math
import sys
import time

import numpy as np
import torch
import transformers

import hf_peer_common  # this folder's, beside the script (run as one)

# the flags peer_metrics.json records under their own names
RECORDED_FLAGS = (
    "bf16 max_seq_length doc_stride learning_rate num_train_epochs warmup_ratio weight_decay seed "
    "version_2_with_negative"
).split()


def parse_args(argv=None):
    return hf_peer_common.parse_args(
        __doc__,
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
            hf_peer_common.MAX_STEPS,
        ],
        seq=384,
        eval_batch=32,
        epochs=1,
    )


def read_flat(path, limit=None) -> list[dict]:
    """Records of a flat SQuAD JSON (`{"data": [{"id", "context", "question", "answers"}]}`)."""
    records = hf_peer_common.fileio.read_json(str(path))["data"]
    return records[:limit]


def tokenize(tokenizer, records, args):
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


def train_features(tokenizer, records, args) -> dict:
    """Windows with start/end labels (run_qa.py `prepare_train_features`)."""
    enc = tokenize(tokenizer, records, args)
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


def eval_features(tokenizer, records, args):
    """(model inputs, per-window example index, per-window offsets with None outside the
    context) (run_qa.py `prepare_validation_features`)."""
    enc = tokenize(tokenizer, records, args)
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


def autocast(enabled: bool):
    return torch.autocast("cpu", dtype=torch.bfloat16) if enabled else contextlib.nullcontext()


def main(argv=None):
    args = parse_args(argv)
    out = hf_peer_common.start(args, interop_threads=args.threads)
    tokenizer, model = hf_peer_common.load(args, transformers.AutoModelForQuestionAnswering)
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
        train_set = Windows(train_features(tokenizer, records, args))
        metrics["train_feature_seconds"] = time.perf_counter() - t0
        print(f"train: {len(records)} questions -> {len(train_set)} windows", flush=True)
        trainer = hf_peer_common.trainer(
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
        metrics["optimizer"] = hf_peer_common.optimizer_name(trainer)
        result, seconds = hf_peer_common.train(trainer, args)
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
        inputs, window_example, offsets = eval_features(tokenizer, records, args)
        loader = torch.utils.data.DataLoader(
            Windows(inputs), batch_size=args.per_device_eval_batch_size
        )
        model.eval()
        t1 = time.perf_counter()
        starts, ends = [], []
        with torch.inference_mode(), autocast(args.bf16):
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
            hf_peer_common.fileio.write_json(str(out / f"{name}.json"), values, indent=1)
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
    hf_peer_common.write_results(out, "peer_metrics.json", metrics)


if __name__ == "__main__":
    sys.exit(main())
