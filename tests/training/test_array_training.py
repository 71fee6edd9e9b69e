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


def test_group_by_length_pairs_neighbours_in_length_for_tokens_and_choices():
    lengths = [7, 2, 5, 3, 8, 4, 6]
    ids = np.zeros((7, 9), np.int32)
    for i, n in enumerate(lengths):
        ids[i, :n] = 10 + i
    features = {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                "input_type_ids": np.zeros_like(ids)}
    labels = (ids > 0).astype(np.int32) * np.arange(7)[:, None]  # per position, cut with the ids
    batches = list(trimmed_batches(features, labels, batch_size=2, seed=3, epoch=0, skip=0,
                                   group_by_length=True))
    rows = [sorted(lengths[i] for i in y.numpy().max(-1)) for _, y in batches]
    # One group: sorted by length and cut in twos, the shortest row alone in the last batch.
    assert rows[-1] == [2] and sorted(rows[:-1]) == [[3, 4], [5, 6], [7, 8]]
    assert [x["input_word_ids"].shape[1] for x, _ in batches] == [r[-1] for r in rows]
    assert [y.shape[1] for _, y in batches] == [r[-1] for r in rows]
    again = list(trimmed_batches(features, labels, 2, seed=3, epoch=0, skip=2, group_by_length=True))
    assert [y.numpy().tolist() for _, y in again] == [y.numpy().tolist() for _, y in batches[2:]]
    # Multiple choice [N, C, T]: an example is as long as its longest choice.
    choices = np.zeros((4, 2, 9), np.int32)
    for i, (a, b) in enumerate([(2, 9), (3, 3), (8, 2), (4, 2)]):
        choices[i, 0, :a], choices[i, 1, :b] = 1, 1
    grouped = list(trimmed_batches({"input_word_ids": choices, "input_mask": choices,
                                    "input_type_ids": 0 * choices}, np.arange(4), 2, seed=0,
                                   epoch=0, skip=0, group_by_length=True))
    assert sorted(sorted(y.numpy().tolist()) for _, y in grouped) == [[0, 2], [1, 3]]
