"""SpanQuestionAnswerer: shapes, padding, raw-string predict, save/load, tiny overfit to EM 1.0."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.data import squad
from keras_bert.evaluation import squad as squad_eval
from keras_bert.models.bert_encoder import BertEncoder
from keras_bert.tasks.span_question_answerer import SpanQuestionAnswerer
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor

WORDS = ("the a of in is was by who what when where which wrote built river city tower year "
         "paris france london eiffel thames ada lovelace gustave 1843 1889 café müller 東 京 "
         "capital flows through painter lives").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "?", "«", "»"] + WORDS
# (question, context, answer): answers at the start, the end, with accents/CJK/odd whitespace.
DATA = [
    ("who wrote in 1843 ?", "Ada  Lovelace wrote in 1843 .", "Ada  Lovelace"),
    ("when was the tower built ?", "the Eiffel tower was built in 1889", "1889"),
    ("which river flows through london ?", "the Thames flows through London , a capital .",
     "Thames"),
    ("who lives in paris ?", "«Café\u00a0Müller» lives in Paris ; 東京 is a city .",
     "«Café\u00a0Müller»"),
    ("what is the capital of france ?", "Paris is the capital of France .", "Paris"),
    ("where is 東京 ?", "the painter Gustave lives in 東京 , a  capital", "東京"),
]


STEPS = 80


def tiny_task(max_seq_length=24, **kwargs):
    keras.utils.set_random_seed(1)
    encoder = BertEncoder(vocab_size=len(VOCAB), hidden_size=32, num_layers=2, num_heads=2,
                          intermediate_size=48, max_sequence_length=32, dropout_rate=0.0,
                          attention_dropout_rate=0.0)
    pre = BertPreprocessor(vocabulary=VOCAB, do_lower_case=True, max_seq_length=max_seq_length)
    return SpanQuestionAnswerer(encoder, pre, max_query_length=kwargs.pop("max_query_length", 8),
                                doc_stride=kwargs.pop("doc_stride", 6), **kwargs)


def examples():
    return [squad.SquadExample(str(i), q, c, ((a, c.index(a)),), False, "t")
            for i, (q, c, a) in enumerate(DATA)]


def test_call_shapes_and_padding_invariance():
    task = tiny_task()
    pre = task.preprocessor
    x = pre({"text": tf.constant(["who wrote ?", "what ?"]),
             "text_b": tf.constant(["ada wrote", "paris is the capital of france"])})
    out = task(x, training=False)
    assert set(out) == {"start_logits", "end_logits"}
    assert out["start_logits"].shape == (2, 24) and out["start_logits"].dtype == tf.float32
    mask = x["input_mask"].numpy().astype(bool)
    assert np.all(out["end_logits"].numpy()[~mask] < -9000)
    cut = {k: v[:, :12] for k, v in x.items()}
    short = task(cut, training=False)
    np.testing.assert_allclose(short["start_logits"].numpy()[mask[:, :12]],
                               out["start_logits"].numpy()[:, :12][mask[:, :12]], atol=1e-5)


def test_bad_settings_raise():
    with pytest.raises(ValueError, match="no room for the context"):
        tiny_task(max_seq_length=10, max_query_length=8)
    with pytest.raises(ValueError, match="n_best_size"):
        tiny_task(n_best_size=0)


def test_predict_returns_substrings_of_the_context():
    task = tiny_task()
    questions = [q for q, _, _ in DATA] + ["what ?"]
    contexts = [c for _, c, _ in DATA] + [""]
    out = task.predict((questions, contexts))
    assert len(out) == len(DATA) + 1
    for row, context in zip(out, contexts):
        assert row["answer_text"] == context[row["start"]:row["end"]]
        assert isinstance(row["score"], float)
    assert out[-1] == {"answer_text": "", "start": 0, "end": 0, "score": out[-1]["score"]}
    with pytest.raises(ValueError, match="pair task"):
        task.predict(questions)


@pytest.mark.slow
def test_tiny_fit_overfits_to_exact_match_1(tmp_path):
    task = tiny_task(max_seq_length=16, max_query_length=6, doc_stride=3)
    exs = examples()
    features = task.features(exs, is_training=True)
    assert len(features) > len(exs)  # some contexts are windowed (max_seq_length 24)
    arrays = squad.stack_features(features, with_labels=True)
    x = {k: arrays[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    y = {"start_logits": arrays["start_positions"], "end_logits": arrays["end_positions"]}
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    task.compile(optimizer=keras.optimizers.Adam(5e-3), loss={"start_logits": loss,
                 "end_logits": loss}, loss_weights={"start_logits": 0.5, "end_logits": 0.5})
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(len(features))
    task.fit(data, steps_per_epoch=STEPS, epochs=1, verbose=0)
    eval_features = task.features(exs)
    answers = task.answer(exs, eval_features, task.window_logits(eval_features))
    scores = squad_eval.evaluate_v1(squad_eval.dataset_of(exs),
                                    {q: a["text"] for q, a in answers.items()})
    assert scores == {"exact_match": 100.0, "f1": 100.0}
    predicted = task.predict(([q for q, _, _ in DATA], [c for _, c, _ in DATA]))
    assert [p["answer_text"] for p in predicted] == [a for _, _, a in DATA]
    # Save / load round trip: the vocabulary travels inside the file.
    path = tmp_path / "qa.keras"
    task.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, SpanQuestionAnswerer) and loaded.doc_stride == 3
    assert loaded.preprocessor.vocabulary == VOCAB
    assert loaded.predict(([q for q, _, _ in DATA], [c for _, c, _ in DATA])) == predicted
