"""The driver's training batches (`batches.train_batches`): every row once per epoch, the last
partial batch kept, each batch cut to its longest row, length grouping, resume by skipping, and
labels of every family's shape (ids [N], per position [N, T], SQuAD's dict of positions)."""

import numpy as np

from keras_bert.training.batches import train_batches


def _features(lengths, seq):
    ids = np.zeros((len(lengths), seq), np.int32)
    for i, n in enumerate(lengths):  # row i has n real pieces
        ids[i, :n] = 10 + i
    return {
        "input_word_ids": ids,
        "input_mask": (ids > 0).astype(np.int32),
        "input_type_ids": np.zeros_like(ids),
    }


def _batches(features, labels, *, group_by_length, seed=3, epoch=0, skip=0, **kwargs):
    """All the batches `train_batches` gives at batch size 2 for `epoch` after skipping `skip`,
    as a list (the generator read to its end)."""
    return list(
        train_batches(
            features,
            labels,
            batch_size=2,
            seed=seed,
            epoch=epoch,
            skip=skip,
            group_by_length=group_by_length,
            **kwargs,
        )
    )


def _ids(batches):
    return [y.numpy().tolist() for _, y in batches]


def test_last_partial_batch_is_kept_and_rows_are_cut_to_the_longest():
    lengths = [2, 4, 3, 2, 5]
    features = _features(lengths, 6)
    labels = np.arange(5, dtype=np.int32)
    batches = _batches(features, labels, group_by_length=False)
    assert [len(y) for _, y in batches] == [2, 2, 1]  # 5 rows at batch 2: 3 steps, none dropped
    assert sorted(sum(_ids(batches), [])) == [0, 1, 2, 3, 4]
    # The order is the seeded permutation of seed + epoch.
    assert sum(_ids(batches), []) == np.random.default_rng(3).permutation(5).tolist()
    for x, y in batches:  # each batch cut to its own longest row, never below 2
        assert x["input_word_ids"].shape[1] == max(2, max(lengths[i] for i in y.numpy()))
        np.testing.assert_array_equal(
            x["input_word_ids"].numpy(),
            features["input_word_ids"][y.numpy(), : x["input_word_ids"].shape[1]],
        )
    again = _batches(features, labels, skip=1, group_by_length=False)
    assert _ids(again) == _ids(batches[1:])
    other_epoch = _batches(features, labels, epoch=1, group_by_length=False)
    assert sum(_ids(other_epoch), []) == np.random.default_rng(4).permutation(5).tolist()
    # Rounded up to a multiple of pad_to_multiple_of, but never past the arrays' width.
    rounded = _batches(features, labels, group_by_length=False, pad_to_multiple_of=4)
    assert [x["input_word_ids"].shape[1] for x, _ in rounded] == [
        min(6, -(-max(lengths[i] for i in y.numpy()) // 4) * 4) for _, y in rounded
    ]


def test_group_by_length_pairs_neighbours_in_length_for_tokens_and_choices():
    lengths = [7, 2, 5, 3, 8, 4, 6]
    features = _features(lengths, 9)
    # Per position (NER): a label per token, cut with the ids.
    labels = (features["input_word_ids"] > 0).astype(np.int32) * np.arange(7)[:, None]
    batches = _batches(features, labels, group_by_length=True, per_position=True)
    rows = [sorted(lengths[i] for i in y.numpy().max(-1)) for _, y in batches]
    # One group: sorted by length and cut in twos, the shortest row alone in the last batch.
    assert rows[-1] == [2] and sorted(rows[:-1]) == [[3, 4], [5, 6], [7, 8]]
    assert [x["input_word_ids"].shape[1] for x, _ in batches] == [r[-1] for r in rows]
    assert [y.shape[1] for _, y in batches] == [r[-1] for r in rows]
    for x, y in batches:  # labels stay aligned with their tokens
        np.testing.assert_array_equal(
            y.numpy(), (x["input_word_ids"].numpy() > 0) * y.numpy().max(-1, keepdims=True)
        )
    again = _batches(features, labels, skip=2, group_by_length=True, per_position=True)
    assert _ids(again) == _ids(batches[2:])
    # Without per_position, [N, T] labels are not cut (they are not per token).
    whole = _batches(features, labels, group_by_length=True)
    assert [y.shape[1] for _, y in whole] == [9, 9, 9, 9]
    # Multiple choice [N, C, T]: an example is as long as its longest choice.
    choices = np.zeros((4, 2, 9), np.int32)
    for i, (a, b) in enumerate([(2, 9), (3, 3), (8, 2), (4, 2)]):
        choices[i, 0, :a], choices[i, 1, :b] = 1, 1
    grouped = _batches(
        {"input_word_ids": choices, "input_mask": choices, "input_type_ids": 0 * choices},
        np.arange(4),
        seed=0,
        group_by_length=True,
    )
    assert sorted(sorted(y.numpy().tolist()) for _, y in grouped) == [[0, 2], [1, 3]]
    assert sorted(tuple(x["input_word_ids"].shape[1:]) for x, _ in grouped) == [(2, 4), (2, 9)]


def _squad_arrays(lengths, seq=12):
    mask = (np.arange(seq)[None, :] < np.asarray(lengths)[:, None]).astype(np.int32)
    features = {"input_word_ids": mask * 7, "input_mask": mask, "input_type_ids": 0 * mask}
    positions = np.arange(len(lengths), dtype=np.int32)
    return features, {"start_logits": positions, "end_logits": positions + 100}


def test_squad_windows_with_dict_labels_share_batches_by_length_and_resume_skips():
    lengths = [12, 3, 9, 5, 11, 4, 10]
    features, labels = _squad_arrays(lengths)

    def make(epoch, skip, group=True):
        return [
            (
                x["input_word_ids"].shape[1],
                y["start_logits"].numpy().tolist(),
                y["end_logits"].numpy().tolist(),
            )
            for x, y in _batches(
                features, labels, seed=1, epoch=epoch, skip=skip, group_by_length=group
            )
        ]

    batches = make(0, 0)
    assert sorted(sum((ids for _, ids, _ in batches), [])) == list(range(7))  # every window once
    assert all(end == [i + 100 for i in start] for _, start, end in batches)  # start, end together
    rows = [sorted(lengths[i] for i in ids) for _, ids, _ in batches]
    assert rows[-1] == [3] and sorted(rows[:-1]) == [[4, 5], [9, 10], [11, 12]]
    assert [width for width, _, _ in batches] == [r[-1] for r in rows]  # cut to the longest window
    assert make(0, 2) == batches[2:]
    plain = make(0, 0, group=False)
    assert sum((ids for _, ids, _ in plain), []) == np.random.default_rng(1).permutation(7).tolist()
