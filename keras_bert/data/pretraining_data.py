"""Pretraining instances for BERT's masked LM + next-sentence tasks, written as TFRecords.

A port of google-research/bert `create_pretraining_data.py` (BERT paper, section 3.1 and
appendix A.2) with the same flags and sampling, made deterministic for a seed whatever the input
order or the number of workers (every random draw of a document derives from the seed and the
document's content: `create_group_instances`), run as an Apache Beam pipeline by the recipe
(`keras_bert.data.pretraining_beam`), and instrumented with a summary. Deliberate differences from the reference
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
import dataclasses
import hashlib
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
        path: str, a UTF-8 text file (`keras_bert.fileio.read_user_text`: a byte-order mark
            dropped; lines end at "\n" or "\r\n", `fileio.text_lines`).
        input_format: "text" = google-research/bert's format (one sentence per line, a blank
            line between documents); "wikitext" = WikiText (`wiki.*.raw` or `.tokens`): a
            top-level ` = Title = ` line starts a document, ` = = Section = = ` headings and
            blank lines are dropped, each paragraph line is split by `split_wikitext_sentences`.

    Raises:
        ValueError: for an unknown input_format; a file that is not UTF-8
            (`fileio.UserFileError`, naming the file, byte offset and line).
    """
    if input_format not in ("text", "wikitext"):
        raise ValueError(f"input_format must be 'text' or 'wikitext', got {input_format!r}")
    documents: list[list[str]] = [[]]
    for line in fileio.text_lines(fileio.read_user_text(path), path):
        if input_format == "text":
            line = line.strip()
            if not line:
                documents.append([])
            else:
                documents[-1].append(line)
        elif _WIKITEXT_TITLE.match(line) and not _WIKITEXT_HEADING.match(line):
            documents.append([])
        elif line.strip() and not _WIKITEXT_HEADING.match(line):
            documents[-1].extend(split_wikitext_sentences(line))
    return [d for d in documents if d]


def tokenize_document(raw_document: Sequence[str], tokenize) -> list[list[str]]:
    """A raw document (sentence strings) -> its WordPiece-tokenized sentences; sentences that
    tokenize to nothing are dropped (an empty list means the document is dropped)."""
    return [t for t in (tokenize(s) for s in raw_document) if t]


def tokenize_corpus(
    input_files: Sequence[str],
    vocab_file: str,
    do_lower_case: bool,
    input_format: str = "text",
    show_progress: bool = False,
) -> list[list[list[str]]]:
    """Reads and tokenizes every file into documents of WordPiece-tokenized sentences, in this
    process (the recipe runs the same per-document code on Apache Beam:
    `keras_bert.data.pretraining_beam`).

    Returns:
        list of documents; a document is a list of sentences; a sentence a list of str pieces.
        Documents or sentences that tokenize to nothing are dropped.
    """
    tokenize = FullTokenizer(vocab_file, do_lower_case=do_lower_case).tokenize
    raw = [doc for path in input_files for doc in read_raw_documents(path, input_format)]
    documents = []
    for doc in progress_bar(
        raw, desc="tokenizing documents", unit="doc", disable=not show_progress
    ):
        sentences = tokenize_document(doc, tokenize)
        if sentences:
            documents.append(sentences)
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


@dataclasses.dataclass(frozen=True)
class InstanceSettings:
    """How instances are made from documents (the recipe's flags of the same names); the one
    check of them is `check`."""

    max_seq_length: int = 128
    dupe_factor: int = 10
    short_seq_prob: float = 0.1
    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    do_whole_word_mask: bool = False
    random_seed: int = 12345
    num_document_groups: int = 1

    def check(self) -> None:
        """Raises ValueError naming a setting out of range (the recipe, the library and the
        Beam pipeline all call this)."""
        check_max_seq_length(self.max_seq_length, is_pair=True)  # the one rule, then our own:
        if self.max_seq_length < 5:  # [CLS] A [SEP] B [SEP] with a token in each segment
            raise ValueError(
                f"max_seq_length={self.max_seq_length} must be >= 5 for pretraining instances "
                "(two non-empty segments and three special tokens)"
            )
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob={self.masked_lm_prob} must be in (0, 1]")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq={self.max_predictions_per_seq} must be >= 1")
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor={self.dupe_factor} must be >= 1")
        if self.num_document_groups < 1:
            raise ValueError(f"num_document_groups={self.num_document_groups} must be >= 1")


def document_key(document: Sequence[Sequence[str]]) -> str:
    """A tokenized document's identity: the SHA-256 of its pieces (hex). Everything random about
    a document derives from it and the seed, never from its position in the input."""
    h = hashlib.sha256()
    for sentence in document:
        h.update("\x1f".join(sentence).encode("utf-8"))
        h.update(b"\x1e")
    return h.hexdigest()


def document_group(key: str, num_groups: int) -> int:
    """The group (0 .. num_groups - 1) a document belongs to; its random next segments come from
    documents of the same group."""
    return int(key[:16], 16) % num_groups


def instance_key(random_seed: int, dupe: int, key: str, index: int) -> str:
    """The sort key of a document's `index`-th instance in pass `dupe`: a hash, so that sorting by
    it shuffles instances the same way on every runner."""
    return hashlib.sha256(f"{random_seed}:{dupe}:{key}:{index}".encode()).hexdigest()


def shard_of(key: str, num_shards: int) -> int:
    """The output shard of an instance with sort key `key`."""
    return int(key[16:32], 16) % num_shards


def create_group_instances(
    keyed_documents: Iterable[tuple[str, list]],
    vocab_words: Sequence[str],
    settings: InstanceSettings,
) -> list[tuple[str, TrainingInstance]]:
    """Instances of one document group, each with its sort key (`instance_key`).

    Each document's instances in pass `dupe` use their own random stream, seeded by
    `settings.random_seed`, `dupe` and the document's key, and draw random next segments from
    the group sorted by key: the result depends on the group's documents, never on their order
    or on how the work was split.

    Args:
        keyed_documents: (document_key(doc), doc) pairs of the group, in any order.

    Raises:
        ValueError: fewer than two documents (a random next segment needs another document).
    """
    group = sorted(keyed_documents, key=lambda kd: kd[0])
    if len(group) < 2:
        raise ValueError(
            f"need at least 2 documents per group for next-sentence prediction, got {len(group)}"
            " (fewer --num_document_groups, or more input)"
        )
    documents = [doc for _, doc in group]
    s = settings
    out = []
    for dupe in range(s.dupe_factor):
        for index, (key, _) in enumerate(group):
            rng = random.Random(f"{s.random_seed}:{dupe}:{key}")
            made = create_instances_from_document(
                documents,
                index,
                s.max_seq_length,
                s.short_seq_prob,
                s.masked_lm_prob,
                s.max_predictions_per_seq,
                vocab_words,
                rng,
                s.do_whole_word_mask,
            )
            out.extend(
                (instance_key(s.random_seed, dupe, key, j), instance)
                for j, instance in enumerate(made)
            )
    return out


def create_training_instances(
    documents: list,
    vocab_words: Sequence[str],
    max_seq_length: int = 128,
    *,
    show_progress: bool = False,
    **settings,
) -> list[TrainingInstance]:
    """Creates shuffled instances from tokenized documents, `dupe_factor` passes with fresh masks.

    In memory, the same code as the Beam pipeline (`keras_bert.data.pretraining_beam`): documents
    grouped by `document_group`, each group's instances made by `create_group_instances`, all
    sorted by their keys. The Beam pipeline's shards hold exactly these instances.

    Args:
        documents: list of documents (list of sentences, each a non-empty list of str pieces).
        vocab_words: the vocabulary in id order (random replacements are drawn from it).
        max_seq_length: int >= 5. Tokens per instance including [CLS] and two [SEP].
        show_progress: a progress bar over the document groups.
        **settings: the other `InstanceSettings` fields (dupe_factor, masked_lm_prob,
            num_document_groups: random next segments come from the same group, ...).

    Returns:
        list of TrainingInstance, in an order fixed by `random_seed` and the documents' content.

    Raises:
        ValueError: a group of fewer than two documents or out-of-range arguments.
    """
    if len(documents) < 2:
        raise ValueError(
            f"need at least 2 documents for next-sentence prediction, got {len(documents)}"
        )
    instance_settings = InstanceSettings(max_seq_length=max_seq_length, **settings)
    instance_settings.check()
    groups: dict[int, list] = collections.defaultdict(list)
    for document in documents:
        key = document_key(document)
        groups[document_group(key, instance_settings.num_document_groups)].append((key, document))
    keyed = []
    bar = progress_bar(
        total=len(groups), desc="creating instances", unit="group", disable=not show_progress
    )
    for group in groups.values():
        keyed.extend(create_group_instances(group, vocab_words, instance_settings))
        bar.update(1)
    bar.close()
    keyed.sort(key=lambda ki: ki[0])
    return [instance for _, instance in keyed]


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


def write_shard(
    path: str,
    instances: Iterable[TrainingInstance],
    vocab: dict,
    max_seq_length: int,
    max_predictions_per_seq: int,
) -> int:
    """Writes instances, in order, as one TFRecord file (uncompressed, byte-deterministic:
    Examples are serialized with `deterministic=True`, since protobuf map order otherwise varies
    between processes). The file appears under its name only when complete
    (`fileio.writing_path`); a failed write leaves nothing.

    Returns:
        int: records written.
    """
    import tensorflow as tf

    if fileio.parent(path):
        fileio.makedirs(fileio.parent(path))
    written = fileio.writing_path(path)
    count = 0
    complete = False
    try:
        with tf.io.TFRecordWriter(written) as writer:
            for instance in instances:
                features = instance_to_features(
                    instance, vocab, max_seq_length, max_predictions_per_seq
                )
                writer.write(features_to_example(features).SerializeToString(deterministic=True))
                count += 1
        complete = True
    finally:
        if complete:
            fileio.commit_write(written, path)
        elif written != path and fileio.exists(written):
            fileio.remove(written)
    return count


def write_instances(
    instances: Sequence[TrainingInstance],
    vocab: dict,
    output_files: Sequence[str],
    max_seq_length: int,
    max_predictions_per_seq: int,
) -> list[int]:
    """Writes instances round-robin into the TFRecord files (`write_shard` each).

    Returns:
        list of int: records written per file.
    """
    n = len(output_files)
    return [
        write_shard(path, instances[i::n], vocab, max_seq_length, max_predictions_per_seq)
        for i, path in enumerate(output_files)
    ]


def instance_stats(instance: TrainingInstance) -> collections.Counter:
    """One instance's counts; sums of these make a summary (`summary_from_stats`)."""
    stats = collections.Counter(
        instances=1,
        tokens=len(instance.tokens),
        candidate_tokens=sum(1 for s in _specials(instance) if not s),
        positives=int(instance.is_random_next),
    )
    stats.update(f"mask:{kind}" for kind in instance.mask_kinds)
    return stats


def summary_from_stats(stats: collections.Counter, num_documents: int | None = None) -> dict:
    """Summed `instance_stats` -> the summary dict (`summarize_instances`)."""
    n, tokens, cands = stats["instances"], stats["tokens"], stats["candidate_tokens"]
    masked = sum(stats[f"mask:{k}"] for k in MASK_KINDS)
    out = {
        "instances": n,
        "tokens": tokens,
        "candidate_tokens": cands,
        "masked_tokens": masked,
        "masked_fraction": masked / cands if cands else 0.0,
        "mask_split": {k: (stats[f"mask:{k}"] / masked if masked else 0.0) for k in MASK_KINDS},
        "nsp_positive_rate": stats["positives"] / n if n else 0.0,
        "mean_tokens_per_instance": tokens / n if n else 0.0,
    }
    if num_documents is not None:
        out["documents"] = num_documents
    return out


def summarize_instances(
    instances: Iterable[TrainingInstance], num_documents: int | None = None
) -> dict:
    """Statistics of a set of instances (JSON-able dict).

    Keys: instances; tokens (real tokens incl. specials); candidate_tokens (non-[CLS]/[SEP]);
    masked_tokens; masked_fraction = masked / candidates; mask_split {mask, random, keep} =
    fractions of masked tokens; nsp_positive_rate = fraction with label 1 (random next);
    mean_tokens_per_instance; documents (if given).
    """
    stats = collections.Counter()
    for instance in instances:
        stats.update(instance_stats(instance))
    return summary_from_stats(stats, num_documents)


def _specials(inst: TrainingInstance) -> list[bool]:
    """True at the [CLS] and two [SEP] slots (by structure, since masking may insert any token)."""
    a_len = inst.segment_ids.count(0) - 2
    special = [False] * len(inst.tokens)
    special[0] = special[a_len + 1] = special[-1] = True
    return special


def write_summary(summary: dict, path: str) -> None:
    fileio.write_json(path, summary)
