"""SpanQuestionAnswerer: shapes, padding, raw-string predict, save/load, tiny overfit to EM 1.0."""

import random
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.data import squad, windows
from keras_bert.metrics import squad as squad_eval
from keras_bert.tasks.span_question_answerer import SpanQuestionAnswerer
from keras_bert.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert.tokenization.full_tokenizer import FullTokenizer
from keras_bert.training.families.squad import FAMILY, SquadData
from tests.tiny import NO_DROPOUT, tiny_encoder

WORDS = (
    "the a of in is was by who what when where which wrote built river city tower year "
    "paris france london eiffel thames ada lovelace gustave 1843 1889 café müller 東 京 "
    "capital flows through painter lives"
).split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "?", "«", "»"] + WORDS
# (question, context, answer): answers at the start, the end, with accents/CJK/odd whitespace.
DATA = [
    ("who wrote in 1843 ?", "Ada  Lovelace wrote in 1843 .", "Ada  Lovelace"),
    ("when was the tower built ?", "the Eiffel tower was built in 1889", "1889"),
    (
        "which river flows through london ?",
        "the Thames flows through London , a capital .",
        "Thames",
    ),
    (
        "who lives in paris ?",
        "«Café\u00a0Müller» lives in Paris ; 東京 is a city .",
        "«Café\u00a0Müller»",
    ),
    ("what is the capital of france ?", "Paris is the capital of France .", "Paris"),
    ("where is 東京 ?", "the painter Gustave lives in 東京 , a  capital", "東京"),
]


STEPS = 80


def tiny_task(max_seq_length=24, **kwargs):
    keras.utils.set_random_seed(1)
    encoder = tiny_encoder(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_layers=2,
        intermediate_size=48,
        max_sequence_length=32,
        **NO_DROPOUT,
    )
    pre = BertPreprocessor(vocabulary=VOCAB, do_lower_case=True, max_seq_length=max_seq_length)
    return SpanQuestionAnswerer(
        encoder,
        pre,
        max_query_length=kwargs.pop("max_query_length", 8),
        doc_stride=kwargs.pop("doc_stride", 6),
        **kwargs,
    )


def examples():
    return [
        squad.SquadExample(str(i), q, c, ((a, c.index(a)),), False, "t")
        for i, (q, c, a) in enumerate(DATA)
    ]


def test_call_shapes_and_padding_invariance():
    task = tiny_task()
    pre = task.preprocessor
    x = pre(
        {
            "text": tf.constant(["who wrote ?", "what ?"]),
            "text_b": tf.constant(["ada wrote", "paris is the capital of france"]),
        }
    )
    out = task(x, training=False)
    assert set(out) == {"start_logits", "end_logits"}
    assert out["start_logits"].shape == (2, 24) and out["start_logits"].dtype == tf.float32
    mask = x["input_mask"].numpy().astype(bool)
    assert np.all(out["end_logits"].numpy()[~mask] < -9000)
    cut = {k: v[:, :12] for k, v in x.items()}
    short = task(cut, training=False)
    np.testing.assert_allclose(
        short["start_logits"].numpy()[mask[:, :12]],
        out["start_logits"].numpy()[:, :12][mask[:, :12]],
        atol=1e-5,
    )
    trainable = [v.path for v in task.trainable_variables]
    assert not any("pooler" in p for p in trainable)  # spans never read the pooled vector
    assert any("transformer_layer_0" in p for p in trainable)  # fine-tuning: encoder trains


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
        assert row["answer_text"] == context[row["start"] : row["end"]]
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
    task.compile(
        optimizer=keras.optimizers.Adam(5e-3),
        loss={"start_logits": loss, "end_logits": loss},
        loss_weights={"start_logits": 0.5, "end_logits": 0.5},
    )
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(len(features))
    task.fit(data, steps_per_epoch=STEPS, epochs=1, verbose=0)
    eval_features = task.features(exs)
    answers = task.answer(exs, eval_features, task.window_logits(eval_features))
    scores = squad_eval.evaluate_v1(
        squad_eval.dataset_of(exs), {q: a["text"] for q, a in answers.items()}
    )
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


OFFSET_TEXTS = [
    "Café  déjà\tvu\u00a0naïve 東京タワー ΟΔΟΣ cafe\u0301 a\u200bb İstanbul ﬁne",
    "x" * 250 + " y",
    "",
    "  Paris (1895–1943) is\n\nthe capital.\u3000end",
    "Der  Begriff\t«Café  Müller»\u00a0steht\n\n in 東京都 ,  naïve   façade .",
]


# Random texts mixing accents, combining marks, deleted characters (U+200B, NUL, U+FFFD, soft
# hyphen), CJK, Greek sigma (final-sigma rule), expanding characters (U+0130, ligatures), every
# kind of whitespace and long words.
ALPHABET = (
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'\"()[]-–—«»")
    + list("éèêëàâäïîôöùûüçñÉÀÖÜßøåæœ")
    + ["\u0301", "\u0308", "\u0327", "\u200b", "\u200d", "\x00", "\ufffd", "\x07", "\u00ad"]
    + list("東京都大阪日本語中文タワーかなΣΟΔσςαβ")
    + ["İ", "ﬁ", "ﬂ", "Ǆ", "ǅ", "ẞ", "Å", "Ω", "K"]
    + [" ", "  ", "\t", "\n", "\u00a0", "\u3000", "\u2028", "\u202f", "\r\n", "\u2009"]
    + ["straße", "café", "ΟΔΟΣ ", "naïve ", "the ", "antidisestablishment"]
)


def random_texts(n=150, seed=0):
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 60))) for _ in range(n)]


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_in_graph_offsets_equal_the_python_path(casing, uncased_vocab, cased_vocab):
    lower = casing == "uncased"
    pre = BertPreprocessor(
        uncased_vocab if lower else cased_vocab, do_lower_case=lower, max_seq_length=32
    )
    texts = OFFSET_TEXTS + random_texts()
    ids, starts, ends = pre.core_tokenizer.tokenize_with_offsets(tf.constant(texts))
    tok = FullTokenizer(pre.vocabulary, lower)
    for i, text in enumerate(texts):
        pieces, s, e = tok.tokenize_with_offsets(text)
        assert pieces == tok.tokenize(text)
        assert ids[i].numpy().tolist() == tok.convert_tokens_to_ids(pieces)
        assert starts[i].numpy().tolist() == s and ends[i].numpy().tolist() == e


def test_in_graph_windows_equal_the_python_features():
    task = tiny_task(max_seq_length=16, max_query_length=6, doc_stride=3)
    module = task.serving_module(task.preprocessor)
    questions = [q for q, _, _ in DATA] + ["what ?"]
    contexts = [c for _, c, _ in DATA] + [""]
    inputs, meta = module.windows(tf.constant(questions), tf.constant(contexts))
    features = task.features(
        [squad.SquadExample(str(i), q, c) for i, (q, c) in enumerate(zip(questions, contexts))]
    )
    assert meta["question"].numpy().tolist() == [f.example_index for f in features]
    t = inputs["input_word_ids"].shape[1]
    for row, f in enumerate(features):
        for name in ("input_word_ids", "input_mask", "input_type_ids"):
            assert inputs[name][row].numpy().tolist() == getattr(f, name)[:t].tolist()
        assert meta["start"][row].numpy().tolist() == f.token_start[:t].tolist()
        assert meta["end"][row].numpy().tolist() == f.token_end[:t].tolist()
        assert meta["max_context"][row].numpy().tolist() == f.token_is_max_context[:t].tolist()


def test_in_graph_windows_use_the_shared_rules(monkeypatch):
    calls = {}
    for name in ("graph_window_spans", "graph_max_context"):
        real = getattr(windows, name)
        monkeypatch.setattr(
            windows,
            name,
            lambda *a, real=real, name=name, **k: (
                calls.setdefault(name, []).append(a),
                real(*a, **k),
            )[1],
        )
    task = tiny_task(max_seq_length=16, max_query_length=6, doc_stride=3)
    module = task.serving_module(task.preprocessor)
    context = "the a of in is was by who what when where which wrote built"  # 14 pieces
    inputs, meta = module.windows(tf.constant(["who ?"]), tf.constant([context]))
    # windows of 16 - 2 ("who ?") - 3 = 11 pieces, stride 3: (0, 11), (3, 11)
    (spans_args,) = calls["graph_window_spans"]
    assert spans_args[0].numpy().tolist() == [14] and spans_args[1].numpy().tolist() == [11]
    ((first, length, num_pieces),) = calls["graph_max_context"]
    assert (first.numpy().tolist(), length.numpy().tolist(), int(num_pieces)) == (
        [0, 3],
        [11, 11],
        14,
    )
    # by hand: piece 6 has min(6, 4) = 4 in window 0, min(3, 7) = 3 in window 1 -> window 0;
    # piece 7: min(7, 3) = 3 vs min(4, 6) = 4 -> window 1. Context tokens start at column 4.
    assert meta["max_context"].numpy()[:, 4:15].tolist() == [
        [True] * 7 + [False] * 4,
        [False] * 4 + [True] * 7,
    ]


def v2_task_with_some_empty_answers():
    task = tiny_task(
        max_seq_length=16,
        max_query_length=6,
        doc_stride=3,
        version_2_with_negative=True,
        n_best_size=4,
    )
    exs = examples()
    features = task.features(exs)
    answers = task.answer(exs, features, task.window_logits(features))
    task.null_score_diff_threshold = float(np.median([a["null_odds"] for a in answers.values()]))
    return task


# (question, context) pairs of negative, negative and positive null odds under `v2_tiny_task`
NEGATIVE, NEGATIVE_2, POSITIVE = (DATA[3][:2], DATA[2][:2], ("who ?", "paris"))


def v2_tiny_task(**kwargs):
    return tiny_task(
        max_seq_length=16,
        max_query_length=6,
        doc_stride=3,
        version_2_with_negative=True,
        n_best_size=4,
        **kwargs,
    )


# name -> (dev questions: (pair, gold answer or None = unanswerable or "best" = the model's best
# span), the best EM = F1 in percent, the pair whose null odds the threshold is, "below" or "at")
THRESHOLD_SETS = {
    "two unanswerable": ([(NEGATIVE, None), (POSITIVE, None)], 100.0, (NEGATIVE, "below")),
    "one answerable answered wrong": (
        [(NEGATIVE, "Paris"), (NEGATIVE_2, None), (POSITIVE, None)],
        100.0 * 2 / 3,
        (NEGATIVE, "below"),
    ),
    "the lowest answered right": ([(NEGATIVE, "best"), (POSITIVE, None)], 100.0, (NEGATIVE, "at")),
}


@pytest.fixture(scope="module")
def tiny_v2():
    """The task and each pair's `predict_example` dict (null odds, best span)."""
    task = v2_tiny_task()
    pairs = [NEGATIVE, NEGATIVE_2, POSITIVE]
    exs = [squad.SquadExample(str(i), q, c) for i, (q, c) in enumerate(pairs)]
    features = task.features(exs)
    answers = task.answer(exs, features, task.window_logits(features))
    by_pair = {pair: answers[str(i)] for i, pair in enumerate(pairs)}
    assert by_pair[NEGATIVE]["null_odds"] < by_pair[NEGATIVE_2]["null_odds"] < 0
    assert by_pair[POSITIVE]["null_odds"] > 0 and by_pair[NEGATIVE]["best_non_null_text"] != "Paris"
    return task, by_pair


@pytest.mark.parametrize("name", THRESHOLD_SETS)
def test_the_tuned_threshold_gives_its_dev_score_through_predict_and_the_graph(name, tiny_v2):
    """The squad family's `tune` chooses the threshold on the dev questions and stores it; the
    task's predict and the code of its serving_default, applying it to those questions, get
    the score reported (the official sweep's 0.0 would give 50 and 33.33 on the first two sets)."""
    task, by_pair = tiny_v2
    questions, best, (pair, side) = THRESHOLD_SETS[name]
    dev = []
    for i, ((question, context), gold) in enumerate(questions):
        gold = by_pair[(question, context)]["best_non_null_text"] if gold == "best" else gold
        answers = ((gold, context.index(gold)),) if gold else ()
        dev.append(squad.SquadExample(str(i), question, context, answers, not gold, "t"))
    metrics = FAMILY.tune(
        types.SimpleNamespace(eval_batch_size=8), SquadData([], [], dev=dev), task
    )
    odds = np.float32(by_pair[pair]["null_odds"])
    threshold = float(np.nextafter(odds, np.float32(-np.inf)) if side == "below" else odds)
    assert task.null_score_diff_threshold == metrics["null_score_diff_threshold"] == threshold
    assert metrics["null_threshold_dev"] == {
        "questions": len(dev),
        "articles": 1,
        "best_f1": best,
        "exact": best,
    }
    dataset = squad_eval.dataset_of(dev)
    q, c = [e.question for e in dev], [e.context for e in dev]
    predicted = [row["answer_text"] for row in task.predict((q, c))]
    module = task.serving_module(task.preprocessor)  # the export's, with the task's settings
    tf.config.run_functions_eagerly(True)  # its code, without 15 s of tracing (the SavedModel:
    try:  # tests/recipes/test_run_squad.py)
        served = module.serving_default(tf.constant(q), tf.constant(c))
    finally:
        tf.config.run_functions_eagerly(False)
    assert [t.decode() for t in served["answer_text"].numpy()] == predicted
    obtained = squad_eval.official_scores(
        dataset, dict(zip([e.qas_id for e in dev], predicted)), True
    )
    assert (obtained["exact_match"], obtained["f1"]) == (best, best)


@pytest.mark.slow
def test_export_serves_the_python_answers_over_grpc_and_rest(tmp_path):
    import json
    import urllib.request

    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    from tests.serving.conftest import ServerProcess

    task = v2_task_with_some_empty_answers()
    questions = [q for q, _, _ in DATA] + ["what ?"]
    contexts = [c for _, c, _ in DATA] + [""]
    expected = task.predict((questions, contexts))
    assert {r["answer_text"] == "" for r in expected} == {True, False}
    path = task.export(tmp_path / "models", "qa")
    loaded = tf.saved_model.load(str(path))
    fn = loaded.signatures["serving_default"]
    assert {k: v.dtype for k, v in fn.structured_input_signature[1].items()} == {
        "question": tf.string,
        "context": tf.string,
    }
    out = fn(question=tf.constant(questions), context=tf.constant(contexts))
    assert out["start"].dtype == tf.int32 and out["score"].dtype == tf.float32
    for i, row in enumerate(expected):
        assert out["answer_text"][i].numpy().decode() == row["answer_text"]
        assert (int(out["start"][i]), int(out["end"][i])) == (row["start"], row["end"])
        assert float(out["score"][i]) == pytest.approx(row["score"], abs=1e-4)
    # random contexts (several windows each) and questions: the same answers as the Python path
    noise = random_texts(24, seed=1)
    rand_q, rand_c = noise[:12], [" ".join(noise[12:][i : i + 6]) for i in range(12)]
    rand_out = fn(question=tf.constant(rand_q), context=tf.constant(rand_c))
    rand_expected = task.predict((rand_q, rand_c))
    assert any(row["answer_text"] for row in rand_expected)
    for i, row in enumerate(rand_expected):
        assert rand_out["answer_text"][i].numpy().decode() == row["answer_text"]
        assert (int(rand_out["start"][i]), int(rand_out["end"][i])) == (row["start"], row["end"])
    empty = fn(question=tf.constant([], tf.string), context=tf.constant([], tf.string))
    assert {k: tuple(v.shape) for k, v in empty.items()} == {
        "answer_text": (0,),
        "start": (0,),
        "end": (0,),
        "score": (0,),
    }
    ids = task.preprocessor(
        {"text": tf.constant(questions[:2]), "text_b": tf.constant(contexts[:2])}
    )
    encoded = loaded.signatures["encoded"](**ids)
    np.testing.assert_allclose(
        encoded["start_logits"].numpy(),
        task(ids, training=False)["start_logits"].numpy(),
        atol=1e-5,
    )
    server = ServerProcess(
        ["--model_name=qa", f"--model_base_path={tmp_path / 'models' / 'qa'}"],
        tmp_path / "server.log",
    )
    try:
        server.wait_serving()
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "qa"
        request.inputs["question"].CopyFrom(tf.make_tensor_proto(questions))
        request.inputs["context"].CopyFrom(tf.make_tensor_proto(contexts))
        with grpc.insecure_channel(server.grpc_target) as channel:
            reply = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
                request, timeout=60
            )
        texts = [t.decode() for t in tf.make_ndarray(reply.outputs["answer_text"])]
        assert texts == [r["answer_text"] for r in expected]
        assert tf.make_ndarray(reply.outputs["start"]).tolist() == [r["start"] for r in expected]
        for body in (
            {"instances": [{"question": q, "context": c} for q, c in zip(questions, contexts)]},
            {"inputs": {"question": questions, "context": contexts}},
        ):
            req = urllib.request.Request(
                f"{server.rest_url}/v1/models/qa:predict",
                data=json.dumps(body).encode(),
                method="POST",
            )
            with urllib.request.urlopen(req, timeout=60) as resp:
                got = json.loads(resp.read())
            rows = got.get("predictions") or [
                dict(zip(got["outputs"], v)) for v in zip(*got["outputs"].values())
            ]
            assert [r["answer_text"] for r in rows] == [r["answer_text"] for r in expected]
            assert [r["end"] for r in rows] == [r["end"] for r in expected]
    finally:
        server.stop()
