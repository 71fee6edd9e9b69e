"""TokenClassifier: word/piece alignment, windows, one tag per word, a tiny overfit, save/load."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.data import windows
from keras_bert.tasks import TokenClassifier, load_task
from keras_bert.tasks.token_classifier import window_labels, window_words, words_to_tags
from keras_bert.tokenization import BertPreprocessor
from keras_bert.tokenization.full_tokenizer import FullTokenizer
from tests.tiny import tiny_encoder, tiny_vocab

VOCAB = tiny_vocab("the cat sat on mat ##s a dog run ##ning cafe . john paris in lives")
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
SENTENCE = "The cats running on \u200b Café xyz mat ."  # \u200b: a word with zero pieces


def tiny_task(max_seq_length=6, doc_stride=2, seed=0, **kwargs):
    keras.utils.set_random_seed(seed)
    encoder = tiny_encoder(
        vocab_size=len(VOCAB), hidden_size=16, intermediate_size=32, max_sequence_length=32
    )
    pre = BertPreprocessor(vocabulary=VOCAB, do_lower_case=True, max_seq_length=max_seq_length)
    return TokenClassifier(encoder, TAGS, preprocessor=pre, doc_stride=doc_stride, **kwargs)


def test_windows_first_piece_labels_and_max_context():
    pre = BertPreprocessor(vocabulary=VOCAB, do_lower_case=True, max_seq_length=6)
    words = tf.ragged.constant([SENTENCE.split(" "), [], ["dog"]])
    w = window_words(pre, words, doc_stride=2)
    # pieces: the cat ##s run ##ning on | (none) | cafe [UNK] mat . -> 10 pieces, windows of 4
    # starting at 0, 2, 4, 6; each first piece is read in the window where it has most context.
    assert w["input_word_ids"].numpy().tolist() == [
        [2, 4, 5, 9, 12, 3],
        [2, 9, 12, 13, 7, 3],
        [2, 13, 7, 14, 1, 3],
        [2, 14, 1, 8, 15, 3],
        [2, 11, 3, 0, 0, 0],
    ]
    assert w["word_index"].numpy().tolist() == [
        [-1, 0, 1, -1, -1, -1],
        [-1, -1, 2, -1, -1, -1],
        [-1, -1, 3, 5, -1, -1],
        [-1, -1, 6, 7, 8, -1],
        [-1, 0, -1, -1, -1, -1],
    ]
    assert w["sentence_index"].numpy().tolist() == [0, 0, 0, 0, 2]
    assert w["num_words"].numpy().tolist() == [9, 0, 1]
    tags = tf.ragged.constant([[1, 3, 0, 0, 0, 3, 4, 1, 0], [], [2]])
    # "cats" (cat ##s) is labelled once, on "cat"; the zero-piece word (index 4) nowhere.
    assert window_labels(w, tags).numpy().tolist() == [
        [-100, 1, 3, -100, -100, -100],
        [-100, -100, 0, -100, -100, -100],
        [-100, -100, 0, 3, -100, -100],
        [-100, -100, 4, 1, 0, -100],
        [-100, 2, -100, -100, -100, -100],
    ]


def test_windows_use_the_shared_max_context_rule(monkeypatch):
    calls = []
    real = windows.graph_max_context
    monkeypatch.setattr(windows, "graph_max_context", lambda *a: (calls.append(a), real(*a))[1])
    pre = BertPreprocessor(vocabulary=VOCAB, do_lower_case=True, max_seq_length=6)
    w = window_words(pre, tf.ragged.constant([SENTENCE.split(" "), [], ["dog"]]), doc_stride=2)
    ((first, length, num_pieces),) = calls
    # 10 pieces in windows of 4 from 0, 2, 4, 6; "dog" (piece 10) in its own; none for [].
    assert first.numpy().tolist() == [0, 2, 4, 6, 10]
    assert length.numpy().tolist() == [4, 4, 4, 4, 1] and int(num_pieces) == 11
    assert w["sentence_index"].numpy().tolist() == [0, 0, 0, 0, 2]


@pytest.mark.parametrize("max_seq_length,stride", [(6, 1), (6, 3), (7, 5), (12, 4), (64, 62)])
def test_each_word_reads_its_first_piece(tmp_path, max_seq_length, stride):
    """Per-position ids -> per-word values must give each word the id of its own first piece
    (Python reference tokenizer), whatever the windowing."""
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    reference = FullTokenizer(str(vocab_file), do_lower_case=True)
    rng = np.random.default_rng(max_seq_length * 100 + stride)
    pool = ["the", "cats", "running", "on", "\u200b", "Café", "xyz", "mat.", "Paris", "dogs"]
    sentences = [[str(x) for x in rng.choice(pool, size=n)] for n in (1, 5, 17, 30)]
    pre = BertPreprocessor(vocabulary=VOCAB, do_lower_case=True, max_seq_length=max_seq_length)
    w = window_words(pre, tf.ragged.constant(sentences), stride)
    per_word = words_to_tags(w, w["input_word_ids"], outside_id=-7).numpy()
    for i, words in enumerate(sentences):
        expected = [
            reference.convert_tokens_to_ids(reference.tokenize(x))[:1] or [-7] for x in words
        ]
        assert per_word[i, : len(words)].tolist() == [e[0] for e in expected]
        assert (per_word[i, len(words) :] == -7).all()
    assert (w["input_mask"].numpy().sum(1) <= max_seq_length).all()


def test_predict_one_tag_per_whitespace_word():
    task = tiny_task()
    texts = [SENTENCE, "", "dog", "john lives in paris " * 6]
    out = task.predict(texts, batch_size=3)
    assert [len(t) for t in out] == [9, 0, 1, 24]
    assert all(tag in TAGS for tags in out for tag in tags)
    assert out[0][4] == "O"  # the zero-piece word
    trainable = [v.path for v in task.trainable_variables]
    assert not any("pooler" in p for p in trainable)  # tags never read the pooled vector
    assert any("transformer_layer_0" in p for p in trainable)  # fine-tuning: encoder trains
    assert task.predict([]) == []
    with pytest.raises(ValueError, match="not one str"):
        task.predict("dog")


@pytest.mark.slow
def test_tiny_fit_overfits_and_round_trips(tmp_path):
    task = tiny_task(max_seq_length=8, doc_stride=3)
    words = [
        ["john", "lives", "in", "paris", "."],
        ["the", "cat", "sat", "on", "a", "mat", "."],
        ["paris", "john", "dogs", "running", "in", "the", "cafe", "john", "paris", "."],
    ]
    tags = [
        ["B-PER", "O", "O", "B-LOC", "O"],
        ["O", "B-PER", "O", "O", "O", "B-LOC", "O"],
        ["B-LOC", "B-PER", "B-PER", "I-PER", "O", "O", "B-LOC", "B-PER", "B-LOC", "O"],
    ]
    features, labels = task.training_windows(words, tags)
    assert features["input_word_ids"].shape == (6, 8) and labels.shape == (6, 8)  # 1 + 2 + 3
    assert int((labels >= 0).sum()) == sum(map(len, words))  # every word labelled exactly once
    task.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-100),
    )
    before = task.evaluate(features, labels, verbose=0)
    task.fit(
        tf.data.Dataset.from_tensors((features, labels)).repeat(),
        steps_per_epoch=80,
        epochs=1,
        verbose=0,
    )
    assert task.evaluate(features, labels, verbose=0) < 0.05 * before
    assert task.predict([" ".join(w) for w in words]) == tags
    path = tmp_path / "ner.keras"
    task.save(path)
    loaded = load_task(path)
    assert isinstance(loaded, TokenClassifier) and loaded.label_names == TAGS
    assert loaded.doc_stride == 3 and loaded.preprocessor.max_seq_length == 8
    assert loaded.predict_word_lists(words) == tags


def test_a_config_saved_with_window_stride_loads_as_doc_stride():
    config = tiny_task(doc_stride=3).get_config()
    assert config["doc_stride"] == 3 and "window_stride" not in config
    config["window_stride"] = config.pop("doc_stride")  # as saved before the rename
    loaded = TokenClassifier.from_config(config)
    assert loaded.doc_stride == 3 and loaded.stride() == 3
    assert loaded.export_metadata()["doc_stride"] == 3
    assert "window_stride" not in loaded.get_config() and "window_stride" not in (
        loaded.export_metadata()
    )


def test_feature_mode_freezes_encoder_and_concatenates_four_layers():
    keras.utils.set_random_seed(0)
    encoder = tiny_encoder(
        vocab_size=len(VOCAB), num_layers=4, intermediate_size=16, max_sequence_length=16
    )
    pre = BertPreprocessor(vocabulary=VOCAB, do_lower_case=True, max_seq_length=8)
    task = TokenClassifier(
        encoder,
        TAGS,
        preprocessor=pre,
        feature_mode="concat_last_four",
        lstm_units=6,
        lstm_layers=2,
    )
    inputs = pre(["john lives in paris"])
    layers = encoder(inputs, training=False)["encoder_outputs"]
    np.testing.assert_allclose(
        task.features(inputs).numpy(), tf.concat(layers[-4:], -1).numpy(), rtol=1e-6
    )
    assert task(inputs).shape == (1, 8, len(TAGS))
    trainable = {v.path.split("/")[1] for v in task.trainable_variables}
    assert trainable == {"bilstm_0", "bilstm_1", "tags"}


def test_bad_arguments():
    with pytest.raises(ValueError, match="must include 'O'"):
        tiny_task().__class__(tiny_task().encoder, ["B-PER"])
    with pytest.raises(ValueError, match=r"doc_stride must be in \[1, max_seq_length - 2 = 4\]"):
        tiny_task(doc_stride=5)
    with pytest.raises(ValueError, match="feature_mode must be None or one of"):
        tiny_task(feature_mode="mean")
    with pytest.raises(
        ValueError, match="'concat_last_four' needs >= 4 encoder layers, the encoder has 1"
    ):
        tiny_task(feature_mode="concat_last_four")
    with pytest.raises(
        ValueError, match=r"^doc_stride must be in \[1, max_seq_length - 2 = 4\], got 5$"
    ):
        window_words(tiny_task().preprocessor, tf.ragged.constant([["a"]]), doc_stride=5)
    with pytest.raises(ValueError, match="2 words but 1 tags"):
        tiny_task().training_windows([["a", "b"]], [["O"]])
    with pytest.raises(ValueError, match=r"tags \['B-ORG'\] not in label_names"):
        tiny_task().training_windows([["a"]], [["B-ORG"]])


@pytest.mark.slow
def test_feature_mode_training_leaves_the_encoder_unchanged():
    task = tiny_task(max_seq_length=8, feature_mode="last", lstm_units=4, lstm_layers=1)
    features, labels = task.training_windows(
        [["john", "lives", "in", "paris"]], [["B-PER", "O", "O", "B-LOC"]]
    )
    task.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-100),
    )
    task(features)  # builds the BiLSTM and tag layers
    before = {v.path: v.numpy().copy() for v in task.variables}
    task.fit(features, labels, epochs=3, verbose=0)
    after = {v.path: v.numpy() for v in task.variables}
    changed = {p for p, value in before.items() if not np.array_equal(value, after[p])}
    assert changed and all("bert_encoder" not in p for p in changed)
    assert any("bilstm_0" in p for p in changed) and any("tags" in p for p in changed)
