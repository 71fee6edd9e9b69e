"""The Python reference tokenizer: every PITFALLS.md tokenization rule with exact ids."""

import pytest

from keras_bert.tokenization import full_tokenizer as ft
from keras_bert.tokenization import FullTokenizer, MAX_INPUT_CHARS_PER_WORD, load_vocab


@pytest.fixture(scope="module")
def uncased(uncased_vocab):
    return FullTokenizer(uncased_vocab, do_lower_case=True)


@pytest.fixture(scope="module")
def cased(cased_vocab):
    return FullTokenizer(cased_vocab, do_lower_case=False)


def test_vocab_special_ids(uncased, cased):
    for tok in (uncased, cased):
        assert [tok.vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [
            0,
            100,
            101,
            102,
            103,
        ]
        assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id) == (0, 100, 101, 102)
    assert len(uncased.vocab) == 30522 and len(cased.vocab) == 28996
    assert cased.convert_tokens_to_ids(["the", "The", "Hello", "world"]) == [1103, 1109, 8667, 1362]


def test_accents_follow_case(uncased, cased):
    assert uncased.tokenize("naïve café") == ["naive", "cafe"]
    assert uncased.tokenize_to_ids("naïve café") == [15743, 7668]
    assert uncased.tokenize_to_ids("Naïve Café") == [15743, 7668]
    # Cased: no NFD, no stripping.
    assert cased.tokenize("naïve café") == ["na", "##ï", "##ve", "café"]
    assert cased.tokenize_to_ids("Naïve Café") == [11896, 28203, 2707, 21036]


def test_reference_lowercase_is_not_nfkc_casefold(uncased):
    assert uncased.tokenize("Straße") == ["st", "##raße"]  # casefold would give "strasse"
    assert uncased.tokenize("ﬃ") == ["[UNK]"]  # NFKC would give "ffi"
    assert uncased.tokenize("x²") == ["x", "##²"]
    # str.lower() applies the final-sigma rule.
    assert uncased.tokenize("ΟΔΟΣ") == ["ο", "##δ", "##ος"]
    assert uncased.tokenize_to_ids("ΟΔΟΣ") == [1169, 29722, 15297]
    assert uncased.tokenize("İ") == ["i"]


@pytest.mark.parametrize("joiner", ["\x00", "\u200b", "\ufffd", "\x07", "\x0b", "\u00ad", "\ufeff"])
def test_control_and_format_chars_are_deleted_and_join(uncased, cased, joiner):
    assert uncased.tokenize_to_ids(f"ab{joiner}cd") == [5925, 2094]  # "abcd" -> abc ##d
    assert cased.tokenize_to_ids(f"ab{joiner}cd") == [170, 1830, 1665, 1181]


def test_unicode_whitespace(uncased):
    assert uncased.tokenize_to_ids("a\tb\nc\rd") == [1037, 1038, 1039, 1040]
    assert uncased.tokenize_to_ids("a\u3000b\u00a0c\u2009d") == [1037, 1038, 1039, 1040]
    # U+2028 is Zl: not _is_whitespace, but str.split() splits on it.
    assert uncased.tokenize_to_ids("a\u2028b") == [1037, 1038]


def test_empty_and_whitespace_only(uncased):
    for text in ("", " ", " \t\n\r ", "\u3000\u00a0", "\x00\x01"):
        assert uncased.tokenize(text) == []


def test_word_length_limit_counts_code_points(uncased):
    assert MAX_INPUT_CHARS_PER_WORD == 200
    assert uncased.tokenize("a" * 201) == ["[UNK]"]
    assert uncased.tokenize("un" + "a" * 199) == ["[UNK]"]
    pieces = uncased.tokenize("a" * 200)
    assert "[UNK]" not in pieces and len(pieces) > 1


def test_word_length_limit_is_not_bytes(cased):
    # 200 two-byte characters (400 bytes) are still within the limit; 201 are not.
    assert cased.tokenize("é" * 200) == ["é"] + ["##é"] * 199
    assert cased.tokenize("é" * 201) == ["[UNK]"]


def test_wordpiece_greedy_longest_match(uncased):
    assert uncased.tokenize("unaffable") == ["una", "##ffa", "##ble"]
    assert uncased.tokenize_to_ids("unaffable") == [14477, 20961, 3468]
    assert uncased.tokenize("unwanted running") == ["unwanted", "running"]


def test_wordpiece_all_or_nothing(uncased):
    # "hello" matches, the snowman has no piece: the whole word is one [UNK].
    assert "\u2603" not in uncased.vocab and "##\u2603" not in uncased.vocab
    assert uncased.tokenize("hello\u2603 world") == ["[UNK]", "world"]
    assert uncased.tokenize_to_ids("hello\u2603") == [100]


def test_special_tokens_in_text_are_split(uncased, cased):
    assert uncased.tokenize_to_ids("[MASK]") == [1031, 7308, 1033]
    assert uncased.tokenize("hello [SEP] world") == ["hello", "[", "sep", "]", "world"]
    assert cased.tokenize_to_ids("[MASK]") == [164, 9960, 1708, 2428, 166]
    assert 103 not in uncased.tokenize_to_ids("[MASK] [CLS] [SEP] [UNK] [PAD]")


def test_punctuation_split(uncased):
    assert uncased.tokenize("Hello!!! ...what?!") == [
        "hello",
        "!",
        "!",
        "!",
        ".",
        ".",
        ".",
        "what",
        "?",
        "!",
    ]
    assert uncased.tokenize("a.b,c") == ["a", ".", "b", ",", "c"]
    assert uncased.tokenize("1,234.5") == ["1", ",", "234", ".", "5"]
    # "$" is ASCII punctuation by the reference rule though Unicode calls it Sc.
    assert uncased.tokenize("$5") == ["$", "5"]
    # U+2260 decomposes to "=" + U+0338: once the mark is stripped, "=" splits (uncased).
    assert uncased.tokenize("a\u2260b") == ["a", "=", "b"]


def test_cjk_ideographs_are_split(uncased):
    assert uncased.tokenize("中文english") == ["中", "文", "english"]
    assert uncased.tokenize_to_ids("中文english") == [1746, 1861, 2394]
    # Kana and Hangul are not CJK ideographs: no split around them.
    assert uncased.basic_tokenizer.tokenize("カタカナabc") == ["カタカナabc"]


def test_bytes_input_drops_invalid_utf8(uncased):
    assert uncased.tokenize(b"caf\xc3\xa9") == ["cafe"]
    assert uncased.tokenize(b"ab\xffcd") == ["abc", "##d"]
    with pytest.raises(TypeError, match="str or bytes"):
        uncased.tokenize(123)


def test_ids_round_trip_and_errors(uncased):
    ids = uncased.tokenize_to_ids("the quick brown fox")
    assert uncased.convert_ids_to_tokens(ids) == ["the", "quick", "brown", "fox"]
    assert ids == [1996, 4248, 2829, 4419]
    with pytest.raises(KeyError, match="not in the vocabulary"):
        uncased.convert_tokens_to_ids(["nonexistenttoken"])
    with pytest.raises(KeyError, match="outside the vocabulary"):
        uncased.convert_ids_to_tokens([99999])


def test_encode_packs_numpy_int32(uncased):
    out = uncased.encode("naïve café", "hello", max_seq_length=8)
    assert out["input_word_ids"].dtype.name == "int32"
    assert out["input_word_ids"].tolist() == [101, 15743, 7668, 102, 7592, 102, 0, 0]
    assert out["input_mask"].tolist() == [1, 1, 1, 1, 1, 1, 0, 0]
    assert out["input_type_ids"].tolist() == [0, 0, 0, 0, 1, 1, 0, 0]


def test_load_vocab_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="vocab_file not found"):
        load_vocab(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="holds no tokens"):
        load_vocab(tmp_path / "empty.txt")


def test_predicates():
    assert ft.is_control("\x00") and ft.is_control("\u200b") and not ft.is_control("\t")
    assert ft.is_whitespace("\u00a0") and not ft.is_whitespace("\u200b")
    assert ft.is_punctuation("^") and ft.is_punctuation("\u00bf") and not ft.is_punctuation("a")
    assert ft.is_cjk_ideograph(0x4E2D) and not ft.is_cjk_ideograph(ord("カ"))


def test_vocab_without_special_tokens_tokenizes_packing_refuses(tmp_path):
    """No [PAD], [CLS], [SEP], [UNK]: tokenizing works as the reference; packing names them."""
    path = tmp_path / "nospecial.txt"
    path.write_text("want\n##want\n##ed\nun\nrunn\n##ing\n,\n")
    tok = FullTokenizer(path)
    assert tok.tokenize("UNwant\u00e9d,running") == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tok.tokenize_to_ids("UNwant\u00e9d,running") == [3, 1, 2, 6, 4, 5]
    assert tok.tokenize("unwantedX") == ["[UNK]"]  # the string, as the reference gives
    with pytest.raises(KeyError, match=r"token '\[UNK\]' is not in the vocabulary"):
        tok.tokenize_to_ids("unwantedX")
    with pytest.raises(ValueError, match=r"has no \[UNK\] token"):
        tok.unk_id
    message = (
        f"cannot pack inputs: vocab_file {path} lacks the special tokens ['[CLS]', "
        "'[SEP]', '[PAD]'] that packing writes ([CLS] A [SEP] B [SEP], then [PAD]); "
        "tokenizing does not need them"
    )
    with pytest.raises(ValueError) as err:
        tok.encode("unwanted", max_seq_length=8)
    assert str(err.value) == message
    with pytest.raises(ValueError) as err:
        tok.cls_id
    assert str(err.value) == message


def test_packing_names_only_the_missing_tokens(tmp_path):
    path = tmp_path / "nopad.txt"
    path.write_text("[UNK]\n[CLS]\n[SEP]\nwant\n")
    tok = FullTokenizer(path)
    assert (tok.unk_id, tok.tokenize_to_ids("want")) == (0, [3])
    with pytest.raises(ValueError) as err:
        tok.encode("want", max_seq_length=4)
    assert str(err.value) == (
        f"cannot pack inputs: vocab_file {path} lacks the special tokens ['[PAD]'] that packing "
        "writes ([CLS] A [SEP] B [SEP], then [PAD]); tokenizing does not need them"
    )
    path.write_text("[UNK]\n[CLS]\n[SEP]\nwant\n[PAD]\n")
    out = FullTokenizer(path).encode("want", max_seq_length=5)
    assert out["input_word_ids"].tolist() == [1, 3, 2, 4, 4]
    assert out["input_mask"].tolist() == [1, 1, 1, 0, 0]


def test_strip_accents_exact():
    assert ft.strip_accents("Café naïve") == "Cafe naive"
    assert ft.strip_accents("e\u0301") == "e"  # a combining acute alone vanishes
    assert ft.strip_accents("\u0130".lower()) == "i"  # İ lower-cases to i + U+0307
    assert ft.strip_accents("東京 ΟΔΟΣ") == "東京 ΟΔΟΣ"
    assert ft.strip_accents("") == ""
    assert not hasattr(ft.BasicTokenizer, "_run_strip_accents")  # one implementation


def pieces_text(tok, text):
    pieces, starts, ends = tok.tokenize_with_offsets(text)
    assert pieces == tok.tokenize(text)
    return [(p, text[s:e]) for p, s, e in zip(pieces, starts, ends)]


def test_offsets_give_the_original_characters(uncased):
    text = "Café  déjà\tvu\u00a0naïve 東京 ΟΔΟΣ cafe\u0301 a\u200bb İstanbul"
    assert pieces_text(uncased, text) == [
        ("cafe", "Café"),
        ("de", "dé"),
        ("##ja", "jà"),
        ("vu", "vu"),
        ("naive", "naïve"),
        ("東", "東"),
        ("京", "京"),
        ("ο", "Ο"),
        ("##δ", "Δ"),
        ("##ος", "ΟΣ"),
        ("cafe", "cafe\u0301"),
        ("ab", "a\u200bb"),
        ("istanbul", "İstanbul"),
    ]
    assert uncased.tokenize_with_offsets("Café  déjà") == (
        ["cafe", "de", "##ja"],
        [0, 6, 8],
        [4, 8, 10],
    )
    assert uncased.tokenize_with_offsets("") == ([], [], [])
    assert uncased.tokenize_with_offsets(" \u200b ") == ([], [], [])


def test_offsets_cased_and_unk_word(cased):
    text = "Hi  (1895–1943) " + "x" * 201
    assert pieces_text(cased, text) == [
        ("Hi", "Hi"),
        ("(", "("),
        ("1895", "1895"),
        ("–", "–"),
        ("1943", "1943"),
        (")", ")"),
        ("[UNK]", "x" * 201),
    ]
    assert cased.tokenize_with_offsets("Hi  (1895") == (["Hi", "(", "1895"], [0, 4, 5], [2, 5, 9])


def test_words_with_offsets_exact():
    basic = ft.BasicTokenizer(do_lower_case=True)
    assert basic.words_with_offsets("Ab,\u0301 c\x00d") == [
        [("a", 0, 1), ("b", 1, 2)],
        [(",", 2, 4)],
        [("c", 5, 7), ("d", 7, 8)],
    ]


def test_built_from_a_token_list_equals_the_file(uncased_vocab, uncased):
    tokens = [line.rstrip("\n") for line in open(uncased_vocab, encoding="utf-8")]
    tok = FullTokenizer(tokens, do_lower_case=True)
    assert tok.vocab == uncased.vocab and tok.packing_ids() == (101, 102, 0)
    assert tok.tokenize_with_offsets("Naïve CAFÉ") == (["naive", "cafe"], [0, 6], [5, 10])
    with pytest.raises(ValueError, match="no tokens"):
        FullTokenizer([], do_lower_case=True)
    with pytest.raises(ValueError, match=r"\[PAD\]"):
        FullTokenizer(["[UNK]", "[CLS]", "[SEP]"]).packing_ids()
