"""Pretraining instances for BERT's masked LM + next-sentence tasks, written as TFRecords.

A port of google-research/bert `create_pretraining_data.py` (BERT paper, section 3.1 and
appendix A.2) with the same flags and sampling, made deterministic for a seed, parallel in the
tokenization step, and instrumented with a summary. Deliberate differences from the reference
(each fixes a known fault, see PITFALLS.md "Pretraining data"):

* number to predict = `min(max_predictions_per_seq, max(1, round(n * masked_lm_prob)))` with
  `n` = number of MLM candidates (tokens other than [CLS]/[SEP]); the reference uses
  `len(tokens)`, counting the three special tokens, so it masks slightly more than asked.
* a random next segment never comes from the same document (the reference retries 10 times and
  may give up); at least two documents are therefore required.
* a chunk is closed only once it holds two segments (or the document ends): see the comment in
  `create_instances_from_document`.
* whole-word masking never joins a `##` piece to a word across [CLS]/[SEP]: a `##` piece right
  after a special token (front truncation can leave one) is a word of its own.

Masking (the reference's rule): candidates are shuffled (whole words as groups when
`do_whole_word_mask`); groups are taken until `num_to_predict` is reached, skipping a group that
would overshoot; for each chosen *token*, one uniform draw u: u < 0.8 -> [MASK]; else a second
draw v: v < 0.5 -> the original token ("keep"), else a token drawn uniformly from the whole
vocabulary ("random"; it may equal the original by chance and still counts as "random").

NSP label (PITFALLS.md): `next_sentence_labels` = 1 when segment B is a random segment from
another document, 0 when it is the true continuation. A chunk of a single sentence always gets a
random next segment (as in the reference); with the two-segment rule above this only happens at
the end of a document, so the positive rate stays close to 0.5.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import io
import multiprocessing
import random
import re
from typing import Iterable, Sequence

import numpy as np

from keras_bert import fileio
from keras_bert.config import check_max_seq_length
from keras_bert.progress import progress_bar
from keras_bert.tokenization.full_tokenizer import FullTokenizer

CLS, SEP, MASK = "[CLS]", "[SEP]", "[MASK]"
MASK_KINDS = ("mask", "random", "keep")


@dataclasses.dataclass
class TrainingInstance:
    """One pretraining example before id conversion.

    Attributes:
        tokens: list of str, `[CLS] A [SEP] B [SEP]` after masking, length <= max_seq_length.
        segment_ids: list of int (0 for [CLS], A and the first [SEP]; 1 for B and the last [SEP]).
        is_random_next: bool. True = B is a random segment from another document (label 1).
        masked_lm_positions: list of int, ascending indices into `tokens`.
        masked_lm_labels: list of str, the original tokens at those positions.
        mask_kinds: list of str in MASK_KINDS, how each position was altered (for the summary).
    """

    tokens: list
    segment_ids: list
    is_random_next: bool
    masked_lm_positions: list
    masked_lm_labels: list
    mask_kinds: list


# ---------------------------------------------------------------------------------------------
# Reading corpora
# ---------------------------------------------------------------------------------------------

_WIKITEXT_TITLE = re.compile(r"^ ?= [^=].* = ?$")
_WIKITEXT_HEADING = re.compile(r"^ ?(= ){2,}.*( =){2,} ?$")
# A sentence ends at a free-standing . ! or ? (WikiText detaches sentence-final punctuation:
# "actor . He"), followed by a capital letter, digit or opening quote. Attached dots such as
# "U.S." or "Mr." never split.
_WIKITEXT_SENTENCE_END = re.compile(r"(?<= [.!?]) +(?=[A-Z0-9\"'(])")
_WIKITEXT_UNESCAPE = ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."))


def split_wikitext_sentences(paragraph: str) -> list[str]:
    """Splits one WikiText paragraph into sentences and undoes its `@-@`, `@,@`, `@.@` escapes."""
    text = paragraph.strip()
    for escaped, plain in _WIKITEXT_UNESCAPE:
        text = text.replace(escaped, plain)
    return [s.strip() for s in _WIKITEXT_SENTENCE_END.split(" " + text) if s.strip()]


def read_raw_documents(path: str, input_format: str = "text") -> list[list[str]]:
    """Reads a corpus file into documents, each a list of sentence strings.

    Args:
        path: str, a UTF-8 text file.
        input_format: "text" = google-research/bert's format (one sentence per line, a blank
            line between documents); "wikitext" = WikiText (`wiki.*.raw` or `.tokens`): a
            top-level ` = Title = ` line starts a document, ` = = Section = = ` headings and
            blank lines are dropped, each paragraph line is split by `split_wikitext_sentences`.

    Raises:
        ValueError: for an unknown input_format.
    """
    if input_format not in ("text", "wikitext"):
        raise ValueError(f"input_format must be 'text' or 'wikitext', got {input_format!r}")
    documents: list[list[str]] = [[]]
    with io.StringIO(fileio.read_text(path, errors="replace"), newline=None) as f:
        for line in f:
            if input_format == "text":
                line = line.strip()
                if not line:
                    documents.append([])
                else:
                    documents[-1].append(line)
            elif _WIKITEXT_TITLE.match(line.rstrip("\n")) and not _WIKITEXT_HEADING.match(
                line.rstrip("\n")
            ):
                documents.append([])
            elif line.strip() and not _WIKITEXT_HEADING.match(line.rstrip("\n")):
                documents[-1].extend(split_wikitext_sentences(line))
    return [d for d in documents if d]


_WORKER_TOKENIZE = None


def _init_worker(vocab_file: str, do_lower_case: bool) -> None:
    global _WORKER_TOKENIZE
    _WORKER_TOKENIZE = FullTokenizer(vocab_file, do_lower_case=do_lower_case).tokenize


def _tokenize_documents(raw_documents: list[list[str]], tokenize=None) -> list[list[list[str]]]:
    tokenize = tokenize or _WORKER_TOKENIZE
    out = []
    for doc in raw_documents:
        sentences = [t for t in (tokenize(s) for s in doc) if t]
        if sentences:
            out.append(sentences)
    return out


def tokenize_corpus(
    input_files: Sequence[str],
    vocab_file: str,
    do_lower_case: bool,
    input_format: str = "text",
    num_workers: int = 1,
    show_progress: bool = True,
) -> list[list[list[str]]]:
    """Reads and tokenizes every file into documents of WordPiece-tokenized sentences.

    Documents are tokenized in chunks by `num_workers` processes (spawned, each building its own
    `FullTokenizer`); results keep the input order, so the output does not depend on
    `num_workers`. Progress is shown with tqdm (documents).

    Returns:
        list of documents; a document is a list of sentences; a sentence a list of str pieces.
        Documents or sentences that tokenize to nothing are dropped.
    """
    raw = [doc for path in input_files for doc in read_raw_documents(path, input_format)]
    chunk = 64
    chunks = [raw[i : i + chunk] for i in range(0, len(raw), chunk)]
    bar = progress_bar(
        total=len(raw), desc="tokenizing documents", unit="doc", disable=not show_progress
    )
    documents: list[list[list[str]]] = []
    if num_workers <= 1:
        _init_worker(vocab_file, do_lower_case)
        results = map(_tokenize_documents, chunks)
        pool = None
    else:
        pool = concurrent.futures.ProcessPoolExecutor(
            num_workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(vocab_file, do_lower_case),
        )
        results = pool.map(_tokenize_documents, chunks)
    try:
        for raw_chunk, tokenized in zip(chunks, results):
            documents.extend(tokenized)
            bar.update(len(raw_chunk))
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown()
    return documents


# ---------------------------------------------------------------------------------------------
# Instances
# ---------------------------------------------------------------------------------------------


def truncate_seq_pair_randomly(
    tokens_a: list, tokens_b: list, max_num_tokens: int, rng: random.Random
) -> None:
    """Truncates in place, one piece at a time from the longer list, at its front or back at random
    (google-research/bert `truncate_seq_pair`)."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc[0]
        else:
            trunc.pop()


def create_masked_lm_predictions(
    tokens: Sequence[str],
    masked_lm_prob: float,
    max_predictions_per_seq: int,
    vocab_words: Sequence[str],
    rng: random.Random,
    do_whole_word_mask: bool = False,
):
    """Chooses and applies MLM masks (rule in the module docstring).

    Returns:
        (output_tokens, positions ascending, labels, kinds).
    """
    cand_indexes: list[list[int]] = []
    prev_special = True
    for i, token in enumerate(tokens):
        if token in (CLS, SEP):
            prev_special = True
            continue
        if do_whole_word_mask and not prev_special and token.startswith("##"):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
        prev_special = False
    num_candidates = sum(len(c) for c in cand_indexes)
    rng.shuffle(cand_indexes)
    output_tokens = list(tokens)
    num_to_predict = min(
        max_predictions_per_seq, max(1, int(round(num_candidates * masked_lm_prob)))
    )
    masked = []  # (index, label, kind)
    for index_set in cand_indexes:
        if len(masked) >= num_to_predict:
            break
        if len(masked) + len(index_set) > num_to_predict:
            continue
        for index in index_set:
            if rng.random() < 0.8:
                output_tokens[index], kind = MASK, "mask"
            elif rng.random() < 0.5:
                kind = "keep"
            else:
                output_tokens[index], kind = (
                    vocab_words[rng.randint(0, len(vocab_words) - 1)],
                    "random",
                )
            masked.append((index, tokens[index], kind))
    masked.sort(key=lambda m: m[0])
    return (output_tokens, [m[0] for m in masked], [m[1] for m in masked], [m[2] for m in masked])


def create_instances_from_document(
    all_documents,
    document_index,
    max_seq_length,
    short_seq_prob,
    masked_lm_prob,
    max_predictions_per_seq,
    vocab_words,
    rng,
    do_whole_word_mask=False,
) -> list[TrainingInstance]:
    """Packs one document's sentences into instances (google-research/bert's algorithm)."""
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    instances = []
    current_chunk: list = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        # Deviation: a chunk holds at least two segments unless the document ends, so that a
        # true continuation exists (the reference emits a lone long sentence with a forced
        # random next segment, which pushes the NSP positive rate well above 0.5).
        if i == len(document) - 1 or (
            current_length >= target_seq_length and len(current_chunk) >= 2
        ):
            if current_chunk:
                a_end = rng.randint(1, len(current_chunk) - 1) if len(current_chunk) >= 2 else 1
                tokens_a = [t for seg in current_chunk[:a_end] for t in seg]
                tokens_b: list = []
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)
                    random_index = rng.randint(0, len(all_documents) - 2)
                    if random_index >= document_index:
                        random_index += 1  # never the same document
                    random_document = all_documents[random_index]
                    random_start = rng.randint(0, len(random_document) - 1)
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    i -= len(current_chunk) - a_end  # put the unused segments back
                else:
                    is_random_next = False
                    tokens_b = [t for seg in current_chunk[a_end:] for t in seg]
                truncate_seq_pair_randomly(tokens_a, tokens_b, max_num_tokens, rng)
                tokens = [CLS] + tokens_a + [SEP] + tokens_b + [SEP]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                tokens, positions, labels, kinds = create_masked_lm_predictions(
                    tokens,
                    masked_lm_prob,
                    max_predictions_per_seq,
                    vocab_words,
                    rng,
                    do_whole_word_mask,
                )
                instances.append(
                    TrainingInstance(tokens, segment_ids, is_random_next, positions, labels, kinds)
                )
            current_chunk = []
            current_length = 0
        i += 1
    return instances


def create_training_instances(
    documents: list,
    vocab_words: Sequence[str],
    max_seq_length: int = 128,
    dupe_factor: int = 10,
    short_seq_prob: float = 0.1,
    masked_lm_prob: float = 0.15,
    max_predictions_per_seq: int = 20,
    do_whole_word_mask: bool = False,
    random_seed: int = 12345,
    show_progress: bool = False,
) -> list[TrainingInstance]:
    """Creates shuffled instances from tokenized documents, `dupe_factor` passes with fresh masks.

    Args:
        documents: list of documents (list of sentences, each a non-empty list of str pieces).
        vocab_words: the vocabulary in id order (random replacements are drawn from it).
        max_seq_length: int >= 5. Tokens per instance including [CLS] and two [SEP].
        masked_lm_prob: float in (0, 1]. Fraction of candidates to predict.

    Returns:
        list of TrainingInstance, in an order fixed by `random_seed`.

    Raises:
        ValueError: fewer than two documents (a random next segment needs another document) or
            out-of-range arguments.
    """
    if len(documents) < 2:
        raise ValueError(
            f"need at least 2 documents for next-sentence prediction, got {len(documents)}"
        )
    check_max_seq_length(max_seq_length, is_pair=True)  # the one rule, then this recipe's own:
    if max_seq_length < 5:  # [CLS] A [SEP] B [SEP] with at least one token in each segment
        raise ValueError(
            f"max_seq_length={max_seq_length} must be >= 5 for pretraining instances "
            "(two non-empty segments and three special tokens)"
        )
    if not 0.0 < masked_lm_prob <= 1.0:
        raise ValueError(f"masked_lm_prob={masked_lm_prob} must be in (0, 1]")
    if max_predictions_per_seq < 1:
        raise ValueError(f"max_predictions_per_seq={max_predictions_per_seq} must be >= 1")
    rng = random.Random(random_seed)
    documents = list(documents)
    rng.shuffle(documents)
    instances = []
    bar = progress_bar(
        total=dupe_factor * len(documents),
        desc="creating instances",
        unit="doc",
        disable=not show_progress,
    )
    for _ in range(dupe_factor):
        for document_index in range(len(documents)):
            instances.extend(
                create_instances_from_document(
                    documents,
                    document_index,
                    max_seq_length,
                    short_seq_prob,
                    masked_lm_prob,
                    max_predictions_per_seq,
                    vocab_words,
                    rng,
                    do_whole_word_mask,
                )
            )
            bar.update(1)
    bar.close()
    rng.shuffle(instances)
    return instances


# ---------------------------------------------------------------------------------------------
# Features, records and the summary
# ---------------------------------------------------------------------------------------------


def instance_to_features(
    instance: TrainingInstance, vocab: dict, max_seq_length: int, max_predictions_per_seq: int
) -> dict:
    """Converts an instance to the SPEC section 4 features (numpy, padded).

    Returns:
        dict: input_word_ids, input_mask, input_type_ids int64 [max_seq_length];
        masked_lm_positions, masked_lm_ids int64 and masked_lm_weights float32
        [max_predictions_per_seq] (weights 1.0 per prediction then 0.0); next_sentence_labels
        int64 [1] (1 = random next).

    Raises:
        ValueError: if the instance is longer than max_seq_length or has more predictions than
            max_predictions_per_seq; KeyError naming a token missing from `vocab`.
    """
    n, p = len(instance.tokens), len(instance.masked_lm_positions)
    if n > max_seq_length or p > max_predictions_per_seq:
        raise ValueError(
            f"instance of {n} tokens / {p} predictions exceeds {max_seq_length} / "
            f"{max_predictions_per_seq}"
        )
    ids = np.zeros(max_seq_length, np.int64)
    ids[:n] = [vocab[t] for t in instance.tokens]
    mask = np.zeros(max_seq_length, np.int64)
    mask[:n] = 1
    types = np.zeros(max_seq_length, np.int64)
    types[:n] = instance.segment_ids
    positions = np.zeros(max_predictions_per_seq, np.int64)
    positions[:p] = instance.masked_lm_positions
    labels = np.zeros(max_predictions_per_seq, np.int64)
    labels[:p] = [vocab[t] for t in instance.masked_lm_labels]
    weights = np.zeros(max_predictions_per_seq, np.float32)
    weights[:p] = 1.0
    return {
        "input_word_ids": ids,
        "input_mask": mask,
        "input_type_ids": types,
        "masked_lm_positions": positions,
        "masked_lm_ids": labels,
        "masked_lm_weights": weights,
        "next_sentence_labels": np.array([int(instance.is_random_next)], np.int64),
    }


def features_to_example(features: dict):
    """Serializes a features dict (from `instance_to_features`) as a `tf.train.Example`."""
    import tensorflow as tf

    feature = {}
    for name, value in features.items():
        if value.dtype == np.float32:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value.tolist()))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value.tolist()))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def shard_paths(output_file: str, num_shards: int = 1) -> list[str]:
    """Output paths: a comma-separated list as given, or `output_file` split into `num_shards`
    files named `<output_file>-00000-of-0000N` (num_shards > 1)."""
    paths = [p.strip() for p in output_file.split(",") if p.strip()]
    if num_shards > 1:
        if len(paths) != 1:
            raise ValueError(
                "give either a comma-separated --output_file or --num_shards > 1, not both"
            )
        paths = [f"{paths[0]}-{i:05d}-of-{num_shards:05d}" for i in range(num_shards)]
    return paths


def write_instances(
    instances: Sequence[TrainingInstance],
    vocab: dict,
    output_files: Sequence[str],
    max_seq_length: int,
    max_predictions_per_seq: int,
) -> list[int]:
    """Writes instances round-robin into the TFRecord files (uncompressed, byte-deterministic:
    Examples are serialized with `deterministic=True`, since protobuf map order otherwise varies
    between processes).

    Returns:
        list of int: records written per file.
    """
    import tensorflow as tf

    for path in output_files:
        if fileio.parent(path):
            fileio.makedirs(fileio.parent(path))
    # Each file appears under its name only when complete (fileio.writing_path).
    written = [fileio.writing_path(p) for p in output_files]
    writers = [tf.io.TFRecordWriter(p) for p in written]
    counts = [0] * len(writers)
    complete = False
    try:
        for k, instance in enumerate(instances):
            features = instance_to_features(
                instance, vocab, max_seq_length, max_predictions_per_seq
            )
            writers[k % len(writers)].write(
                features_to_example(features).SerializeToString(deterministic=True)
            )
            counts[k % len(writers)] += 1
        complete = True
    finally:
        for w in writers:
            w.close()
        for tmp, path in zip(written, output_files):
            if complete:
                fileio.commit_write(tmp, path)
            elif tmp != path:
                fileio.remove(tmp)
    return counts


def summarize_instances(
    instances: Iterable[TrainingInstance], num_documents: int | None = None
) -> dict:
    """Statistics of a set of instances (JSON-able dict).

    Keys: instances; tokens (real tokens incl. specials); candidate_tokens (non-[CLS]/[SEP]);
    masked_tokens; masked_fraction = masked / candidates; mask_split {mask, random, keep} =
    fractions of masked tokens; nsp_positive_rate = fraction with label 1 (random next);
    mean_tokens_per_instance; documents (if given).
    """
    n = tokens = cands = 0
    kinds = collections.Counter()
    positives = 0
    for inst in instances:
        n += 1
        tokens += len(inst.tokens)
        cands += sum(1 for t, s in zip(inst.tokens, _specials(inst)) if not s)
        kinds.update(inst.mask_kinds)
        positives += int(inst.is_random_next)
    masked = sum(kinds.values())
    out = {
        "instances": n,
        "tokens": tokens,
        "candidate_tokens": cands,
        "masked_tokens": masked,
        "masked_fraction": masked / cands if cands else 0.0,
        "mask_split": {k: (kinds[k] / masked if masked else 0.0) for k in MASK_KINDS},
        "nsp_positive_rate": positives / n if n else 0.0,
        "mean_tokens_per_instance": tokens / n if n else 0.0,
    }
    if num_documents is not None:
        out["documents"] = num_documents
    return out


def _specials(inst: TrainingInstance) -> list[bool]:
    """True at the [CLS] and two [SEP] slots (by structure, since masking may insert any token)."""
    a_len = inst.segment_ids.count(0) - 2
    special = [False] * len(inst.tokens)
    special[0] = special[a_len + 1] = special[-1] = True
    return special


def write_summary(summary: dict, path: str) -> None:
    fileio.write_json(path, summary)
