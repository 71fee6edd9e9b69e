"""The evidence pack of a `TokenClassifier` (NER) on a CoNLL column file (SPEC section 9).

Data: the file `keras_bert.data.conll.read_conll` reads for training (word first, tag last, blank
lines between sentences, IOB1 or IOB2). Each sentence goes to the model's `serving_default` as its
words joined by one space; the signature splits on ASCII whitespace, so it tags exactly these
words (a CoNLL word never holds whitespace).

Metrics: entity-level precision, recall and F1, micro-averaged and per type, by seqeval
(`keras_bert.metrics.ner.entity_scores`: IOB2, exact type and boundaries). Wrong entities are
counted by kind (`entity_errors`), each predicted entity that is not exactly right once:

- "type": the same span as a gold entity, another type;
- "boundary": overlaps a gold entity of the same type, other boundaries;
- "type_and_boundary": overlaps a gold entity, other type and other boundaries;
- "spurious": overlaps no gold entity;

and each gold entity that no prediction overlaps as "missed". Then the F1 per sentence-length
bucket (words), error rates per slice (an error: a sentence whose entities are not exactly the
gold ones) and the failure catalogue (those sentences, most wrong entities first).

Label issues: the exported `serving_default` gives tags only (its `encoded` signature gives
probabilities per WordPiece position of windows the caller would have to build), so per-word tag
probabilities (`word_probabilities`) come from a saved task run in process (`TaskPredictor`): the
same windows and logits as its tags, softmaxed, read at each word's first piece in its window of
most context. With them `diagnostics.add_diagnostics` adds `label_issues`
(`label_issues.find_token_label_issues`); a SavedModel or a server gives none.

Per-sentence counts (true positives, predicted, gold entities) make the paired bootstrap of
`--compare` (`comparison.count_bootstrap`): their sums are seqeval's micro figures.

Behaviour: the built-in invariance tests (`ner_invariance`) perturb each sentence (words joined
by a space); a row fails when the predicted entities change (spans and types over the words both
taggings have, `same_entities`). No template tests: they name a classifier's labels.
"""

from __future__ import annotations

import numpy as np
from seqeval.metrics.sequence_labeling import get_entities

from keras_bert.data.conll import read_conll, to_iob2
from keras_bert.data.glue import InputExample
from keras_bert.evaluation import failure_catalogue as fc
from keras_bert.evaluation.behaviour import INVARIANCE_ROWS, invariance_of
from keras_bert.evaluation.eval_data import DataError, EvalData, token_statistics
from keras_bert.evaluation.kinds.evidence_kind import EvidenceKind, own_format, register
from keras_bert.evaluation.report_writer import Num, Table, keyed_rows
from keras_bert.metrics import ner

SENTENCE_BUCKETS = (5, 10, 20, 40)  # upper edges, inclusive, in words
ERROR_KINDS = ("type", "boundary", "type_and_boundary", "spurious", "missed")
# The failure table (`report_sections.failure_table`): (header, failure field, is a number).
FAILURE_COLUMNS = (
    ("row", "row", True),
    ("sentence", "text", False),
    ("gold entities", "gold", False),
    ("predicted", "predicted", False),
    ("wrong", "wrong_entities", True),
    ("kinds", "kinds", False),
)


def words_bucket(words: int, edges=SENTENCE_BUCKETS) -> str:
    """ "1-5", "6-10", ..., ">40" for a count of words."""
    lower = 0
    for upper in edges:
        if words <= upper:
            return f"{lower + 1}-{upper}"
        lower = upper
    return f">{edges[-1]}"


def read_ner_data(path, info, slice_column=None) -> EvalData:
    """A CoNLL file as `EvalData` (`reference`: "words" and IOB2 "tags", lists per sentence).

    Raises:
        DataError: no such file, a bad line (see `read_conll`), no sentence, or a slice column
            (a CoNLL file has none).
    """
    if slice_column:
        raise DataError("--slice_column does not apply to a CoNLL file (it has no columns)")
    try:
        sentences = read_conll(path)
    except (ValueError, FileNotFoundError) as e:
        raise DataError(str(e)) from None
    if not sentences:
        raise DataError(f"{path}: no sentence")
    texts = [" ".join(s.words) for s in sentences]
    examples = [InputExample(f"sentence-{i}", t, None, None) for i, t in enumerate(texts)]
    lengths, truncated, unknown = token_statistics(
        info.vocabulary, info.do_lower_case, info.max_seq_length, texts
    )
    # The tagger windows long sentences (token_classifier): no word is lost, nothing is cut.
    truncated = np.zeros_like(truncated)
    return EvalData(
        str(path),
        examples,
        np.zeros(len(examples), np.int64),
        None,
        None,
        None,
        lengths,
        truncated,
        unknown,
        inputs={"text": texts},
        reference={
            "words": [list(s.words) for s in sentences],
            "tags": [list(s.tags) for s in sentences],
        },
    )


def train_texts(path) -> list[str]:
    """A CoNLL training file's sentences, words joined by a space (for `data_health.leakage`)."""
    return [" ".join(s.words) for s in read_conll(path)]


def predicted_tags(outputs: dict, data: EvalData) -> list[list[str]]:
    """The signature's `tags` [N, W] (bytes, "" padding) -> one list of str tags per sentence.

    Raises:
        DataError: a sentence tagged with another number of words than the file gives it.
    """
    out = []
    for i, (row, words) in enumerate(zip(outputs["tags"], data.reference["words"])):
        tags = [t.decode() if isinstance(t, bytes) else str(t) for t in row[: len(words)]]
        if len(tags) != len(words) or "" in tags:
            raise DataError(f"{data.path}: sentence {i}: the model tagged another number of words")
        out.append(tags)
    return out


def word_probabilities(task, word_lists, batch_size=32) -> list[np.ndarray]:
    """A `TokenClassifier`'s tag probabilities per word: float [W, C] per sentence, the softmax of
    the logits its tags are the argmax of (a word without pieces: one-hot on "O", its tag)."""
    import tensorflow as tf

    from keras_bert.tasks.task import INPUT_NAMES
    from keras_bert.tasks.token_classifier import _ragged, trim_windows

    num_tags = len(task.label_names)
    out = []
    for start in range(0, len(word_lists), batch_size):
        chunk = [list(w) for w in word_lists[start : start + batch_size]]
        windows = trim_windows(task.encode_words(_ragged(chunk, tf.string)))
        logits = np.asarray(task._logits({k: windows[k] for k in INPUT_NAMES}), np.float64)
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        word_index = windows["word_index"].numpy()
        sentence = windows["sentence_index"].numpy()
        part = [np.zeros((len(w), num_tags)) for w in chunk]
        for p in part:
            p[:, task.outside_id] = 1.0
        for n, t in zip(*np.nonzero(word_index >= 0)):
            part[sentence[n]][word_index[n, t]] = probs[n, t]
        out.extend(part)
    return out


def entity_errors(gold_tags, pred_tags) -> tuple[dict, list]:
    """Wrong entities by kind (module docstring) over all sentences, and per sentence.

    Returns:
        ({kind: count} for every kind in ERROR_KINDS, list of N dicts {kind: count}).
    """
    total = dict.fromkeys(ERROR_KINDS, 0)
    rows = []
    for gold, pred in zip(gold_tags, pred_tags):
        g, p = set(get_entities(to_iob2(gold))), set(get_entities(to_iob2(pred)))
        row = dict.fromkeys(ERROR_KINDS, 0)
        for kind, start, end in p - g:
            overlapping = [x for x in g if x[1] <= end and start <= x[2]]
            if not overlapping:
                row["spurious"] += 1
            elif any((x[1], x[2]) == (start, end) for x in overlapping):
                row["type"] += 1
            elif any(x[0] == kind for x in overlapping):
                row["boundary"] += 1
            else:
                row["type_and_boundary"] += 1
        row["missed"] = sum(not any(x[1] <= e and s <= x[2] for x in p) for _, s, e in g - p)
        rows.append(row)
        for k in ERROR_KINDS:
            total[k] += row[k]
    return total, rows


def sentence_counts(gold_tags, pred_tags) -> np.ndarray:
    """int64 [N, 3]: per sentence, entities right (type and both boundaries), predicted, gold."""
    out = []
    for gold, pred in zip(gold_tags, pred_tags):
        g, p = set(get_entities(to_iob2(gold))), set(get_entities(to_iob2(pred)))
        out.append((len(g & p), len(p), len(g)))
    return np.asarray(out, np.int64).reshape(-1, 3)


def _entities(tags, words) -> str:
    return "; ".join(
        f"{' '.join(words[s : e + 1])} [{kind}]" for kind, s, e in get_entities(to_iob2(tags))
    )


def evaluate_ner(data: EvalData, outputs: dict, info) -> dict:
    """NER outputs (`tags` [N, W]; optionally "word_probabilities", see `word_probabilities`) ->
    entity metrics, error kinds, buckets, slices, failures (and "token_probabilities", consumed by
    `diagnostics.add_diagnostics`)."""
    del info
    gold, pred = data.reference["tags"], predicted_tags(outputs, data)
    extra = {}
    if "word_probabilities" in outputs:
        extra["token_probabilities"] = outputs["word_probabilities"]
    scores = ner.entity_scores(gold, pred)
    errors, per_sentence = entity_errors(gold, pred)
    counts = sentence_counts(gold, pred)
    correct = (counts[:, 0] == counts[:, 1]) & (counts[:, 0] == counts[:, 2])
    num_words = [len(w) for w in data.reference["words"]]
    buckets = [words_bucket(n) for n in num_words]
    by_length = []
    for value in sorted(set(buckets), key=lambda b: num_words[buckets.index(b)]):
        member = [i for i, b in enumerate(buckets) if b == value]
        s = ner.entity_scores([gold[i] for i in member], [pred[i] for i in member])
        by_length.append(
            {
                "words": value,
                "sentences": len(member),
                "entities": s["num_true_entities"],
                "precision": s["precision"],
                "recall": s["recall"],
                "f1": s["f1"],
            }
        )
    columns = fc.slice_columns(data.token_lengths, data.truncated, None)
    columns["sentence length (words)"] = buckets
    failures = []
    for i in np.flatnonzero(~correct):
        words = data.reference["words"][i]
        failures.append(
            {
                "row": int(i),
                "guid": data.examples[i].guid,
                "text": data.examples[i].text_a,
                "text_b": None,
                "gold": _entities(gold[i], words),
                "predicted": _entities(pred[i], words),
                "wrong_entities": int(sum(per_sentence[i].values())),
                "errors": {k: v for k, v in per_sentence[i].items() if v},
                "kinds": ", ".join(f"{k} {v}" for k, v in per_sentence[i].items() if v),
                "tokens": int(data.token_lengths[i]),
                "truncated": False,
            }
        )
    failures.sort(key=lambda r: -r["wrong_entities"])
    return (
        {
            "headline": {k: scores[k] for k in ("f1", "precision", "recall", "accuracy")},
            "entities": {
                "gold": scores["num_true_entities"],
                "predicted": scores["num_pred_entities"],
                "right": int(counts[:, 0].sum()),
            },
            "per_type": scores["per_type"],
            "entity_errors": errors,
            "by_sentence_length": by_length,
        }
        | extra
        | fc.outcome(
            columns,
            correct,
            failures,
            counts,
            entity_metrics,
            [" ".join(t) for t in pred],
            [" ".join(t) for t in gold],
        )
    )


def entity_metrics(sums: np.ndarray) -> dict:
    """Micro precision, recall, F1 from summed counts [..., 3] (right, predicted, gold)."""
    right, predicted, gold = (sums[..., k].astype(np.float64) for k in range(3))
    precision = np.divide(right, predicted, out=np.zeros_like(right), where=predicted > 0)
    recall = np.divide(right, gold, out=np.zeros_like(right), where=gold > 0)
    total = precision + recall
    f1 = np.divide(2 * precision * recall, total, out=np.zeros_like(right), where=total > 0)
    return {"f1": f1, "precision": precision, "recall": recall}


def ner_blocks(m: dict, prefix: str = "") -> list:
    """Per-type scores, error kinds and F1 by sentence length of one model's metrics `m`."""
    fields = ("precision", "recall", "f1", "support")
    rows = [
        [name] + [Num(f"{prefix}per_type.{name}.{f}", v[f]) for f in fields]
        for name, v in m["per_type"].items()
    ]
    kinds = [[k, Num(f"{prefix}entity_errors.{k}", v)] for k, v in m["entity_errors"].items()]
    lengths = keyed_rows(
        f"{prefix}by_sentence_length",
        m["by_sentence_length"],
        ("sentences", "entities", "precision", "recall", "f1"),
        text_fields=("words",),
    )
    return [
        ("h2", "Entities per type (seqeval, IOB2, exact type and boundaries)"),
        Table(["type", *fields], rows),
        ("h2", "Wrong entities by kind"),
        "Each predicted entity that is not exactly right counts once: type (same span, other "
        "type), boundary (overlaps a gold entity of its type), type and boundary, spurious "
        "(overlaps none); each gold entity no prediction overlaps is missed.",
        Table(["kind", "entities"], kinds),
        ("h2", "By sentence length"),
        Table(["words", "sentences", "gold entities", "precision", "recall", "F1"], lengths),
    ]


def entity_spans(tags) -> list:
    """(type, first word, last word) of each entity of a tag sequence (IOB1 or IOB2)."""
    return get_entities(to_iob2(list(tags)))


def same_entities(before, after) -> bool:
    """Whether two taggings of a sentence and its perturbation hold the same entities (spans and
    types) over the words both have (removing or adding a final "." changes the word count)."""
    n = min(len(before), len(after))
    return entity_spans(before[:n]) == entity_spans(after[:n])


def show_entities(tags) -> str:
    """ "PER 0-1, LOC 4" (type, word span), or "no entity"."""
    spans = [f"{k} {s}" if s == e else f"{k} {s}-{e}" for k, s, e in entity_spans(tags)]
    return ", ".join(spans) or "no entity"


def ner_invariance(predictor, data, rows=INVARIANCE_ROWS, seed=0, batch_size=32) -> list[dict]:
    """`invariance_of` a tagger on the first `rows` sentences: a row fails when the predicted
    entities (spans and types, `same_entities`) change."""

    def tags(_, texts):
        out = predictor.run_inputs({"text": texts}, batch_size, progress=False)[0]
        return [
            tuple(t.decode() if isinstance(t, bytes) else str(t) for t in row[:n])
            for row, n in zip(out["tags"], out["num_words"])
        ]

    return invariance_of(tags, data.inputs["text"][:rows], seed, same_entities, show_entities)


def untimed_outputs(predictor, data: EvalData, batch_size) -> dict:
    """Tag probabilities per word (`word_probabilities`) of a saved task run in process, for
    label issues; nothing from a SavedModel or a server."""
    if not hasattr(predictor, "task"):
        return {}
    return {
        "word_probabilities": word_probabilities(
            predictor.task, data.reference["words"], batch_size
        )
    }


TOKEN_CLASSIFICATION = register(
    EvidenceKind(
        "token_classification",
        read=own_format(read_ner_data),
        evaluate=evaluate_ner,
        train_texts=lambda path, columns: train_texts(path),
        sections=(ner_blocks,),
        failure_columns=lambda m: FAILURE_COLUMNS,
        invariance=ner_invariance,
        untimed_outputs=untimed_outputs,
    )
)
