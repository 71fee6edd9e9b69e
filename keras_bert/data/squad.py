"""SQuAD v1.1 / v2.0: reader and windowed features (google-research/bert `run_squad.py` semantics).

Reader: the official JSON (`data[].paragraphs[].{context, qas[]}`); each question becomes one
`SquadExample`, its context kept verbatim (never stripped or collapsed: `answer_start` indexes it).

Features (`convert_example`), as `run_squad.py::convert_examples_to_features`:
- the question is tokenized and cut to `max_query_length` word pieces;
- the context is tokenized once with per-piece CHARACTER offsets into the original context
  (`FullTokenizer.tokenize_with_offsets`; where google-research/bert maps pieces to
  whitespace words, we map each piece to its own characters, so answers are cut from the
  context exactly as written);
- a context longer than `max_seq_length - len(query) - 3` pieces becomes several windows, the
  next starting `min(length, doc_stride)` pieces later (`keras_bert.data.windows.window_spans`);
- each context piece of a window is flagged when this window is its "max context" window:
  score = min(pieces left, pieces right) + 0.01 x window length, ties to the earlier window
  (`_check_is_max_context`; `keras_bert.data.windows.is_max_context`, shared with NER);
- training labels: the answer's first and last piece in the window, or [CLS] (position 0) when
  the answer is not wholly inside the window or the question is unanswerable (v2.0).

Packing: `[CLS] question [SEP] context-window [SEP]`, type ids 0 then 1, padding to
`max_seq_length`.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import numpy as np

from keras_bert import fileio
from keras_bert.config import INPUT_NAMES, check_max_seq_length
from keras_bert.data import windows as windows_lib
from keras_bert.progress import progress_bar
from keras_bert.tokenization.full_tokenizer import FullTokenizer

logger = logging.getLogger(__name__)

# Defaults of google-research/bert run_squad.py.
MAX_SEQ_LENGTH = 384
DOC_STRIDE = 128
MAX_QUERY_LENGTH = 64


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question on one context.

    Attributes:
        qas_id: str, the question id of the file.
        question: str.
        context: str, the paragraph exactly as in the file.
        answers: tuple of (text, char_start) pairs (v1.1 dev has several per question; empty for
            an unanswerable v2.0 question). `context[start:start + len(text)] == text`.
        is_impossible: bool (v2.0 `is_impossible`).
        title: str, the article title (for splitting by article).
    """

    qas_id: str
    question: str
    context: str
    answers: tuple = ()
    is_impossible: bool = False
    title: str = ""


@dataclasses.dataclass
class SquadFeature:
    """One window of one example; arrays are numpy, length max_seq_length.

    Attributes:
        example_index: int, index of the example in the list given to `convert_examples`.
        window_index: int, 0-based window number within its example.
        input_word_ids, input_mask, input_type_ids: int32 [max_seq_length].
        token_start, token_end: int32 [max_seq_length]: character offsets [start, end) in the
            example's context of each context piece; -1 for [CLS], question, [SEP] and padding.
        token_is_max_context: bool [max_seq_length]; True only at context pieces whose max-context
            window this is.
        start_position, end_position: int, training labels (0 = [CLS]).
    """

    example_index: int
    window_index: int
    input_word_ids: np.ndarray
    input_mask: np.ndarray
    input_type_ids: np.ndarray
    token_start: np.ndarray
    token_end: np.ndarray
    token_is_max_context: np.ndarray
    start_position: int = 0
    end_position: int = 0


def read_squad_examples(path, version_2_with_negative: bool = False) -> list[SquadExample]:
    """Reads a SQuAD v1.1 or v2.0 JSON file.

    Answers whose text is not at `answer_start` in the context are dropped with a warning (the
    question stays; with no answer left it is skipped from training by `convert_example`).

    The file is read by `keras_bert.fileio.read_json` (UTF-8, a byte-order mark dropped, at most
    `fileio.MAX_JSON_DEPTH` levels of nesting).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not UTF-8, not JSON or nested too deep (`fileio.UserFileError`); not SQuAD
            JSON (no `data` list, or an article, paragraph, question or answer without its
            fields), naming the file; or `is_impossible` questions in a file read with
            version_2_with_negative=False.
    """
    path = os.fspath(path)
    if not fileio.isfile(path):
        raise FileNotFoundError(f"SQuAD file not found: {path}")
    data = fileio.read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError(f"{path} is not SQuAD JSON: expected an object with a 'data' list")
    try:
        return _examples(data["data"], path, version_2_with_negative)
    except KeyError as e:
        raise ValueError(f"{path} is not SQuAD JSON: a field {e} is missing") from None
    except (TypeError, AttributeError) as e:
        raise ValueError(f"{path} is not SQuAD JSON: {e}") from None


def _answer_start(value, question_id) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: 1e400 is infinity
        raise TypeError(
            f"question {question_id}: answer_start {value!r} is not an integer"
        ) from None


def _examples(articles: list, path: str, version_2_with_negative: bool) -> list[SquadExample]:
    examples = []
    for article in articles:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            for qa in paragraph["qas"]:
                impossible = bool(qa.get("is_impossible", False))
                if impossible and not version_2_with_negative:
                    raise ValueError(
                        f"{path}: question {qa['id']} is unanswerable (v2.0); read "
                        "it with version_2_with_negative=True"
                    )
                answers = []
                for a in [] if impossible else qa.get("answers", []):
                    text, start = a["text"], _answer_start(a["answer_start"], qa["id"])
                    if context[start : start + len(text)] != text:
                        logger.warning(
                            "question %s: answer %r is not at character %d of its context; dropped",
                            qa["id"],
                            text,
                            start,
                        )
                        continue
                    answers.append((text, start))
                examples.append(
                    SquadExample(
                        qa["id"],
                        qa["question"],
                        context,
                        tuple(answers),
                        impossible,
                        article.get("title", ""),
                    )
                )
    return examples


def answer_token_span(answer_start: int, answer_end: int, starts, ends) -> tuple[int, int] | None:
    """First and last context piece overlapping characters [answer_start, answer_end); None if
    no piece does (an answer of whitespace only)."""
    hits = [k for k in range(len(starts)) if starts[k] < answer_end and ends[k] > answer_start]
    return (hits[0], hits[-1]) if hits else None


def check_lengths(
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
    max_sequence_length: int | None = None,
) -> None:
    """Raises ValueError unless a window has room for >= 1 context piece after a full query."""
    check_max_seq_length(max_seq_length, max_sequence_length, is_pair=True)
    if max_query_length < 1 or doc_stride < 1:
        raise ValueError(
            f"max_query_length and doc_stride must be >= 1, got {max_query_length}, {doc_stride}"
        )
    if max_seq_length - max_query_length - 3 < 1:
        raise ValueError(
            f"max_seq_length={max_seq_length} leaves no room for the context after "
            f"max_query_length={max_query_length} pieces and [CLS]/[SEP]/[SEP]: "
            f"need max_seq_length >= max_query_length + 4"
        )


def _packed_window(query_ids, doc_ids, starts, ends, windows, w, max_seq_length, special):
    """Packs window `w` into a SquadFeature's arrays (labels left at 0)."""
    cls_id, sep_id, pad_id = special
    start, length = windows[w]
    offset = len(query_ids) + 2  # [CLS] query [SEP]
    ids = [cls_id] + list(query_ids) + [sep_id] + list(doc_ids[start : start + length]) + [sep_id]
    n = len(ids)
    word_ids = np.full(max_seq_length, pad_id, np.int32)
    word_ids[:n] = ids
    mask = np.zeros(max_seq_length, np.int32)
    mask[:n] = 1
    types = np.zeros(max_seq_length, np.int32)
    types[offset:n] = 1
    tok_start = np.full(max_seq_length, -1, np.int32)
    tok_end = np.full(max_seq_length, -1, np.int32)
    tok_start[offset : offset + length] = starts[start : start + length]
    tok_end[offset : offset + length] = ends[start : start + length]
    max_ctx = np.zeros(max_seq_length, bool)
    for k in range(length):
        max_ctx[offset + k] = windows_lib.is_max_context(windows, w, start + k)
    return word_ids, mask, types, tok_start, tok_end, max_ctx, offset


def convert_example(
    example: SquadExample,
    tokenizer: FullTokenizer,
    example_index: int = 0,
    max_seq_length: int = MAX_SEQ_LENGTH,
    doc_stride: int = DOC_STRIDE,
    max_query_length: int = MAX_QUERY_LENGTH,
    is_training: bool = False,
    special_ids=None,
    context_cache: dict | None = None,
) -> list[SquadFeature]:
    """One example -> its windows (`SquadFeature`s), with labels when `is_training`.

    Training takes the first answer (SQuAD train has one). An answerable training example
    whose answer covers no piece gives no features (logged).

    Args:
        tokenizer: a `FullTokenizer` on the model's vocabulary (`FullTokenizer(
            preprocessor.vocabulary, preprocessor.do_lower_case)`; `SpanQuestionAnswerer`'s
            `context_tokenizer`).
        special_ids: (cls_id, sep_id, pad_id); default from the tokenizer's vocabulary.
        context_cache: optional dict context -> (ids, starts, ends), filled and reused (SQuAD
            asks several questions per paragraph).

    Raises:
        ValueError: bad lengths (`check_lengths`), or a vocabulary without [CLS], [SEP] or
            [PAD] (named).
        KeyError: a piece not in the vocabulary (only "[UNK]" can be, if the vocabulary lacks it).
    """
    check_lengths(max_seq_length, doc_stride, max_query_length)
    if special_ids is None:
        special_ids = tokenizer.packing_ids()
    query_ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.question))
    query_ids = query_ids[:max_query_length]
    cached = None if context_cache is None else context_cache.get(example.context)
    if cached is None:
        pieces, starts, ends = tokenizer.tokenize_with_offsets(example.context)
        cached = (tokenizer.convert_tokens_to_ids(pieces), starts, ends)
        if context_cache is not None:
            context_cache[example.context] = cached
    doc_ids, starts, ends = cached
    windows = windows_lib.window_spans(
        len(doc_ids), max_seq_length - len(query_ids) - 3, doc_stride
    )
    span = None
    if is_training and not example.is_impossible:
        if not example.answers:
            logger.warning("question %s has no usable answer; skipped", example.qas_id)
            return []
        text, char_start = example.answers[0]
        span = answer_token_span(char_start, char_start + len(text), starts, ends)
        if span is None:
            logger.warning(
                "question %s: answer %r covers no word piece; skipped", example.qas_id, text
            )
            return []
    features = []
    for w in range(len(windows)):
        word_ids, mask, types, tok_start, tok_end, max_ctx, offset = _packed_window(
            query_ids, doc_ids, starts, ends, windows, w, max_seq_length, special_ids
        )
        start_position = end_position = 0
        win_start, length = windows[w]
        if span is not None and win_start <= span[0] and span[1] < win_start + length:
            start_position = span[0] - win_start + offset
            end_position = span[1] - win_start + offset
        features.append(
            SquadFeature(
                example_index,
                w,
                word_ids,
                mask,
                types,
                tok_start,
                tok_end,
                max_ctx,
                start_position,
                end_position,
            )
        )
    return features


def convert_examples(
    examples,
    tokenizer: FullTokenizer,
    max_seq_length: int = MAX_SEQ_LENGTH,
    doc_stride: int = DOC_STRIDE,
    max_query_length: int = MAX_QUERY_LENGTH,
    is_training: bool = False,
    progress: bool = False,
) -> list[SquadFeature]:
    """All examples -> features in example order (see `convert_example`).

    Args:
        progress: bool; show a progress bar (tqdm) for long files.
    """
    check_lengths(max_seq_length, doc_stride, max_query_length)
    special = tokenizer.packing_ids()
    items = enumerate(examples)
    if progress:
        items = progress_bar(items, total=len(examples), desc="SQuAD features", unit="question")
    features, cache = [], {}
    for index, example in items:
        features.extend(
            convert_example(
                example,
                tokenizer,
                index,
                max_seq_length,
                doc_stride,
                max_query_length,
                is_training,
                special,
                cache,
            )
        )
    return features


def stack_features(features, with_labels: bool = False) -> dict:
    """Features -> dict of numpy arrays [N, max_seq_length] (model inputs), plus
    `start_positions` / `end_positions` int32 [N] when `with_labels`."""
    out = {
        name: np.stack([getattr(f, name) for f in features]).astype(np.int32)
        for name in INPUT_NAMES
    }
    if with_labels:
        out["start_positions"] = np.asarray([f.start_position for f in features], np.int32)
        out["end_positions"] = np.asarray([f.end_position for f in features], np.int32)
    return out


def split_by_title(examples, held_out_fraction: float = 0.5):
    """(train, held_out): disjoint article titles; the last `held_out_fraction` of the titles (in
    file order) are held out. For fine-tuning on one part of a dev set, scoring on the rest."""
    titles = list(dict.fromkeys(e.title for e in examples))
    cut = len(titles) - int(round(len(titles) * held_out_fraction))
    held = set(titles[cut:])
    return ([e for e in examples if e.title not in held], [e for e in examples if e.title in held])
