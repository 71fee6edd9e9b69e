"""BertPreprocessor: in-graph packing, Keras round trip, tf.data / tf.function, tf_text parity."""

import json
import random
import shutil
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keras_bert.tokenization import BertPreprocessor, FullTokenizer
from keras_bert.tokenization.bert_preprocessor import pack_ragged
from tests.tokenization import corpora, strategies

KEYS = ("input_word_ids", "input_mask", "input_type_ids")


@pytest.fixture(scope="module")
def reference(uncased_vocab):
    return FullTokenizer(uncased_vocab)


@pytest.fixture(scope="module")
def core(uncased_vocab):
    return BertPreprocessor(uncased_vocab, max_seq_length=12)


def _ref_batch(ref, texts, texts_b, max_seq_length):
    rows = [
        ref.encode(a, None if texts_b is None else texts_b[i], max_seq_length)
        for i, a in enumerate(texts)
    ]
    return {k: np.stack([r[k] for r in rows]) for k in KEYS}


def test_default_is_core_and_exact_values(core):
    assert core.tokenizer == "core"
    out = core(tf.constant(["naïve café", "", "Hello [MASK]!"]))
    for k in KEYS:
        assert out[k].dtype == tf.int32 and out[k].shape == (3, 12)
    np.testing.assert_array_equal(
        out["input_word_ids"],
        [
            [101, 15743, 7668, 102] + [0] * 8,
            [101, 102] + [0] * 10,
            [101, 7592, 1031, 7308, 1033, 999, 102] + [0] * 5,
        ],
    )
    np.testing.assert_array_equal(out["input_mask"][2], [1] * 7 + [0] * 5)
    np.testing.assert_array_equal(out["input_type_ids"], np.zeros([3, 12]))


def test_pairs_tuple_and_dict(core, reference):
    a = ["the quick brown fox jumps over the lazy dog", "short", "", "x"]
    b = ["a b c d e f g h", "also short", "", "y z w v u t s r q p o n m"]
    want = _ref_batch(reference, a, b, 12)
    for inputs in (
        (tf.constant(a), tf.constant(b)),
        [tf.constant(a), tf.constant(b)],
        {"text": tf.constant(a), "text_b": tf.constant(b)},
    ):
        out = core(inputs)
        for k in KEYS:
            np.testing.assert_array_equal(out[k], want[k])
    # Exact values for one row (budget 9: a=9, b=8 -> pop a; 8,8 -> ...).
    np.testing.assert_array_equal(want["input_word_ids"][2], [101, 102, 102] + [0] * 9)
    np.testing.assert_array_equal(want["input_type_ids"][2], [0, 0, 1] + [0] * 9)


def test_packing_matches_reference_on_random_lengths(reference):
    rng = random.Random(0)
    vocab_words = ["the", "cat", "naïve", "unaffable", "!", "中", "running", "x"]
    texts_a = [" ".join(rng.choices(vocab_words, k=rng.randint(0, 14))) for _ in range(60)]
    texts_b = [" ".join(rng.choices(vocab_words, k=rng.randint(0, 14))) for _ in range(60)]
    for max_len in (3, 4, 9, 16):
        layer_out = pack_ragged(
            tf.ragged.constant([reference.tokenize_to_ids(t) for t in texts_a], tf.int32),
            tf.ragged.constant([reference.tokenize_to_ids(t) for t in texts_b], tf.int32),
            max_len,
            101,
            102,
            0,
        )
        want = _ref_batch(reference, texts_a, texts_b, max_len)
        for k in KEYS:
            np.testing.assert_array_equal(layer_out[k], want[k], err_msg=f"{k} T={max_len}")
        single = pack_ragged(
            tf.ragged.constant([reference.tokenize_to_ids(t) for t in texts_a], tf.int32),
            None,
            max_len,
            101,
            102,
            0,
        )
        want = _ref_batch(reference, texts_a, None, max_len)
        for k in KEYS:
            np.testing.assert_array_equal(single[k], want[k])


def test_empty_row_changes_nothing_else(core):
    texts = ["first sentence here", "the second one", "third"]
    base = core(tf.constant(texts))
    with_empty = core(tf.constant(texts[:1] + [""] + texts[1:]))
    for k in KEYS:
        np.testing.assert_array_equal(tf.gather(with_empty[k], [0, 2, 3]), base[k])
    np.testing.assert_array_equal(with_empty["input_word_ids"][1], [101, 102] + [0] * 10)


@pytest.mark.slow
def test_tf_data_and_tf_function(core):
    texts = ["naïve café", "hello world", "", "中文"]
    eager = core(tf.constant(texts))
    ds = tf.data.Dataset.from_tensor_slices(texts).batch(3).map(core)
    rows = np.concatenate([b["input_word_ids"].numpy() for b in ds])
    np.testing.assert_array_equal(rows, eager["input_word_ids"])
    fn = tf.function(core, input_signature=[tf.TensorSpec([None], tf.string)])
    out = fn(tf.constant(texts))
    assert out["input_word_ids"].shape.as_list() == [4, 12]
    assert fn.get_concrete_function().structured_outputs["input_mask"].shape.as_list() == [None, 12]
    np.testing.assert_array_equal(out["input_mask"], eager["input_mask"])
    # An empty batch gives [0, T].
    assert fn(tf.constant([], tf.string))["input_word_ids"].shape == (0, 12)


def test_config_round_trip_and_vocab_stored(uncased_vocab, tmp_path):
    path = tmp_path / "vocab.txt"
    shutil.copy(uncased_vocab, path)
    layer = BertPreprocessor(path, max_seq_length=8, name="prep")
    config = json.loads(json.dumps(layer.get_config()))
    assert config["vocab_file"] == str(path) and len(config["vocabulary"]) == 30522
    assert config["vocabulary"][101] == "[CLS]"
    path.unlink()  # the layer and its config no longer need the file
    clone = BertPreprocessor.from_config(config)
    assert clone.get_config() == config
    text = tf.constant(["unaffable naïve"])
    np.testing.assert_array_equal(clone(text)["input_word_ids"], layer(text)["input_word_ids"])
    np.testing.assert_array_equal(
        layer(text)["input_word_ids"], [[101, 14477, 20961, 3468, 15743, 102, 0, 0]]
    )


def test_errors(uncased_vocab, core, tmp_path):
    with pytest.raises(ValueError, match="tokenizer must be one of"):
        BertPreprocessor(uncased_vocab, tokenizer="spacy")
    with pytest.raises(ValueError, match="max_seq_length must be >= 3"):
        BertPreprocessor(uncased_vocab, max_seq_length=2)
    with pytest.raises(ValueError, match="needs vocab_file or vocabulary"):
        BertPreprocessor()
    with pytest.raises(FileNotFoundError):
        BertPreprocessor(tmp_path / "none.txt")
    with pytest.raises(ValueError, match="lacks special tokens"):
        BertPreprocessor(vocabulary=["a", "b", "[UNK]"])
    with pytest.raises(ValueError, match="must be tf.string"):
        core(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="key 'text'"):
        core({"sentence": tf.constant(["a"])})


# ---------------------------------------------------------------------------------------
# tensorflow-text back end against the reference.

# Strings of the hard corpus where tf_text truly cannot match: (reference, tf_text) tokens.
TF_TEXT_PINS_UNCASED = {
    "ﬃ ligature": (["[UNK]", "liga", "##ture"], ["ff", "##i", "liga", "##ture"]),
    "Straße": (["st", "##raße"], ["st", "##ras", "##se"]),
    "ＦＵＬＬ ｗｉｄｔｈ": (["[UNK]", "[UNK]"], ["full", "width"]),
    "x² H₂O": (["x", "##²", "h₂o"], ["x", "##2", "h", "##2", "##o"]),
    "ΟΔΟΣ ΟΔΟΣ.": (
        ["ο", "##δ", "##ος", "ο", "##δ", "##ος", "."],
        ["ο", "##δ", "##ο", "##σ", "ο", "##δ", "##ο", "##σ", "."],
    ),
    "ǅemal": (["[UNK]"], ["d", "##ze", "##mal"]),
    "Ⅻ roman": (["[UNK]", "roman"], ["xii", "roman"]),
    "℃ ㎏": (["[UNK]", "[UNK]"], ["°c", "kg"]),
    "ΣΑΣ Σ": (["σ", "##α", "##ς", "σ"], ["σ", "##α", "##σ", "σ"]),
    "µ micro": (["µ", "micro"], ["μ", "micro"]),
    "ﬁnal": (["ﬁ", "##nal"], ["final"]),
}
# Cased vocab: tensorflow-text counts the word limit in UTF-8 bytes (max_bytes_per_word=200),
# the reference in code points; ASCII words agree, multi-byte words of 101-200 characters not.
TF_TEXT_PINS_CASED = {
    "é" * 200: (["é"] + ["##é"] * 199, ["[UNK]"]),
    "b" * 199 + "\u0301": (["b"] + ["##bb"] * 99 + ["##́"], ["[UNK]"]),
}
# Words of SST-2 dev / 2,000 SQuAD contexts where tf_text differs (all NFKC case folding).
TF_TEXT_WORD_PINS = {
    "⅓": (["⅓"], ["1", "##⁄", "##3"]),
    "2½": (["2", "##½"], ["21", "##⁄", "##2"]),
    "5½": (["5", "##½"], ["51", "##⁄", "##2"]),
    "6½": (["6", "##½"], ["61", "##⁄", "##2"]),
    "7½": (["7", "##½"], ["71", "##⁄", "##2"]),
    "κτεις": (["κ", "##τ", "##ε", "##ι", "##ς"], ["κ", "##τ", "##ε", "##ι", "##σ"]),
    "km²": (["km²"], ["km", "##2"]),
    "…": (["…"], [".", ".", "."]),
    "fußach": (["fu", "##ß", "##ach"], ["fuss", "##ach"]),
    "″": (["″"], ["′", "′"]),
    "altpreußische": (
        ["alt", "##pre", "##u", "##ß", "##ische"],
        ["alt", "##pre", "##uss", "##ische"],
    ),
    "οξυς": (["ο", "##ξ", "##υ", "##ς"], ["ο", "##ξ", "##υ", "##σ"]),
    "γενης": (["γ", "##ε", "##ν", "##ης"], ["γ", "##ε", "##ν", "##η", "##σ"]),
    "φορος": (["φ", "##ο", "##ρ", "##ος"], ["φ", "##ο", "##ρ", "##ο", "##σ"]),
    "υλης": (["υ", "##λ", "##ης"], ["υ", "##λ", "##η", "##σ"]),
    "ιατρικης": (
        ["ι", "##α", "##τ", "##ρ", "##ι", "##κ", "##ης"],
        ["ι", "##α", "##τ", "##ρ", "##ι", "##κ", "##η", "##σ"],
    ),
    "ρηνος": (["ρ", "##η", "##ν", "##ος"], ["ρ", "##η", "##ν", "##ο", "##σ"]),
    "gaißau": (["ga", "##i", "##ß", "##au"], ["ga", "##issa", "##u"]),
}


def _nfkc_affected(ch):
    """Whether NFKC case folding maps `ch` differently from lower()+NFD+strip (or Σ)."""

    def strip(s):
        return "".join(
            c for c in unicodedata.normalize("NFD", s) if unicodedata.category(c) != "Mn"
        )

    return ch == "\u03a3" or strip(unicodedata.normalize("NFKC", ch).casefold()) != strip(
        ch.lower()
    )


def _tokens(prep, ref, texts, batch=512):
    out = []
    for i in range(0, len(texts), batch):
        out += prep.tokenize(tf.constant(texts[i : i + batch])).to_list()
    return [ref.convert_ids_to_tokens(o) for o in out]


@pytest.mark.slow
def test_tf_text_hard_strings_pinned(uncased_vocab, cased_vocab):
    for vocab, lower, pins in (
        (uncased_vocab, True, TF_TEXT_PINS_UNCASED),
        (cased_vocab, False, TF_TEXT_PINS_CASED),
    ):
        ref = FullTokenizer(vocab, lower)
        prep = BertPreprocessor(vocab, lower, tokenizer="tf_text")
        got = _tokens(prep, ref, corpora.HARD_STRINGS)
        for text, tokens in zip(corpora.HARD_STRINGS, got):
            if text in pins:
                assert (ref.tokenize(text), tokens) == pins[text], repr(text)
            else:
                assert tokens == ref.tokenize(text), repr(text)


@pytest.mark.slow
def test_tf_text_matches_reference_on_sst2_and_squad(data_dir, uncased_vocab):
    ref = FullTokenizer(uncased_vocab)
    prep = BertPreprocessor(uncased_vocab, tokenizer="tf_text")
    texts = corpora.sst2_dev(data_dir) + corpora.squad_contexts(data_dir, 2000)
    assert len(texts) == 872 + 2000
    got = _tokens(prep, ref, texts)
    words = []
    for text, tokens in zip(texts, got):
        if tokens == ref.tokenize(text):
            continue
        assert any(_nfkc_affected(c) for c in text), text
        words += ref.basic_tokenizer.tokenize(text)
    # Every differing word is pinned with both outputs.
    words = sorted(set(words))
    seen = set()
    for word, tf_w in zip(words, _tokens(prep, ref, words)):
        ref_w = ref.tokenize(word)
        if ref_w != tf_w:
            assert TF_TEXT_WORD_PINS.get(word) == (ref_w, tf_w), word
            seen.add(word)
    assert seen == set(TF_TEXT_WORD_PINS)


@pytest.mark.slow
def test_tf_text_matches_reference_on_conll_cased(data_dir, cased_vocab):
    ref = FullTokenizer(cased_vocab, do_lower_case=False)
    prep = BertPreprocessor(cased_vocab, do_lower_case=False, tokenizer="tf_text")
    texts = corpora.conll_dev_sentences(data_dir)
    assert len(texts) == 3250
    got = _tokens(prep, ref, texts)
    assert [i for i, (t, g) in enumerate(zip(texts, got)) if g != ref.tokenize(t)] == []


def _documented_tf_text_difference(ref, text, lower) -> bool:
    """Whether docs/tokenization.md explains a difference between tf_text and the reference on
    `text`: a character NFKC case folding maps otherwise (uncased), or a word of the reference's
    basic tokenizer over 200 UTF-8 bytes (tensorflow-text counts bytes, the reference code
    points)."""
    words = ref.basic_tokenizer.tokenize(text)
    too_long = any(len(w.encode("utf-8")) > 200 for w in words)
    return too_long or (lower and any(_nfkc_affected(c) for c in text))


@pytest.fixture(scope="module")
def tf_text_pairs(uncased_vocab, cased_vocab):
    """(reference, tf_text preprocessor, do_lower_case) for the uncased and the cased vocab."""
    return [
        (FullTokenizer(vocab, lower), BertPreprocessor(vocab, lower, tokenizer="tf_text"), lower)
        for vocab, lower in ((uncased_vocab, True), (cased_vocab, False))
    ]


@pytest.mark.slow
@settings(
    max_examples=strategies.examples(100), deadline=None, suppress_health_check=list(HealthCheck)
)
@given(texts=st.lists(strategies.texts, min_size=1, max_size=4))
def test_tf_text_differs_from_reference_only_as_documented(tf_text_pairs, texts):
    for ref, prep, lower in tf_text_pairs:
        got = prep.tokenize(tf.constant(texts)).to_list()
        for text, ids in zip(texts, got):
            if ids != ref.tokenize_to_ids(text):
                assert _documented_tf_text_difference(ref, text, lower), repr(text)


@settings(
    max_examples=strategies.examples(50), deadline=None, suppress_health_check=list(HealthCheck)
)
@given(
    pairs=st.lists(st.tuples(strategies.texts, strategies.texts), min_size=1, max_size=4),
    max_seq_length=st.sampled_from([3, 4, 7, 12]),
)
def test_packing_of_any_text_equals_reference_encode(reference, pairs, max_seq_length):
    # BertPreprocessor = the tokenizer (its ids equal the reference's: test_core_tokenizer's
    # properties) then pack_ragged, checked here on the ids of any text against `encode`.
    texts_a, texts_b = [list(t) for t in zip(*pairs)]
    ids_a, ids_b = (
        tf.ragged.constant([reference.tokenize_to_ids(t) for t in texts], tf.int32, ragged_rank=1)
        for texts in (texts_a, texts_b)
    )
    out = pack_ragged(ids_a, ids_b, max_seq_length, 101, 102, 0)
    want = _ref_batch(reference, texts_a, texts_b, max_seq_length)
    for k in KEYS:
        np.testing.assert_array_equal(out[k], want[k], err_msg=f"{k} T={max_seq_length}")


def test_python_list_of_two_strings_is_a_batch_not_a_pair(uncased_vocab):
    """["a", "b"] is two sentences; a pair must be a tuple of tensors or a dict."""
    from keras_bert.tokenization import BertPreprocessor, FullTokenizer

    layer = BertPreprocessor(str(uncased_vocab), max_seq_length=8)
    out = layer(["The movie was wonderful.", "A dull mess."])
    assert tuple(out["input_word_ids"].shape) == (2, 8)
    reference = FullTokenizer(str(uncased_vocab), do_lower_case=True)
    for row, text in enumerate(["The movie was wonderful.", "A dull mess."]):
        expected = reference.encode(text, max_seq_length=8)["input_word_ids"]
        assert out["input_word_ids"][row].numpy().tolist() == list(expected)
    assert int(out["input_type_ids"].numpy().sum()) == 0
