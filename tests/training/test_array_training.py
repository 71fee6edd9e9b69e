"""The in-memory loop of the NER and SWAG recipes keeps every row (array_training)."""
import numpy as np

from keras_bert.training.array_training import trimmed_batches


def test_last_partial_batch_is_kept_and_rows_are_cut_to_the_longest():
    ids = np.zeros((5, 6), np.int32)
    for i, n in enumerate([2, 4, 3, 2, 5]):  # row i has n real pieces
        ids[i, :n] = 10 + i
    features = {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                "input_type_ids": np.zeros_like(ids)}
    labels = np.arange(5, dtype=np.int32)
    batches = list(trimmed_batches(features, labels, batch_size=2, seed=3, epoch=0, skip=0))
    assert [len(y) for _, y in batches] == [2, 2, 1]  # 5 rows at batch 2: 3 steps, none dropped
    assert sorted(np.concatenate([y.numpy() for _, y in batches]).tolist()) == [0, 1, 2, 3, 4]
    for x, y in batches:  # each batch cut to its own longest row, never below 2
        lengths = [[2, 4, 3, 2, 5][i] for i in y.numpy()]
        assert x["input_word_ids"].shape[1] == max(2, max(lengths))
    again = list(trimmed_batches(features, labels, batch_size=2, seed=3, epoch=0, skip=1))
    assert [y.numpy().tolist() for _, y in again] == [y.numpy().tolist() for _, y in batches[1:]]
    other_epoch = list(trimmed_batches(features, labels, batch_size=2, seed=3, epoch=1, skip=0))
    assert len(other_epoch) == 3
