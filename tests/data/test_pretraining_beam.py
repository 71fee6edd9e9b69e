"""The Beam pipeline behind create_pretraining_data writes exactly the instances of the in-memory
code (`create_training_instances`), whatever the order of the documents and for any number of
document groups; groups too small for next-sentence prediction are refused by name."""

import random

import pytest
import tensorflow as tf

from keras_bert import fileio
from keras_bert.data import pretraining_beam
from keras_bert.data import pretraining_data as pd

WORDS = [f"w{i}" for i in range(40)]
SEQ, PRED = 24, 4


def _documents(n: int, seed: int = 0) -> list[list[str]]:
    """n raw documents of 3-6 sentences of 2-9 vocabulary words (the text format)."""
    rng = random.Random(seed)
    return [
        [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))
            for _ in range(rng.randint(3, 6))
        ]
        for _ in range(n)
    ]


def _write_corpus(path, documents) -> None:
    fileio.write_text(path, "\n\n".join("\n".join(doc) for doc in documents) + "\n")


@pytest.fixture()
def vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    return str(path)


def _records(paths) -> list[bytes]:
    return [r.numpy() for p in paths for r in tf.data.TFRecordDataset(p)]


@pytest.mark.parametrize("groups", [1, 3])
def test_beam_shards_hold_exactly_the_in_memory_instances_whatever_the_order(
    tmp_path, vocab_file, groups
):
    documents = _documents(12)
    settings = pretraining_beam.PretrainingDataSettings(
        vocab_file=vocab_file,
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED,
        dupe_factor=2,
        random_seed=7,
        num_document_groups=groups,
    )
    outputs = []
    for run, order in enumerate((documents, documents[::-1])):
        corpus = str(tmp_path / f"corpus{run}.txt")
        _write_corpus(corpus, order)
        out = pd.shard_paths(str(tmp_path / f"run{run}" / "data.tfrecord"), 2)
        summary = pretraining_beam.run(
            [corpus], out, settings, str(tmp_path / f"run{run}" / "summary.json"), {}
        )
        outputs.append([fileio.read_bytes(p) for p in out])
        assert summary["instances"] == len(_records(out)) == sum(summary["shards"].values())
        assert summary["documents"] == 12
    assert outputs[0] == outputs[1]

    from keras_bert.tokenization import FullTokenizer

    tokenizer = FullTokenizer(vocab_file, do_lower_case=True)
    tokenized = [pd.tokenize_document(doc, tokenizer.tokenize) for doc in documents]
    expected = pd.create_training_instances(
        tokenized,
        list(tokenizer.vocab),
        SEQ,
        dupe_factor=2,
        max_predictions_per_seq=PRED,
        random_seed=7,
        num_document_groups=groups,
    )
    expected_records = [
        pd.features_to_example(
            pd.instance_to_features(i, tokenizer.vocab, SEQ, PRED)
        ).SerializeToString(deterministic=True)
        for i in expected
    ]
    got = _records(pd.shard_paths(str(tmp_path / "run0" / "data.tfrecord"), 2))
    assert sorted(got) == sorted(expected_records) and len(got) > 12


def test_a_group_of_one_document_is_refused_by_name():
    documents = [[["w1", "w2"], ["w3"]], [["w4"], ["w5", "w6"]]]
    keys = [pd.document_key(d) for d in documents]
    groups = next(g for g in range(2, 50) if len({pd.document_group(k, g) for k in keys}) == 2)
    with pytest.raises(
        ValueError, match="at least 2 documents per group.*got 1.*--num_document_groups"
    ):
        pd.create_training_instances(documents, WORDS, SEQ, num_document_groups=groups)


def test_the_random_stream_of_a_document_follows_its_content_not_its_position():
    documents = [pd.tokenize_document(d, str.split) for d in _documents(6, seed=3)]
    a = pd.create_training_instances(documents, WORDS, SEQ, dupe_factor=1, random_seed=1)
    b = pd.create_training_instances(documents[::-1], WORDS, SEQ, dupe_factor=1, random_seed=1)
    c = pd.create_training_instances(documents, WORDS, SEQ, dupe_factor=1, random_seed=2)
    assert a == b and a != c
