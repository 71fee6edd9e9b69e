"""Tiny TextClassifiers and held-out files for the evaluation tests (random weights, real vocab)."""

import json

import numpy as np

LABELS = ["neg", "neutral", "pos"]
MAX_SEQ_LENGTH = 16
TEXTS = [
    "a great film",
    "dull and slow",
    "it is fine",
    "the best movie of the year by far",
    "awful acting",
    "an ordinary story",
    "brilliant",
    "boring boring boring",
    "okay i guess",
    "a long rambling film that goes on and on for far too many scenes and never ends",
    "wonderful cast",
    "not good",
]


def tiny_classifier(
    vocab_file,
    seed=0,
    num_classes=3,
    label_names=LABELS,
    num_layers=2,
    hidden_size=16,
    is_pair=False,
):
    """TextClassifier on a small encoder with N(0, 0.3) weights, so outputs differ per text."""
    from keras_bert import BertEncoder
    from keras_bert.tasks import TextClassifier
    from keras_bert.tokenization import BertPreprocessor

    encoder = BertEncoder(
        vocab_size=30522,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=2,
        intermediate_size=24,
        max_sequence_length=32,
    )
    task = TextClassifier(
        encoder,
        num_classes,
        label_names=label_names,
        is_pair=is_pair,
        preprocessor=BertPreprocessor(vocab_file, max_seq_length=MAX_SEQ_LENGTH),
    )
    task.build()
    rng = np.random.default_rng(seed)
    for w in task.weights:
        w.assign(rng.normal(0.0, 0.3, w.shape).astype("float32"))
    return task


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def heldout_rows(labels=LABELS):
    """Rows with text, label (cycling through `labels`) and a slice column `source`."""
    return [
        {"text": t, "label": labels[i % len(labels)], "source": "web" if i % 2 else "app"}
        for i, t in enumerate(TEXTS)
    ]
