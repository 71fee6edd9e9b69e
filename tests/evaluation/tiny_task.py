"""Tiny TextClassifiers and held-out files for the evaluation tests (random weights, real vocab)."""

import json

import numpy as np

import tests.tiny

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


def tiny_encoder(num_layers=2, hidden_size=16):
    """`tests.tiny`'s encoder over the real 30522-piece vocabulary, 32 positions."""
    return tests.tiny.tiny_encoder(
        vocab_size=30522,
        hidden_size=hidden_size,
        num_layers=num_layers,
        intermediate_size=24,
        max_sequence_length=32,
    )


def randomized(task, seed, stddev):
    """`task` with every weight drawn from N(0, stddev), so outputs differ per input."""
    rng = np.random.default_rng(seed)
    for w in task.weights:
        w.assign(rng.normal(0.0, stddev, w.shape).astype("float32"))
    return task


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
    from keras_bert.tasks import TextClassifier
    from keras_bert.tokenization import BertPreprocessor

    task = TextClassifier(
        tiny_encoder(num_layers, hidden_size),
        num_classes,
        label_names=label_names,
        is_pair=is_pair,
        preprocessor=BertPreprocessor(vocab_file, max_seq_length=MAX_SEQ_LENGTH),
    )
    task.build()
    return randomized(task, seed, 0.3)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def heldout_rows(labels=LABELS):
    """Rows with text, label (cycling through `labels`) and a slice column `source`."""
    return [
        {"text": t, "label": labels[i % len(labels)], "source": "web" if i % 2 else "app"}
        for i, t in enumerate(TEXTS)
    ]


NER_TAGS = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
# CoNLL-2003 layout (word POS chunk NER), IOB1 in the second document, one long sentence that
# the tagger windows (max_seq_length 16).
CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP O
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

John NNP B-NP B-PER
lives VBZ B-VP O
in IN B-PP O
New NNP B-NP B-LOC
York NNP I-NP I-LOC
. . O O

-DOCSTART- -X- -X- O

the DT B-NP O
united NNP I-NP I-ORG
nations NNP I-NP I-ORG
met VBD B-VP O
in IN B-PP O
paris NNP B-NP I-LOC
and CC O O
london NNP B-NP I-LOC
with IN B-PP O
mary NNP B-NP I-PER
smith NNP I-NP I-PER
and CC O O
the DT B-NP O
world NNP I-NP I-ORG
bank NNP I-NP I-ORG
on IN B-PP O
a DT B-NP O
long JJ I-NP O
rainy JJ I-NP O
day NN I-NP O
. . O O

a DT B-NP O
dog NN I-NP O

Anna NNP B-NP B-PER
went VBD B-VP O
to TO B-PP O
Berlin NNP B-NP B-LOC
"""


def tiny_tagger(vocab_file, seed=0, num_layers=1):
    """TokenClassifier over NER_TAGS on a small encoder with N(0, 0.5) weights (varied tags)."""
    from keras_bert.tasks import TokenClassifier
    from keras_bert.tokenization import BertPreprocessor

    task = TokenClassifier(
        tiny_encoder(num_layers),
        NER_TAGS,
        preprocessor=BertPreprocessor(vocab_file, max_seq_length=MAX_SEQ_LENGTH),
    )
    task.build_for_export()
    return randomized(task, seed, 0.5)


SQUAD_ARTICLES = [
    (
        "Ada",
        "Ada Lovelace wrote the first program in 1843 for the analytical engine of Charles "
        "Babbage in London .",
        [
            ("who wrote the first program ?", "Ada Lovelace"),
            ("when was the first program written ?", "1843"),
            ("where did babbage work ?", "London"),
            ("which engine was it for ?", "the analytical engine of Charles Babbage"),
            ("how old was ada then ?", None),
        ],
    ),
    (
        "Paris",
        "Paris is the capital of France and its largest city , on the river Seine .",
        [
            ("what is the capital of france ?", "Paris"),
            ("which river runs through paris ?", "the river Seine"),
            ("why is paris famous ?", None),
        ],
    ),
]


def squad_json(version_2=True) -> dict:
    """SQUAD_ARTICLES as a SQuAD JSON object (v1.1: the unanswerable questions left out)."""
    data = []
    for title, context, questions in SQUAD_ARTICLES:
        qas = []
        for i, (question, answer) in enumerate(questions):
            if answer is None and not version_2:
                continue
            qa = {"id": f"{title}-{i}", "question": question, "answers": []}
            if answer is not None:
                qa["answers"] = [{"text": answer, "answer_start": context.index(answer)}]
            if version_2:
                qa["is_impossible"] = answer is None
            qas.append(qa)
        data.append({"title": title, "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": "v2.0" if version_2 else "1.1", "data": data}


def tiny_reader(vocab_file, seed=0, version_2=True, num_layers=1):
    """SpanQuestionAnswerer (max_seq_length 32, windows of the context) with N(0, 0.5) weights."""
    from keras_bert.tasks import SpanQuestionAnswerer
    from keras_bert.tokenization import BertPreprocessor

    task = SpanQuestionAnswerer(
        tiny_encoder(num_layers),
        BertPreprocessor(vocab_file, max_seq_length=32),
        version_2_with_negative=version_2,
        doc_stride=8,
        max_query_length=10,
        max_answer_length=8,
    )
    task.build_for_export()
    return randomized(task, seed, 0.5)


SWAG_CSV = """,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label
0,v1,1,x,A man is sitting on a roof.,He,gold,starts pulling up roofing.,is ripping tiles off.,is holding a cube.,is using a crowbar.,0
1,v2,2,x,A woman walks into the kitchen.,She,gen,opens the fridge.,flies to the moon.,eats the table.,sings to a cat.,0
2,v3,3,x,The dog runs after the ball.,It,gold,catches it in its mouth.,reads a newspaper.,drives a car away.,paints the fence blue.,0
3,v4,4,x,Two kids play football in the park.,One,gen,cooks dinner for everyone.,kicks the ball hard.,writes a long letter.,swims across the sea.,1
4,v5,5,x,A chef chops onions.,He,gold,puts them in a pan.,throws the knife away.,starts to cry loudly.,leaves the restaurant.,0
5,v6,6,x,Someone opens an umbrella.,It,gen,starts to rain heavily outside today.,is sunny.,is night.,is cold.,0
"""


def tiny_chooser(vocab_file, seed=0, num_layers=1):
    """MultipleChoice over 4 choices (max_seq_length 16) with N(0, 0.5) weights."""
    from keras_bert.tasks import MultipleChoice
    from keras_bert.tokenization import BertPreprocessor

    task = MultipleChoice(
        tiny_encoder(num_layers),
        num_choices=4,
        preprocessor=BertPreprocessor(vocab_file, max_seq_length=MAX_SEQ_LENGTH),
    )
    task.build_for_export()
    return randomized(task, seed, 0.5)
