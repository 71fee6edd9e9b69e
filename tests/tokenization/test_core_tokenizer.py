"""CoreBertTokenizer (core TF ops only) against the Python reference: identical ids."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keras_bert.tokenization import BertPreprocessor, CoreBertTokenizer, FullTokenizer
from keras_bert.tokenization import core_tokenizer
from tests.tokenization import corpora, strategies


@pytest.fixture(scope="module")
def pairs(uncased_vocab, cased_vocab):
    """(reference, compiled core tokenize) for the uncased and the cased vocab."""
    out = {}
    for name, vocab, lower in (("uncased", uncased_vocab, True), ("cased", cased_vocab, False)):
        core = CoreBertTokenizer(vocab, do_lower_case=lower)
        fn = tf.function(core.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
        out[name] = (FullTokenizer(vocab, lower), fn)
    return out


def _assert_same(ref, fn, texts, batch=512):
    got = []
    for i in range(0, len(texts), batch):
        got += fn(tf.constant(texts[i : i + batch])).to_list()
    for text, ids in zip(texts, got):
        assert ids == ref.tokenize_to_ids(text), repr(text)


def test_exact_values_uncased(uncased_vocab):
    core = CoreBertTokenizer(uncased_vocab)
    got = core.tokenize(
        tf.constant(
            ["naïve café", "ab\x00cd", "ΟΔΟΣ", "[MASK]", "", "a≠b", "hello\u2603 world", "a" * 201]
        )
    )
    assert got.to_list() == [
        [15743, 7668],
        [5925, 2094],
        [1169, 29722, 15297],
        [1031, 7308, 1033],
        [],
        [1037, 1027, 1038],
        [100, 2088],
        [100],
    ]
    assert got.dtype == tf.int32


def test_tokenize_with_offsets_exact_values(uncased_vocab, cased_vocab):
    core = CoreBertTokenizer(uncased_vocab)
    texts = ["Café  déjà", "", "a\x00b\u0301c", "ΟΔΟΣ x" + "y" * 201, "東京"]
    ids, starts, ends = core.tokenize_with_offsets(tf.constant(texts))
    # "a\x00b\u0301c" is "abc": the NUL and the stripped accent count with the letter before.
    assert ids.to_list() == [
        [7668, 2139, 3900],
        [],
        [5925],
        [1169, 29722, 15297, 100],
        [1879, 1755],
    ]
    assert starts.to_list() == [[0, 6, 8], [], [0], [0, 1, 2, 5], [0, 1]]
    assert ends.to_list() == [[4, 8, 10], [], [5], [1, 2, 4, 207], [1, 2]]
    assert ids.dtype == starts.dtype == ends.dtype == tf.int32
    ref = FullTokenizer(uncased_vocab)
    for text, i, s, e in zip(texts, ids.to_list(), starts.to_list(), ends.to_list()):
        pieces, ref_s, ref_e = ref.tokenize_with_offsets(text)
        assert (i, s, e) == (ref.convert_tokens_to_ids(pieces), ref_s, ref_e)
    cased = CoreBertTokenizer(cased_vocab, do_lower_case=False)
    fn = tf.function(
        cased.tokenize_with_offsets, input_signature=[tf.TensorSpec([None], tf.string)]
    )
    ids, starts, ends = fn(tf.constant(["Hi  (1895"]))
    assert ids.to_list() == [[8790, 113, 5639]]
    assert (starts.to_list(), ends.to_list()) == ([[0, 4, 5]], [[2, 5, 9]])


def test_final_sigma_context(uncased_vocab):
    # Final sigma: cased letter before (skipping case-ignorables), none after, same word.
    core = CoreBertTokenizer(uncased_vocab)
    ref = FullTokenizer(uncased_vocab)
    texts = [
        "ΑΣ",
        "Σ",
        "ΑΣΑ",
        "ΑΣ.",
        "ΑΣ.Β",
        "Α.Σ",
        "ΑΣ Β",
        "Α Σ",
        "ΑΣ中",
        "中Σ",
        "Α\u0301Σ",
        "ΣΣΣ",
        "Α\x00Σ",
        "1Σ",
    ]
    assert core.tokenize(tf.constant(texts)).to_list() == [ref.tokenize_to_ids(t) for t in texts]
    assert ref.tokenize("ΑΣ.Β") == ["α", "##σ", ".", "β"] and ref.tokenize("ΑΣ.") == [
        "α",
        "##ς",
        ".",
    ]


def test_tables_are_shared_and_compact():
    block_index, block_values, map_values, starts, lengths = core_tokenizer.unicode_tables(True)
    assert block_index.shape == (0x110000 >> 8,)
    assert block_values.size < 0x110000 // 10  # identical blocks are shared
    assert starts.shape == lengths.shape


@pytest.mark.slow
def test_hard_strings_both_vocabs(pairs):
    for ref, fn in pairs.values():
        _assert_same(ref, fn, corpora.HARD_STRINGS)


@pytest.mark.slow
def test_sst2_and_squad_uncased(pairs, data_dir):
    ref, fn = pairs["uncased"]
    texts = corpora.sst2_dev(data_dir) + corpora.squad_contexts(data_dir, 2000)
    assert len(texts) == 2872
    _assert_same(ref, fn, texts)


@pytest.mark.slow
def test_conll_and_sst2_cased(pairs, data_dir):
    ref, fn = pairs["cased"]
    texts = corpora.conll_dev_sentences(data_dir) + corpora.sst2_dev(data_dir)
    assert len(texts) == 3250 + 872
    _assert_same(ref, fn, texts)


@pytest.mark.slow
@settings(
    max_examples=strategies.examples(100), deadline=None, suppress_health_check=list(HealthCheck)
)
@given(texts=st.lists(strategies.texts, min_size=1, max_size=4))
def test_random_unicode_both_vocabs(pairs, texts):
    for ref, fn in pairs.values():
        got = fn(tf.constant([t.encode("utf-8") for t in texts])).to_list()
        assert got == [ref.tokenize_to_ids(t) for t in texts]


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    data=st.lists(
        st.one_of(st.binary(max_size=120), strategies.texts.map(lambda t: t.encode("utf-8")[:-1])),
        min_size=1,
        max_size=8,
    )
)
def test_invalid_utf8_bytes_are_dropped_like_reference(pairs, data):
    ref, fn = pairs["uncased"]
    assert fn(tf.constant(data)).to_list() == [ref.tokenize_to_ids(b) for b in data]


@pytest.mark.slow
def test_saved_model_loads_without_tensorflow_text(uncased_vocab, tmp_path):
    prep = BertPreprocessor(uncased_vocab, max_seq_length=16, tokenizer="core")

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.prep = prep

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            return self.prep(text)

    module = Module()
    texts = ["naïve café", "", "Hello [MASK] ΟΔΟΣ 中文!", "a" * 201]
    want = {k: v.numpy() for k, v in module.serve(tf.constant(texts)).items()}
    export_dir = str(tmp_path / "sm")
    tf.saved_model.save(module, export_dir, signatures={"serving_default": module.serve})
    code = textwrap.dedent(f"""
        import json, sys
        import tensorflow as tf
        m = tf.saved_model.load({export_dir!r})
        out = m.signatures["serving_default"](text=tf.constant({texts!r}))
        assert "tensorflow_text" not in sys.modules, "tensorflow_text was imported"
        # (`import tensorflow` itself loads parts of keras in TF 2.20; this code imports none.)
        assert "keras_bert" not in sys.modules
        print(json.dumps({{k: v.numpy().tolist() for k, v in out.items()}}))
    """)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp_path),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_array_equal(np.asarray(got[k]), want[k])
    assert want["input_word_ids"][0][:4].tolist() == [101, 15743, 7668, 102]
