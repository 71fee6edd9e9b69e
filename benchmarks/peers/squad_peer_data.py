"""Data and scoring for the PyTorch SQuAD peer (`hf_squad_peer.py`) in the project venv, on OUR
split and OUR scorer, so that the peer and `recipes/run_squad.py --holdout_fraction=F` train on the
same questions and are scored on the same questions by the same official evaluators (README.md):

    # split: train.json (first titles) and heldout.json (last F of the titles)
    python -m benchmarks.peers.squad_peer_data --input_file=dev-v1.1.json --holdout_fraction=0.5 \
        --output_dir=runs/squad_peer/data [--version_2_with_negative]

    # score: the peer's predictions for the held-out part -> metrics.json
    python -m benchmarks.peers.squad_peer_data --mode=score --input_file=dev-v1.1.json \
        --holdout_fraction=0.5 --predictions_dir=runs/squad_peer/v1 [--version_2_with_negative] \
        [--max_eval_examples=N]
"""

import json

from absl import app, flags, logging

from benchmarks import common
from keras_bert import cli, fileio
from keras_bert.metrics import squad as squad_eval
from keras_bert.training.families import squad as squad_family

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The flags, defined when the program runs, never at import (tests/benchmarks/test_imports)."""
    flags.DEFINE_enum("mode", "split", ["split", "score"], "Write the split, or score predictions.")
    flags.DEFINE_string("input_file", None, "SQuAD v1.1 / v2.0 JSON (split by article title).")
    flags.DEFINE_float("holdout_fraction", 0.5, "Fraction of the titles (the last ones) held out.")
    flags.DEFINE_boolean(
        "version_2_with_negative", False, "SQuAD v2.0: questions may have no answer."
    )
    flags.DEFINE_string("output_dir", None, "split: where train.json and heldout.json go.")
    flags.DEFINE_string("predictions_dir", None, "score: the peer's --output_dir.")
    flags.DEFINE_integer("max_eval_examples", None, "score: only the first N held-out questions.")
    flags.DEFINE_string(
        "metrics_file", None, "score: output (default: predictions_dir/metrics.json)."
    )
    flags.mark_flag_as_required("input_file")
    common.bounds(max_eval_examples=1)
    common.existing("input_file", "predictions_dir")


def split_examples(input_file, holdout_fraction, v2, max_eval_examples=None):
    """(train, held_out) `SquadExample`s: `families.squad.load_examples` on `input_file` given as
    both files, as `run_squad.py --holdout_fraction` reads them (ValueError: a holdout_fraction
    outside (0, 1), a missing file, overlapping articles)."""
    args = squad_family.SquadArgs(
        output_dir="unused",  # required by SquadArgs; load_examples writes nothing
        train_file=str(input_file),
        predict_file=str(input_file),
        holdout_fraction=holdout_fraction,
        version_2_with_negative=v2,
        max_eval_examples=max_eval_examples,
    )
    return squad_family.load_examples(args)[:2]


def write_split(input_file, holdout_fraction, v2, output_dir) -> dict:
    """Writes train.json and heldout.json (run_qa.py's flat layout) and split.json; returns the
    counts."""
    train, held_out = split_examples(input_file, holdout_fraction, v2)
    usable = [e for e in train if e.is_impossible or e.answers]
    if len(usable) != len(train):
        logging.warning(
            "%d answerable training questions have no usable answer; left out (our "
            "recipe skips them too)",
            len(train) - len(usable),
        )
    fileio.makedirs(output_dir)
    for name, part in (("train.json", usable), ("heldout.json", held_out)):
        data = []
        for e in part:
            answers = {"text": [a[0] for a in e.answers], "answer_start": [a[1] for a in e.answers]}
            record = {"id": e.qas_id, "title": e.title, "context": e.context}
            data.append(record | {"question": e.question, "answers": answers})
        fileio.write_json(fileio.join(output_dir, name), {"data": data}, indent=None)
    counts = {
        "train_questions": len(usable),
        "heldout_questions": len(held_out),
        "train_titles": len({e.title for e in train}),
        "heldout_titles": len({e.title for e in held_out}),
    }
    split = {"input_file": fileio.basename(str(input_file)), "holdout_fraction": holdout_fraction}
    fileio.write_json(
        fileio.join(output_dir, "split.json"), counts | split | {"version_2_with_negative": v2}
    )
    return counts


def score(input_file, holdout_fraction, v2, predictions_dir, max_eval_examples=None) -> dict:
    """The peer's peer_metrics.json (if any) and the official metrics of its predictions on the
    held-out questions (our scorer). Raises ValueError unless the predictions are exactly the
    held-out questions."""
    held_out = split_examples(input_file, holdout_fraction, v2, max_eval_examples)[1]

    def read(name):
        path = fileio.join(predictions_dir, name)
        if not fileio.exists(path):
            raise ValueError(f"{path}: not found (did the peer finish?)")
        return fileio.read_json(path)

    predictions = read("predictions.json")
    ids = [e.qas_id for e in held_out]
    if set(predictions) != set(ids):
        raise ValueError(
            f"predictions.json has {len(predictions)} questions, the held-out part "
            f"{len(ids)}; {len(set(ids) - set(predictions))} missing, "
            f"{len(set(predictions) - set(ids))} not held out (same "
            "--max_eval_examples as the peer's?)"
        )
    answers = {q: {"text": predictions[q]} for q in ids}
    if v2:
        null_odds, non_null = read("null_odds.json"), read("best_non_null_predictions.json")
        for q in ids:
            answers[q] |= {"best_non_null_text": non_null[q], "null_odds": float(null_odds[q])}
    metrics = squad_eval.evaluate(squad_eval.dataset_of(held_out), answers, v2)
    peer = fileio.exists(fileio.join(predictions_dir, "peer_metrics.json"))
    return (
        (read("peer_metrics.json") if peer else {})
        | metrics
        | {"version_2_with_negative": v2, "scored_examples": len(held_out)}
    )


def main(argv):
    del argv
    # Both modes must draw the same held-out questions: the same file, fraction and version.
    split = (FLAGS.input_file, FLAGS.holdout_fraction, FLAGS.version_2_with_negative)
    needed = "output_dir" if FLAGS.mode == "split" else "predictions_dir"
    if not getattr(FLAGS, needed):
        raise app.UsageError(f"--{needed} is required with --mode={FLAGS.mode}")
    try:
        if FLAGS.mode == "split":
            result = write_split(*split, FLAGS.output_dir)
        else:
            result = score(*split, FLAGS.predictions_dir, FLAGS.max_eval_examples)
    except ValueError as e:  # a holdout fraction out of range, predictions missing or not matching
        cli.fail_usage(str(e))
    if FLAGS.mode == "score":
        path = FLAGS.metrics_file or fileio.join(FLAGS.predictions_dir, "metrics.json")
        fileio.write_json(path, result)
    print(json.dumps(result, indent=2, sort_keys=True))


if __name__ == "__main__":
    define_flags()
    cli.run(main)
