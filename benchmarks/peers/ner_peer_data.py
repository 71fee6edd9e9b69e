"""Data and scoring for the PyTorch NER peer (`hf_ner_peer.py`) in the project venv, on OUR CoNLL
reader and OUR entity scorer, so that the peer and `recipes/run_ner.py` train on the same sentences
and tags and are scored the same way (README.md here):

    # write: train.json, valid.json, test.json (JSON lines {"tokens", "ner_tags"}) + data_info.json
    python -m benchmarks.peers.ner_peer_data --data_dir=$KERAS_BERT_DATA_DIR/conll2003 \
        --output_dir=runs/ner_peer/data

    # score: the peer's predictions for one split -> metrics JSON
    python -m benchmarks.peers.ner_peer_data --mode=score --gold_file=runs/ner_peer/data/valid.json \
        --predictions_file=runs/ner_peer/out/predictions_valid.json \
        --metrics_file=runs/ner_peer/out/metrics_valid.json [--max_examples=N]
"""

import json
import pathlib

from absl import app, flags

from benchmarks import common
from keras_bert import cli, fileio
from keras_bert.data import conll
from keras_bert.metrics.ner import entity_scores

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The flags, defined when the program runs, never at import (tests import `score`)."""
    flags.DEFINE_enum("mode", "write", ["write", "score"], "Write the split files, or score them.")
    flags.DEFINE_string("data_dir", None, "write: CoNLL-2003 dir: train.txt, valid.txt, test.txt.")
    flags.DEFINE_string("output_dir", None, "write: where train.json, valid.json, test.json go.")
    flags.DEFINE_string("gold_file", None, "score: a split file written by --mode=write.")
    flags.DEFINE_string("predictions_file", None, "score: the peer's predictions for that split.")
    flags.DEFINE_integer("max_examples", None, "score: only the first N gold sentences.")
    flags.DEFINE_string("metrics_file", None, "score: output (default: metrics_<gold stem>.json).")
    common.bounds(max_examples=1)
    common.existing("data_dir", "gold_file", "predictions_file")


SCORE_KEYS = ("precision", "recall", "f1", "accuracy")  # what families.ner.ner_scores keeps


def write_splits(data_dir, output_dir) -> dict:
    """Writes `<split>.json` for train, valid, test and data_info.json; returns the latter."""
    splits = conll.read_conll_splits(data_dir)  # read whole before anything is written
    fileio.makedirs(output_dir)
    for name, sentences in splits.items():
        rows = ({"tokens": list(s.words), "ner_tags": list(s.tags)} for s in sentences)
        fileio.write_jsonl(fileio.join(output_dir, f"{name}.json"), rows)
    info = {
        "source": "keras_bert.data.conll.read_conll_splits (IOB2)",
        "splits": {name: conll.counts(sentences) for name, sentences in splits.items()},
        "label_names": conll.label_names(splits["train"]),
    }
    fileio.write_json(fileio.join(output_dir, "data_info.json"), info)
    return info


def sentences(path, keys: tuple, limit=None) -> list[dict]:
    """The JSON lines of `path` (the first `limit`); ValueError: a line that is not an object
    with each of `keys`, named by its sentence index."""
    rows = fileio.read_jsonl(str(path))[: limit or None]
    for i, row in enumerate(rows):
        for key in keys:
            if not isinstance(row, dict) or key not in row:
                raise ValueError(f'{path}: sentence {i} has no "{key}"')
    return rows


def score(gold_file, predictions_file, max_examples=None) -> dict:
    """Entity-level scores of the peer's predictions against the gold split file (README.md here).
    Raises ValueError on different numbers of sentences, a line without its fields, or a line
    whose tokens differ."""
    gold = sentences(gold_file, ("tokens", "ner_tags"), max_examples)
    predicted = sentences(predictions_file, ("tokens", "pred_tags"))
    if len(predicted) != len(gold):
        raise ValueError(
            f"{predictions_file}: {len(predicted)} sentences, but {len(gold)} in "
            f"{gold_file}" + (f" (first {max_examples})" if max_examples else "")
        )
    for i, (g, p) in enumerate(zip(gold, predicted)):
        if p["tokens"] != g["tokens"]:
            raise ValueError(f"sentence {i}: predicted tokens differ from the gold file's")
    scores = entity_scores([g["ner_tags"] for g in gold], [p["pred_tags"] for p in predicted])
    return {
        **{k: scores[k] for k in SCORE_KEYS},
        "sentences": len(gold),
        "words": sum(len(g["tokens"]) for g in gold),
        "cut_words": sum(int(p.get("cut_words", 0)) for p in predicted),
        "gold_file": str(gold_file),
        "predictions_file": str(predictions_file),
        "entity_scores": scores,
    }


def main(argv):
    del argv
    needed = (
        ("data_dir", "output_dir") if FLAGS.mode == "write" else ("gold_file", "predictions_file")
    )
    if not all(getattr(FLAGS, name) for name in needed):
        raise app.UsageError(f"--mode={FLAGS.mode} needs --{needed[0]} and --{needed[1]}")
    if FLAGS.mode == "write":
        try:
            info = write_splits(FLAGS.data_dir, FLAGS.output_dir)
        except (FileNotFoundError, ValueError) as e:  # no CoNLL files there, or not CoNLL's
            cli.fail_usage(str(e))
        print(json.dumps(info["splits"]), info["label_names"])
        return
    try:
        metrics = score(FLAGS.gold_file, FLAGS.predictions_file, FLAGS.max_examples)
    except ValueError as e:  # predictions that do not line up with the gold file
        cli.fail_usage(str(e))
    default = f"metrics_{pathlib.PurePath(FLAGS.gold_file).stem}.json"  # beside the predictions
    path = FLAGS.metrics_file or fileio.join(fileio.parent(FLAGS.predictions_file), default)
    fileio.write_json(path, metrics)
    print(json.dumps({k: metrics[k] for k in SCORE_KEYS + ("sentences", "words", "cut_words")}))
    print(f"wrote {path}")


if __name__ == "__main__":
    define_flags()
    cli.run(main)
