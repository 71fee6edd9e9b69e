"""Pretraining instances on a real corpus slice (WikiText-2 test) with the real uncased vocab."""

import collections
import random

import pytest

from keras_bert.data import pretraining_data as pd
from keras_bert.tokenization import FullTokenizer

SEQ, PRED, PROB = 128, 20, 0.15


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return FullTokenizer(uncased_vocab, do_lower_case=True)


@pytest.fixture(scope="module")
def wiki_documents(data_dir, tokenizer):
    raw = pd.read_raw_documents(str(data_dir / "wikitext/wikitext-2-raw/wiki.test.raw"), "wikitext")
    raw = raw[:24]  # ~2/5 of the split: about 1,100 instances per dupe pass
    return [[tokenizer.tokenize(s) for s in doc] for doc in raw]


@pytest.fixture(scope="module")
def vocab_words(tokenizer):
    return list(tokenizer.vocab.keys())


def _original_tokens(inst):
    tokens = list(inst.tokens)
    for pos, label in zip(inst.masked_lm_positions, inst.masked_lm_labels):
        tokens[pos] = label
    return tokens


def test_wikitext_reader_splits_articles_and_sentences(data_dir):
    raw = pd.read_raw_documents(str(data_dir / "wikitext/wikitext-2-raw/wiki.test.raw"), "wikitext")
    assert len(raw) == 62  # 64 ` = Title = ` lines, two of them without a body paragraph
    assert raw[0][0] == "Robert Boulter is an English film , television and theatre actor ."
    assert raw[0][1].startswith(
        "He had a guest-starring role on the television series The Bill in 2000 ."
    )
    sentences = [s for doc in raw for s in doc]
    assert not any(s.startswith("= =") or s.endswith("= =") for s in sentences)  # headings dropped
    assert "= Qualified for the next round" in sentences  # a table legend line, not a title
    assert pd.split_wikitext_sentences(
        " In 1 @,@ 000 the U.S. grew 2 @.@ 5 % . Then it fell ! ok "
    ) == ["In 1,000 the U.S. grew 2.5 % .", "Then it fell ! ok"]


@pytest.mark.slow
def test_summary_figures_on_wikitext(wiki_documents, vocab_words):
    instances = pd.create_training_instances(
        wiki_documents,
        vocab_words,
        SEQ,
        dupe_factor=3,
        masked_lm_prob=PROB,
        max_predictions_per_seq=PRED,
        random_seed=7,
    )
    s = pd.summarize_instances(instances)
    assert s["instances"] > 2000
    assert abs(s["masked_fraction"] - PROB) < 0.01
    assert abs(s["mask_split"]["mask"] - 0.8) < 0.03
    assert abs(s["mask_split"]["random"] - 0.1) < 0.03
    assert abs(s["mask_split"]["keep"] - 0.1) < 0.03
    assert abs(s["nsp_positive_rate"] - 0.5) < 0.05
    # Recount independently of summarize_instances.
    kinds = collections.Counter(k for i in instances for k in i.mask_kinds)
    assert sum(kinds.values()) == s["masked_tokens"]
    assert s["tokens"] == sum(len(i.tokens) for i in instances)
    for inst in instances:
        n = len(inst.tokens) - 3
        assert len(inst.tokens) <= SEQ
        assert len(inst.masked_lm_positions) == min(PRED, max(1, round(n * PROB)))
        assert inst.masked_lm_positions == sorted(inst.masked_lm_positions)
        a_len = inst.segment_ids.count(0) - 2
        specials = {0, a_len + 1, len(inst.tokens) - 1}
        assert not specials & set(inst.masked_lm_positions)
        original = _original_tokens(inst)
        assert original[0] == "[CLS]" and original[a_len + 1] == "[SEP]" and original[-1] == "[SEP]"
        assert "[CLS]" not in inst.masked_lm_labels and "[SEP]" not in inst.masked_lm_labels
        for pos, label, kind in zip(
            inst.masked_lm_positions, inst.masked_lm_labels, inst.mask_kinds
        ):
            if kind == "mask":
                assert inst.tokens[pos] == "[MASK]"
            elif kind == "keep":
                assert inst.tokens[pos] == label


@pytest.mark.slow
def test_whole_word_masking_never_masks_part_of_a_word(wiki_documents, vocab_words):
    instances = pd.create_training_instances(
        wiki_documents[:6], vocab_words, SEQ, dupe_factor=2, do_whole_word_mask=True, random_seed=3
    )
    multi_piece_words_masked = 0
    for inst in instances:
        original = _original_tokens(inst)
        masked = set(inst.masked_lm_positions)
        words, prev_special = [], True
        for i, tok in enumerate(original):
            if i in (0, len(original) - 1) or (tok == "[SEP]" and inst.segment_ids[i] == 0):
                prev_special = True
                continue
            if tok.startswith("##") and not prev_special:
                words[-1].append(i)
            else:
                words.append([i])
            prev_special = False
        for word in words:
            hit = [i in masked for i in word]
            assert all(hit) or not any(hit), (original, word, inst.masked_lm_positions)
            multi_piece_words_masked += len(word) > 1 and all(hit)
        n = len(original) - 3
        assert 1 <= len(masked) <= min(PRED, max(1, round(n * PROB)))
    assert multi_piece_words_masked > 50


def test_whole_word_group_does_not_cross_sep():
    tokens = ["[CLS]", "un", "##able", "[SEP]", "##ing", "x", "[SEP]"]
    out, pos, labels, kinds = pd.create_masked_lm_predictions(
        tokens, 1.0, 20, ["a"], random.Random(0), do_whole_word_mask=True
    )
    assert pos == [1, 2, 4, 5] and labels == ["un", "##able", "##ing", "x"]
    assert out[0] == "[CLS]" and out[3] == "[SEP]" and out[6] == "[SEP]"


def test_number_to_predict_rounds_candidates_not_specials():
    # 10 candidates * 0.15 = 1.5 -> 2 (round half to even); 3 candidates -> max(1, 0) = 1.
    tokens = ["[CLS]"] + ["w"] * 6 + ["[SEP]"] + ["v"] * 4 + ["[SEP]"]
    assert len(pd.create_masked_lm_predictions(tokens, 0.15, 20, ["q"], random.Random(1))[1]) == 2
    assert (
        len(
            pd.create_masked_lm_predictions(
                ["[CLS]", "a", "[SEP]", "b", "c", "[SEP]"], 0.15, 20, ["q"], random.Random(1)
            )[1]
        )
        == 1
    )
    assert len(pd.create_masked_lm_predictions(tokens, 1.0, 3, ["q"], random.Random(1))[1]) == 3


def test_nsp_labels_match_segment_sources():
    # Each document uses its own words, so a segment's source document is known exactly.
    docs = [[[f"d{d}s{s}w{w}" for w in range(3)] for s in range(8)] for d in range(6)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    instances = pd.create_training_instances(
        docs,
        vocab,
        max_seq_length=20,
        dupe_factor=20,
        short_seq_prob=0.0,
        masked_lm_prob=0.01,
        random_seed=5,
    )
    labels = collections.Counter()
    for inst in instances:
        orig = _original_tokens(inst)
        a_len = inst.segment_ids.count(0) - 2
        a, b = orig[1 : a_len + 1], orig[a_len + 2 : -1]
        doc_a = {t.split("s")[0] for t in a}
        doc_b = {t.split("s")[0] for t in b}
        assert len(doc_a) == 1 and len(doc_b) == 1
        if inst.is_random_next:
            assert doc_a != doc_b  # never from the same document
        else:
            assert doc_a == doc_b
            sa = max(int(t.split("s")[1].split("w")[0]) for t in a)
            sb = min(int(t.split("s")[1].split("w")[0]) for t in b)
            assert sb == sa + 1  # the true continuation
        labels[inst.is_random_next] += 1
    assert labels[True] > 0 and labels[False] > 0


def test_too_few_documents_is_an_error():
    with pytest.raises(ValueError, match="at least 2 documents"):
        pd.create_training_instances([[["a"]]], ["a"])
