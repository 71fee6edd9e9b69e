"""google-research/bert's `tokenization` names on our reference tokenizer.

The cases are those of google-research/bert `tokenization_test.py` (the same vocabularies,
texts and expected tokens and ids), run after changing only the import; plus the reference's
casing check and its string helpers.
"""

import io
import os
import types

import pytest

from keras_bert.tokenization import google_tokenization as tokenization

# tokenization_test.py's vocabulary: no [PAD], and its test_full_tokenizer needs none.
VOCAB_TOKENS = [
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "want",
    "##want",
    "##ed",
    "wa",
    "un",
    "runn",
    "##ing",
    ",",
]


@pytest.fixture
def vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes("".join(t + "\n" for t in VOCAB_TOKENS).encode("utf-8"))
    return str(path)


def test_full_tokenizer(vocab_file):
    tokenizer = tokenization.FullTokenizer(vocab_file)
    tokens = tokenizer.tokenize("UNwant\u00e9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]
    assert tokenizer.convert_ids_to_tokens([7, 4, 5]) == ["un", "##want", "##ed"]
    assert tokenizer.inv_vocab[10] == ","


def test_chinese():
    assert tokenization.BasicTokenizer().tokenize("ah\u535a\u63a8zz") == [
        "ah",
        "\u535a",
        "\u63a8",
        "zz",
    ]


def test_basic_tokenizer_lower_and_no_lower():
    lower = tokenization.BasicTokenizer(do_lower_case=True)
    assert lower.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert lower.tokenize("H\u00e9llo") == ["hello"]
    cased = tokenization.BasicTokenizer(do_lower_case=False)
    assert cased.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["HeLLo", "!", "how", "Are", "yoU", "?"]


def test_wordpiece_tokenizer():
    vocab = {t: i for i, t in enumerate(VOCAB_TOKENS[:-1])}
    tokenizer = tokenization.WordpieceTokenizer(vocab=vocab)
    assert tokenizer.tokenize("") == []
    assert tokenizer.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenizer.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]


def test_module_level_conversions():
    vocab = {t: i for i, t in enumerate(VOCAB_TOKENS[:-1])}
    tokens = ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenization.convert_tokens_to_ids(vocab, tokens) == [7, 4, 5, 8, 9]
    inv = {i: t for t, i in vocab.items()}
    assert tokenization.convert_ids_to_tokens(inv, [7, 4, 5, 8, 9]) == tokens
    with pytest.raises(KeyError):
        tokenization.convert_tokens_to_ids(vocab, ["nope"])


def test_predicates():
    assert tokenization._is_whitespace(" ") and tokenization._is_whitespace("\t")
    assert tokenization._is_whitespace("\r") and tokenization._is_whitespace("\n")
    assert tokenization._is_whitespace("\u00a0")
    assert not tokenization._is_whitespace("A") and not tokenization._is_whitespace("-")
    assert tokenization._is_control("\u0005")
    assert not any(tokenization._is_control(c) for c in ("A", " ", "\t", "\r"))
    assert not tokenization._is_control("\U0001f4a9")
    assert all(tokenization._is_punctuation(c) for c in ("-", "$", "`", "."))
    assert not tokenization._is_punctuation("A") and not tokenization._is_punctuation(" ")


def test_load_vocab_and_string_helpers(vocab_file):
    vocab = tokenization.load_vocab(vocab_file)
    assert list(vocab.items())[:3] == [("[UNK]", 0), ("[CLS]", 1), ("[SEP]", 2)]
    assert tokenization.convert_to_unicode(b"caf\xc3\xa9\xff") == "caf\u00e9"
    assert tokenization.printable_text("caf\u00e9") == "caf\u00e9"
    with pytest.raises(ValueError, match="Unsupported string type: <class 'int'>"):
        tokenization.convert_to_unicode(5)
    assert tokenization.whitespace_tokenize("  a \n b ") == ["a", "b"]


def test_validate_case_matches_checkpoint():
    check = tokenization.validate_case_matches_checkpoint
    check(True, "gs://b/uncased_L-12_H-768_A-12/bert_model.ckpt")
    check(False, "x/cased_L-12_H-768_A-12/bert_model.ckpt")
    check(False, "x/my_model/bert_model.ckpt")  # unknown name: not checked
    check(False, None)
    with pytest.raises(ValueError) as err:
        check(False, "x/uncased_L-12_H-768_A-12/bert_model.ckpt")
    assert str(err.value) == (
        "You passed in `--do_lower_case=False` with `--init_checkpoint=x/uncased_L-12_H-768_A-12"
        "/bert_model.ckpt`. However, `uncased_L-12_H-768_A-12` seems to be a lowercased model, "
        "so you should pass in `--do_lower_case=True` so that the fine-tuning matches how the "
        "model was pre-training. If this error is wrong, please just comment out this check."
    )
    with pytest.raises(ValueError, match="seems to be a cased model"):
        check(True, "x/multi_cased_L-12_H-768_A-12/bert_model.ckpt")


def test_model_garden_tokenization_test_passes_with_only_the_import_changed():
    """tf-models-official's own `official/nlp/tools/tokenization_test.py`, import swapped."""
    import unittest

    import official.nlp.tools

    path = os.path.join(os.path.dirname(official.nlp.tools.__file__), "tokenization_test.py")
    with open(path, encoding="utf-8") as f:
        source = f.read()
    original = "from official.nlp.tools import tokenization\n"
    assert source.count(original) == 1
    module = types.ModuleType("model_garden_tokenization_test")
    exec(
        compile(
            source.replace(
                original,
                "from keras_bert.tokenization import google_tokenization as tokenization\n",
            ),
            path,
            "exec",
        ),
        module.__dict__,
    )
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(module.TokenizationTest)
    names = {test._testMethodName for test in suite}
    result = unittest.TextTestRunner(stream=io.StringIO()).run(suite)
    assert {
        "test_full_tokenizer",
        "test_basic_tokenizer_no_split_on_punc",
        "test_wordpiece_tokenizer",
        "test_is_punctuation",
    } <= names and len(names) >= 10
    assert result.wasSuccessful(), result.failures + result.errors


def test_same_tokens_as_model_garden_on_real_text(data_dir, uncased_vocab, tmp_path):
    """Model Garden's copy of the reference vs ours: SST-2 dev, vocab without [PAD]/[CLS]/[SEP]."""
    from official.nlp.tools import tokenization as reference

    lines = uncased_vocab.read_text(encoding="utf-8").splitlines()
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text(
        "".join(t + "\n" for t in lines if t not in ("[PAD]", "[CLS]", "[SEP]")), encoding="utf-8"
    )
    with open(data_dir / "glue" / "sst2" / "dev.tsv", encoding="utf-8") as f:
        texts = [line.split("\t")[0] for line in f][1:]
    texts += ["naïve café", "ah\u535a\u63a8zz", "Straße \u00bd x\u200by", "UNwant\u00e9d,running"]
    for lower in (True, False):
        ours = tokenization.FullTokenizer(str(vocab_file), do_lower_case=lower)
        ref = reference.FullTokenizer(str(vocab_file), do_lower_case=lower)
        assert ours.vocab == ref.vocab
        for text in texts:
            tokens = ref.tokenize(text)
            assert ours.tokenize(text) == tokens, text
            assert ours.convert_tokens_to_ids(tokens) == ref.convert_tokens_to_ids(tokens)
