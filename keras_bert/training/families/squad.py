"""SQuAD family: span question answering on SQuAD v1.1 / v2.0 (BERT section 4.2 / 4.3).

Reads the SQuAD JSON files (`keras_bert.data.squad`; `--holdout_fraction` splits both files by
article title, so training and prediction never share an article), builds a
`SpanQuestionAnswerer`, trains on windows of `--max_seq_length` pieces `--doc_stride` apart, and
at the end predicts `--predict_file`: predictions.json, nbest_predictions.json, null_odds.json
(null score - best span score per question) and the official EM / F1 (v2.0: HasAns / NoAns and
the best null threshold) in metrics.json.

The prediction file is scored once, after training, as google-research/bert's `run_squad.py`
does: the kept weights are the last ones. Given `--evaluations_per_epoch` or
`--early_stopping_patience`, it is also scored during training and the best F1 is kept; it is
then a dev set, no longer a held-out one.
"""

from __future__ import annotations

import dataclasses
import time

from keras_bert.config import INPUT_NAMES
from keras_bert.data import squad
from keras_bert.metrics import squad as squad_eval
from keras_bert.tasks.span_question_answerer import SpanQuestionAnswerer
from keras_bert.training import model_setup
from keras_bert.training.args import FinetuneArgs
from keras_bert.training.argument_set import A_FRACTION, AT_LEAST_ONE, Rule, arg, args_dataclass
from keras_bert import fileio
from keras_bert.training.family import Family


@args_dataclass
class SquadArgs(FinetuneArgs):
    """`FinetuneArgs` plus the SQuAD files and windows (sizes in questions and pieces)."""

    FLAG_TABLE = "squad"

    FAMILY_DEFAULTS = {"max_seq_length": squad.MAX_SEQ_LENGTH, "eval_batch_size": 32}

    train_file: str | None = arg(None, "SQuAD JSON to train on.", path=True)
    predict_file: str | None = arg(None, "SQuAD JSON to predict and score.", path=True)
    version_2_with_negative: bool = arg(False, "SQuAD v2.0: questions may have no answer.")
    holdout_fraction: float | None = arg(
        None,
        "Split both files by article title: train on the "
        "first titles, predict on the last fraction (disjoint "
        "articles).",
        rule=A_FRACTION,
    )
    doc_stride: int = arg(squad.DOC_STRIDE, "Context pieces between window starts.")
    max_query_length: int = arg(squad.MAX_QUERY_LENGTH, "Question pieces kept.")
    n_best_size: int = arg(20, "Start/end positions tried per window.", rule=AT_LEAST_ONE)
    max_answer_length: int = arg(30, "Longest answer, in pieces.", rule=AT_LEAST_ONE)
    null_score_diff_threshold: float = arg(
        0.0,
        "v2.0: predict no answer when null score - best span score exceeds this.",
        rule=Rule(lambda v: v == v, "a number, not NaN"),  # NaN would never answer "no answer"
    )
    null_threshold_dev_fraction: float | None = arg(
        None,
        "v2.0: hold out this fraction of the training articles (by title) as a dev split; "
        "after training, the best-F1 null threshold on it (one that gives that F1 when "
        "applied) is stored in the kept task (best_model.keras, the export) in place of "
        "--null_score_diff_threshold.",
        rule=A_FRACTION,
    )

    def validate(self) -> None:
        super().validate()
        if not self.train_file and not self.predict_file:
            raise ValueError("give --train_file, --predict_file or both")
        for name in ("train_file", "predict_file"):
            path = getattr(self, name)
            if path and not fileio.isfile(path):
                raise ValueError(f"--{name}={path}: no such file")
        if self.null_threshold_dev_fraction is not None and (
            "null_score_diff_threshold" in self.given()
        ):
            raise ValueError(
                "give --null_score_diff_threshold or --null_threshold_dev_fraction (which "
                "chooses it), not both"
            )
        try:
            squad.check_lengths(self.max_seq_length, self.doc_stride, self.max_query_length)
        except ValueError as e:
            raise ValueError(f"--{e}") from None


@dataclasses.dataclass
class SquadData:
    train: list
    predict: list
    predict_features: list | None = None
    dev: list = dataclasses.field(default_factory=list)  # chooses the v2.0 null threshold


def load_examples(args: SquadArgs) -> tuple[list, list, list]:
    """(train, predict, dev) examples: split by title and cut to the max_* flags; dev (the
    last --null_threshold_dev_fraction of the training titles) is empty unless it is given."""
    v2 = args.version_2_with_negative
    train = squad.read_squad_examples(args.train_file, v2) if args.train_file else []
    predict = squad.read_squad_examples(args.predict_file, v2) if args.predict_file else []
    if args.holdout_fraction:
        train = squad.split_by_title(train, args.holdout_fraction)[0]
        predict = squad.split_by_title(predict, args.holdout_fraction)[1]
    dev = []
    if args.null_threshold_dev_fraction:
        train, dev = squad.split_by_title(train, args.null_threshold_dev_fraction)
        if not train or not dev:
            raise ValueError(
                f"--null_threshold_dev_fraction={args.null_threshold_dev_fraction} leaves "
                f"{len(train)} training and {len(dev)} dev questions; each needs an article"
            )
    split = {"held-out": predict if args.holdout_fraction else [], "dev": dev}
    for name, other in split.items():
        overlap = {e.title for e in train} & {e.title for e in other}
        if overlap:
            raise ValueError(f"training and {name} articles overlap: {sorted(overlap)[:3]}")
    cut = args.max_eval_examples
    return train[: args.max_train_examples], predict[:cut], dev[:cut]


def predict_and_score(task, args, data: SquadData, out: str | None = None) -> dict:
    """The official metrics of `task` on the prediction examples, with timings; with `out`,
    also writes predictions.json, nbest_predictions.json and null_odds.json there."""
    start = time.perf_counter()
    if data.predict_features is None:
        data.predict_features = task.features(data.predict, progress=out is not None)
    features = data.predict_features
    answers = task.answer(
        data.predict, features, task.window_logits(features, args.eval_batch_size)
    )
    seconds = time.perf_counter() - start
    if out is not None:
        fileio.write_json(
            fileio.join(out, "predictions.json"), {q: a["text"] for q, a in answers.items()}
        )
        fileio.write_json(
            fileio.join(out, "nbest_predictions.json"), {q: a["nbest"] for q, a in answers.items()}
        )
        fileio.write_json(
            fileio.join(out, "null_odds.json"), {q: a["null_odds"] for q, a in answers.items()}
        )
    metrics = squad_eval.evaluate(
        squad_eval.dataset_of(data.predict), answers, args.version_2_with_negative
    )
    return metrics | {
        "predict_examples": len(data.predict),
        "predict_windows": len(features),
        "predict_seconds": seconds,
        "predict_questions_per_second": len(data.predict) / max(seconds, 1e-9),
    }


class Squad(Family):
    name = "squad"
    Args = SquadArgs
    epochs = 2.0
    model_name = "squad"
    monitor = "f1"

    def read(self, args, preprocessor) -> SquadData:
        train, predict, dev = load_examples(args)
        return SquadData(train, predict, dev=dev)

    def trains(self, data) -> bool:
        return bool(data.train)

    def build_task(self, args, data, preprocessor) -> SpanQuestionAnswerer:
        encoder = model_setup.build_encoder(args, len(preprocessor.vocabulary))
        return SpanQuestionAnswerer(
            encoder,
            preprocessor,
            args.version_2_with_negative,
            args.doc_stride,
            args.max_query_length,
            args.n_best_size,
            args.max_answer_length,
            args.null_score_diff_threshold,
        )

    def train_arrays(self, task, data):
        arrays = squad.stack_features(
            task.features(data.train, is_training=True, progress=True), with_labels=True
        )
        return (
            {k: arrays[k] for k in INPUT_NAMES},
            {"start_logits": arrays["start_positions"], "end_logits": arrays["end_positions"]},
        )

    def evaluator(self, args, data):
        asked = {"evaluations_per_epoch", "early_stopping_patience"} & set(args.given())
        if not asked or not data.predict:
            return None
        return lambda task: predict_and_score(task, args, data)

    def tune(self, args, data, task) -> dict:
        """With a dev split: the sweep's best-F1 null threshold on it (`squad.best_threshold`),
        set on the task; recorded with the official F1 (the best) and EM of the dev answers
        at that threshold."""
        if not data.dev:
            return {}
        features = task.features(data.dev)
        answers = task.answer(
            data.dev, features, task.window_logits(features, args.eval_batch_size)
        )
        dataset = squad_eval.dataset_of(data.dev)
        threshold = squad_eval.evaluate(dataset, answers, True)["best_f1_thresh"]
        task.null_score_diff_threshold = threshold
        at = squad_eval.official_scores(
            dataset, squad_eval.with_threshold(answers, threshold), True
        )
        return {
            "null_score_diff_threshold": threshold,
            "null_threshold_dev": {
                "questions": len(data.dev),
                "articles": len({e.title for e in data.dev}),
                "best_f1": at["f1"],
                "exact": at["exact_match"],
            },
        }

    def finish(self, args, data, task, out) -> dict:
        metrics = {
            "version_2_with_negative": args.version_2_with_negative,
            "train_examples": len(data.train),
        }
        if data.predict:
            metrics |= predict_and_score(task, args, data, out)
        return metrics

    def headline(self, summary: dict) -> dict:  # v1.1 says exact_match, v2.0 exact
        steps = summary["runs"][summary["best_run"]]["steps"] if summary["runs"] else 0
        return {
            name: summary[name] for name in ("exact_match", "exact", "f1") if name in summary
        } | {"train_steps": steps}

    def export_config(self, summary: dict) -> dict:
        return {
            "eval_metrics": {
                k: v
                for k, v in summary.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            }
        }


FAMILY = Squad()
