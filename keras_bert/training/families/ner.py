"""NER family: CoNLL-2003 named entity recognition (BERT section 4.3 / 5.3).

Reads train / valid / test (`keras_bert.data.conll`) and builds a `TokenClassifier` (fine-tuned,
or a frozen encoder with a BiLSTM for `--feature_mode`, the paper's table 7). Training rows are
windows of a sentence's word pieces (`TokenClassifier.training_windows`); dev entity F1 (seqeval)
picks the best evaluation; the kept weights are scored on dev and test. Writes `labels.json` (tag
names in id order) beside the driver's files.
"""

from __future__ import annotations

import dataclasses

from keras_bert.config import check_max_seq_length
from keras_bert.data import conll
from keras_bert.metrics.ner import entity_scores
from keras_bert.tasks.token_classifier import FEATURE_MODES, IGNORE_LABEL, TokenClassifier
from keras_bert.training import model_setup
from keras_bert.training.args import FinetuneArgs
from keras_bert.training.argument_set import AT_LEAST_ONE, arg, args_dataclass
from keras_bert import fileio
from keras_bert.training.family import Family


@args_dataclass
class NerArgs(FinetuneArgs):
    """`FinetuneArgs` plus the data and head of a NER run (sizes in sentences and pieces)."""

    FLAG_TABLE = "ner"

    # Length-grouped batches cost NER about 1 dev F1 on CoNLL-2003 at the documented budget
    # (docs/results/accuracy.md, "CoNLL-2003 and length grouping"): batches of random lengths.
    FAMILY_DEFAULTS = {"group_by_length": False}

    data_dir: str = arg(
        help="Directory holding train.txt, valid.txt, test.txt (CoNLL format).", required=True
    )
    doc_stride: int | None = arg(
        None, "Pieces between window starts (default: half a window).", rule=AT_LEAST_ONE
    )
    feature_mode: str | None = arg(
        None,
        "Freeze the encoder and train a BiLSTM on this feature instead (the paper's table 7).",
        choices=FEATURE_MODES,
    )
    lstm_units: int = arg(768, "BiLSTM units per direction (--feature_mode).", rule=AT_LEAST_ONE)
    lstm_layers: int = arg(2, "BiLSTM layers (--feature_mode).", rule=AT_LEAST_ONE)

    def validate(self) -> None:
        super().validate()
        if self.max_seq_length < 3:  # a window holds max_seq_length - 2 pieces: at least one
            raise ValueError(
                f"--max_seq_length must be >= 3 ([CLS], a piece, [SEP]), got {self.max_seq_length}"
            )


@dataclasses.dataclass
class NerData:
    train: list
    dev: list
    test: list
    label_names: list


def ner_scores(task: TokenClassifier, sentences, batch_size: int) -> dict:
    """Entity precision / recall / F1 (seqeval) of `task` on `sentences` (one tag per word)."""
    predicted = task.predict_word_lists([s.words for s in sentences], batch_size=batch_size)
    scores = entity_scores([s.tags for s in sentences], predicted)
    return {k: scores[k] for k in ("precision", "recall", "f1", "accuracy")}


class Ner(Family):
    name = "ner"
    Args = NerArgs
    model_name = "conll_ner"
    monitor = "f1"
    labels_per_position = True
    label_padding = IGNORE_LABEL  # a static-shape batch's filler tokens count as padding

    def read(self, args, preprocessor) -> NerData:
        splits = conll.read_conll_splits(args.data_dir)
        cut = args.max_eval_examples or None
        return NerData(
            splits["train"][: args.max_train_examples or None],
            splits["valid"][:cut],
            splits["test"][:cut],
            conll.label_names(splits["train"]),
        )

    def build_task(self, args, data, preprocessor) -> TokenClassifier:
        encoder = model_setup.build_encoder(args, len(preprocessor.vocabulary))
        check_max_seq_length(args.max_seq_length, encoder.bert_config.max_sequence_length)
        return TokenClassifier(
            encoder,
            data.label_names,
            dropout_rate=args.dropout_rate,
            doc_stride=args.doc_stride,
            feature_mode=args.feature_mode,
            lstm_units=args.lstm_units,
            lstm_layers=args.lstm_layers,
            preprocessor=preprocessor,
        )

    def train_arrays(self, task, data):
        return task.training_windows([s.words for s in data.train], [s.tags for s in data.train])

    def evaluator(self, args, data):
        return lambda task: ner_scores(task, data.dev, args.eval_batch_size)

    def finish(self, args, data, task, out) -> dict:
        fileio.write_json(
            fileio.join(out, "labels.json"),
            {"task_type": task.task_type, "labels": task.label_names},
        )
        return {
            "dev": ner_scores(task, data.dev, args.eval_batch_size),
            "test": ner_scores(task, data.test, args.eval_batch_size) if data.test else None,
            "train_sentences": len(data.train),
            "label_names": task.label_names,
        }

    def headline(self, summary: dict) -> dict:
        return {
            "dev f1": summary["dev"].get("f1"),
            "test f1": (summary["test"] or {}).get("f1"),
            "steps": summary["runs"][summary["best_run"]]["steps"],
        }

    def export_config(self, summary: dict) -> dict:
        return {"dev": summary["dev"], "test": summary["test"]}


FAMILY = Ner()
