"""SQuAD reader and windowed features: hand-made cases with known answers, and the real dev files."""

import json

import numpy as np
import pytest

from keras_bert.data import squad
from keras_bert.tokenization.full_tokenizer import FullTokenizer


@pytest.fixture(scope="module")
def tok(uncased_vocab):
    return FullTokenizer(uncased_vocab, do_lower_case=True)


def test_offsets_pieces_equal_the_plain_tokenizer_on_real_contexts(tok, data_dir):
    examples = squad.read_squad_examples(data_dir / "squad" / "dev-v1.1.json")
    contexts = list(dict.fromkeys(e.context for e in examples))[::25]
    for context in contexts:
        pieces, starts, ends = tok.tokenize_with_offsets(context)
        assert pieces == tok.tokenize(context)
        assert all(0 <= s < e <= len(context) for s, e in zip(starts, ends))
        assert starts == sorted(starts)


def test_read_real_dev_files(data_dir):
    v1 = squad.read_squad_examples(data_dir / "squad" / "dev-v1.1.json")
    assert len(v1) == 10570
    assert len({e.title for e in v1}) == 48
    assert all(e.answers and not e.is_impossible for e in v1)
    for e in v1[:200]:
        for text, start in e.answers:
            assert e.context[start : start + len(text)] == text
    v2 = squad.read_squad_examples(
        data_dir / "squad" / "dev-v2.0-subset.json", version_2_with_negative=True
    )
    assert len(v2) == 6078
    assert sum(e.is_impossible for e in v2) == 3168
    assert all(not e.answers for e in v2 if e.is_impossible)
    with pytest.raises(ValueError, match="version_2_with_negative=True"):
        squad.read_squad_examples(data_dir / "squad" / "dev-v2.0-subset.json")


def test_reader_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        squad.read_squad_examples(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": "1.1"}))
    with pytest.raises(ValueError, match="'data' list"):
        squad.read_squad_examples(bad)


def test_an_infinite_answer_start_is_a_value_error(tmp_path):
    # Found by the squad_json fuzz target: JSON's 1e400 reads as infinity, and int(inf) raised an
    # OverflowError that no recipe turns into one line.
    path = tmp_path / "inf.json"
    path.write_text(
        '{"data": [{"paragraphs": [{"context": "ab", "qas": [{"id": "1", "question": "q", '
        '"answers": [{"text": "b", "answer_start": 1e400}]}]}]}]}'
    )
    with pytest.raises(ValueError) as raised:
        squad.read_squad_examples(path)
    assert str(raised.value) == (
        f"{path} is not SQuAD JSON: question 1: answer_start inf is not an integer"
    )


def make_example(context, answer=None, question="what ?", impossible=False):
    answers = () if answer is None else ((answer, context.index(answer)),)
    return squad.SquadExample("q", question, context, answers, impossible)


def one_training_feature(tok, example, max_seq_length, max_query_length):
    """The single training feature of `example`, whose context fits in one window."""
    (feature,) = squad.convert_example(
        example,
        tok,
        max_seq_length=max_seq_length,
        max_query_length=max_query_length,
        is_training=True,
    )
    return feature


def test_answer_across_a_window_boundary(tok):
    # 16 one-piece words; query "what ?" = 2 pieces; max_seq_length 12 -> 7 context pieces a window.
    words = (
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen".split()
    )
    context = " ".join(words)
    example = make_example(context, "five six seven eight")  # pieces 5..8
    features = squad.convert_example(
        example, tok, max_seq_length=12, doc_stride=3, max_query_length=4, is_training=True
    )
    assert [f.window_index for f in features] == [0, 1, 2, 3]
    # windows (0,7) (3,7) (6,7) (9,7): only window 1 holds pieces 5..8 wholly.
    labels = [(f.start_position, f.end_position) for f in features]
    offset = 4  # [CLS] what ? [SEP]
    assert labels == [(0, 0), (5 - 3 + offset, 8 - 3 + offset), (0, 0), (0, 0)]
    f = features[1]
    start, end = f.token_start[f.start_position], f.token_end[f.end_position]
    assert context[start:end] == "five six seven eight"
    # max-context flags: every context piece is flagged in exactly one window.
    flagged = {}
    for f in features:
        for k in np.flatnonzero(f.token_is_max_context):
            flagged.setdefault(int(f.token_start[k]), []).append(f.window_index)
    assert sorted(flagged) == [context.index(w) if i != 1 else 5 for i, w in enumerate(words)]
    assert all(len(v) == 1 for v in flagged.values())


def test_answer_at_very_start_and_end(tok):
    context = "Paris is the capital of France"
    for answer, expected in (("Paris", (4, 4)), ("France", (9, 9))):
        f = one_training_feature(tok, make_example(context, answer), 32, max_query_length=8)
        assert (f.start_position, f.end_position) == expected
        assert context[f.token_start[f.start_position] : f.token_end[f.end_position]] == answer
    assert f.input_word_ids[:12].tolist() == tok.convert_tokens_to_ids(
        [
            "[CLS]",
            "what",
            "?",
            "[SEP]",
            "paris",
            "is",
            "the",
            "capital",
            "of",
            "france",
            "[SEP]",
            "[PAD]",
        ]
    )
    assert f.input_type_ids[:12].tolist() == [0] * 4 + [1] * 7 + [0]
    assert f.input_mask[:12].tolist() == [1] * 11 + [0]
    assert f.token_start[:4].tolist() == [-1] * 4 and f.token_start[10] == -1


def test_accents_cjk_and_irregular_whitespace_answer(tok):
    context = "Der  Begriff\t«Café  Müller»\u00a0steht\n\n in 東京都 ,  naïve   façade ."
    for answer in ("Café  Müller", "東京", "naïve   façade", "Müller»"):
        f = one_training_feature(tok, make_example(context, answer), 64, max_query_length=8)
        got = context[f.token_start[f.start_position] : f.token_end[f.end_position]]
        assert got == answer


def test_unanswerable_question_points_at_cls(tok):
    context = " ".join(["word"] * 30)
    example = make_example(context, impossible=True)
    features = squad.convert_example(
        example, tok, max_seq_length=16, doc_stride=4, max_query_length=4, is_training=True
    )
    assert len(features) > 1
    assert all(f.start_position == 0 and f.end_position == 0 for f in features)


def test_question_longer_than_max_query_length(tok):
    question = " ".join(["why"] * 10)
    context = "one two three four five six"
    example = make_example(context, "four", question=question)
    f = one_training_feature(tok, example, 16, max_query_length=3)
    why = tok.vocab["why"]
    assert f.input_word_ids[:5].tolist() == [tok.vocab["[CLS]"], why, why, why, tok.vocab["[SEP]"]]
    assert (f.start_position, f.end_position) == (8, 8)
    # 16 - 3 - 3 = 10 context pieces fit: one window.
    with pytest.raises(ValueError, match="max_query_length"):
        squad.convert_example(make_example(context), tok, max_seq_length=8, max_query_length=5)


def test_stack_and_split(tok):
    examples = [
        squad.SquadExample(str(i), "what ?", "a b c", (("b", 2),), False, t)
        for i, t in enumerate("AABBC")
    ]
    train, held = squad.split_by_title(examples, 0.4)
    assert [e.title for e in train] == list("AABB") and [e.title for e in held] == ["C"]
    features = squad.convert_examples(
        examples, tok, max_seq_length=10, max_query_length=4, is_training=True
    )
    arrays = squad.stack_features(features, with_labels=True)
    assert arrays["input_word_ids"].shape == (5, 10) and arrays["input_word_ids"].dtype == np.int32
    assert arrays["start_positions"].tolist() == [5] * 5
