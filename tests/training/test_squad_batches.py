"""SQuAD training batches (squad_training.train_dataset_fn): every window once, length grouping."""
import numpy as np

from keras_bert.training.squad_training import train_dataset_fn


def _arrays(lengths, seq=12):
    mask = (np.arange(seq)[None, :] < np.asarray(lengths)[:, None]).astype(np.int32)
    return {"input_word_ids": mask * 7, "input_mask": mask, "input_type_ids": 0 * mask,
            "start_positions": np.arange(len(lengths), dtype=np.int32),
            "end_positions": np.arange(len(lengths), dtype=np.int32)}


def test_grouped_windows_share_batches_by_length_and_resume_skips():
    lengths = [12, 3, 9, 5, 11, 4, 10]
    make = train_dataset_fn(_arrays(lengths), batch_size=2, seed=1, group_by_length=True)
    batches = [(x["input_word_ids"].shape[1], y["start_logits"].numpy().tolist()) for x, y in make(0, 0)]
    assert sorted(sum((ids for _, ids in batches), [])) == list(range(7))
    rows = [sorted(lengths[i] for i in ids) for _, ids in batches]
    assert rows[-1] == [3] and sorted(rows[:-1]) == [[4, 5], [9, 10], [11, 12]]
    assert [width for width, _ in batches] == [r[-1] for r in rows]  # cut to the longest window
    assert [(x["input_word_ids"].shape[1], y["start_logits"].numpy().tolist())
            for x, y in make(0, 2)] == batches[2:]
    plain = train_dataset_fn(_arrays(lengths), batch_size=2, seed=1)
    assert sorted(sum((y["start_logits"].numpy().tolist() for _, y in plain(0, 0)), [])) == list(range(7))
