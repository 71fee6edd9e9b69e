"""A labelled held-out set as every evaluator takes it (`EvalData`), counted with the model's own
WordPiece tokenizer (`token_statistics`: pieces, truncation, [UNK]).

Text classification and regression fill `examples` (InputExample: guid, text_a, text_b) and `gold`;
the other task kinds (`kinds/token_classification.py`, `kinds/span_question_answering.py`,
`kinds/multiple_choice.py`) also give `inputs` (the serving signature's inputs per row) and
`reference` (their own gold: tags, answers, choices).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from keras_bert.tokenization.bert_preprocessor import BertPreprocessor

TOKEN_COUNT_CHUNK = 1024


class DataError(ValueError):
    """The held-out file does not fit the model (unknown label, missing column, empty file)."""


@dataclasses.dataclass
class EvalData:
    """A labelled held-out set ready for a model.

    Attributes:
        path: str, the file.
        examples: list of InputExample.
        gold: int64 [N] label ids (classification) or float64 [N] scores (regression).
        gold_names: list of N str (classification) or None.
        slice_values: list of N str from the user's slice column, or None.
        slice_column: its name, or None.
        token_lengths: int [N] WordPiece tokens with [CLS]/[SEP] before truncation.
        truncated: bool [N], token_lengths > max_seq_length.
        unknown: int [N] [UNK] pieces per example (None: not counted).
        inputs: the serving signature's inputs, name -> list of N rows (None: "text" and, for a
            pair, "text_b" from the examples).
        reference: a task family's own gold (NER tags, SQuAD examples, choice ids), or None.
    """

    path: str
    examples: list
    gold: np.ndarray
    gold_names: list | None
    slice_values: list | None
    slice_column: str | None
    token_lengths: np.ndarray
    truncated: np.ndarray
    unknown: np.ndarray | None = None
    inputs: dict | None = None
    reference: dict | None = None

    @property
    def texts(self) -> list[str]:
        return [e.text_a for e in self.examples]

    @property
    def texts_b(self) -> list[str] | None:
        return None if self.examples[0].text_b is None else [e.text_b for e in self.examples]

    def model_inputs(self, is_pair: bool) -> dict:
        """Signature input name -> list of N rows (`inputs`, else "text" / "text_b")."""
        if self.inputs is not None:
            return self.inputs
        out = {"text": self.texts}
        if is_pair:
            out["text_b"] = self.texts_b
        return out

    @property
    def pieces(self) -> np.ndarray:
        """int [N] WordPiece pieces without [CLS] / [SEP]."""
        return self.token_lengths - (2 if self.texts_b is None else 3)

    @property
    def joined_texts(self) -> list[str]:
        """Each example's text; a pair's two segments joined by a space."""
        b = self.texts_b
        return self.texts if b is None else [f"{x} {y}" for x, y in zip(self.texts, b)]


def token_counts(vocabulary, do_lower_case, max_seq_length, texts, texts_b=None):
    """(token_lengths int [N], truncated bool [N]) with the model's own WordPiece vocabulary.

    Counts include [CLS] and [SEP] (and the second [SEP] of a pair), before truncation.
    """
    return token_statistics(vocabulary, do_lower_case, max_seq_length, texts, texts_b)[:2]


def token_statistics(vocabulary, do_lower_case, max_seq_length, texts, texts_b=None):
    """`token_counts` and int [N] [UNK] pieces per example (both segments of a pair)."""
    preprocessor = BertPreprocessor(
        vocabulary=vocabulary, do_lower_case=do_lower_case, max_seq_length=max_seq_length
    )
    unk_id = list(vocabulary).index("[UNK]") if "[UNK]" in vocabulary else -1
    lengths, unknown = [], []
    for start in range(0, len(texts), TOKEN_COUNT_CHUNK):
        stop = start + TOKEN_COUNT_CHUNK
        parts = [preprocessor.tokenize(texts[start:stop])]
        if texts_b is not None:
            parts.append(preprocessor.tokenize(texts_b[start:stop]))
        lengths.append(sum(p.row_lengths().numpy() for p in parts) + len(parts) + 1)
        unknown.append(sum(_count_ids(p, unk_id) for p in parts))
    lengths = np.concatenate(lengths).astype(np.int64)
    return lengths, lengths > max_seq_length, np.concatenate(unknown).astype(np.int64)


def _count_ids(ids, wanted: int) -> np.ndarray:
    """int [B]: how many of each row's ids (an int RaggedTensor [B, (pieces)]) equal `wanted`."""
    hits = (ids.flat_values.numpy() == wanted).astype(np.int64)
    return np.bincount(ids.value_rowids().numpy(), hits, minlength=int(ids.nrows())).astype(
        np.int64
    )
