"""MultipleChoice: packing of the choices, a constructed overfit set, save/load."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.tasks import MultipleChoice, load_task
from keras_bert.tokenization import BertPreprocessor
from tests.tiny import tiny_encoder, tiny_vocab

VOCAB = tiny_vocab("the cat sat on mat a dog ran to park sky he she .")


def tiny_task(num_choices=4, seed=0):
    keras.utils.set_random_seed(seed)
    encoder = tiny_encoder(
        vocab_size=len(VOCAB), hidden_size=16, intermediate_size=32, max_sequence_length=16
    )
    pre = BertPreprocessor(vocabulary=VOCAB, do_lower_case=True, max_seq_length=12)
    return MultipleChoice(encoder, num_choices=num_choices, preprocessor=pre)


def test_choices_pack_as_context_sep_ending_sep():
    task = tiny_task(num_choices=2)
    packed = task.encode_choices(["The cat sat."], [["He ran", "the mat"]])
    assert packed["input_word_ids"].shape == (1, 2, 12)
    # [CLS] the cat sat . [SEP] | he ran [SEP]  (segment A = context, B = start + ending)
    assert packed["input_word_ids"][0, 0, :9].numpy().tolist() == [2, 4, 5, 6, 17, 3, 15, 11, 3]
    assert packed["input_type_ids"][0, 0, :9].numpy().tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 1]
    assert packed["input_word_ids"][0, 1, :9].numpy().tolist() == [2, 4, 5, 6, 17, 3, 4, 8, 3]
    logits = task(packed)
    assert logits.shape == (1, 2) and logits.dtype == tf.float32
    probabilities = task.predict((["The cat sat."], [["He ran", "the mat"]]))
    np.testing.assert_allclose(probabilities, tf.nn.softmax(logits).numpy(), rtol=1e-5)


@pytest.mark.slow
def test_overfit_picks_the_right_ending_and_round_trips(tmp_path):
    task = tiny_task()
    contexts = ["the cat sat on", "a dog ran to", "she sat on", "he ran to"]
    right = ["the mat", "the park", "a mat", "a park"]
    wrong = [
        ["the sky", "a dog", "the cat"],
        ["the sky", "she sat", "a cat"],
        ["the dog", "he ran", "the sky"],
        ["a sky", "the cat", "she ran"],
    ]
    labels = np.array([0, 3, 1, 2])
    choices = []
    for r, w, label in zip(right, wrong, labels):
        row = list(w)
        row.insert(int(label), r)
        choices.append(row)
    features = {k: v.numpy() for k, v in task.encode_choices(contexts, choices).items()}
    task.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    task.fit(
        tf.data.Dataset.from_tensors((features, labels)).repeat(),
        steps_per_epoch=60,
        epochs=1,
        verbose=0,
    )
    probabilities = task.predict((contexts, choices))
    assert probabilities.argmax(-1).tolist() == labels.tolist()
    assert (probabilities[np.arange(4), labels] > 0.9).all()
    path = tmp_path / "swag.keras"
    task.save(path)
    loaded = load_task(path)
    assert isinstance(loaded, MultipleChoice) and loaded.num_choices == 4
    np.testing.assert_allclose(loaded.predict((contexts, choices)), probabilities, rtol=1e-5)


def test_bad_inputs():
    task = tiny_task()
    with pytest.raises(ValueError, match="example 0 has 3 choices, expected 4"):
        task.predict((["the cat"], [["a", "b", "c"]]))
    with pytest.raises(ValueError, match="1 contexts but 2 rows of choices"):
        task.predict((["the cat"], [["a"] * 4, ["b"] * 4]))
    with pytest.raises(ValueError, match="takes \\(contexts, choices\\)"):
        task.predict(["the cat"])
    with pytest.raises(ValueError, match="num_choices must be >= 2"):
        tiny_task(num_choices=1)
    assert task.predict(([], [])).shape == (0, 4)
