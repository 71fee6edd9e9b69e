"""[UNK] and truncation rates, overall and per slice, and train / held-out overlap."""

import pytest

from keras_bert.evaluation import data_health as dh


def test_rates_overall_and_per_slice():
    h = dh.health(
        pieces=[4, 6, 10, 2],
        unknown=[1, 0, 2, 0],
        truncated=[False, False, True, True],
        columns={"gold label": ["a", "b", "a", "b"]},
    )
    assert h["overall"] == {
        "examples": 4,
        "pieces": 22,
        "unk_pieces": 3,
        "unk_rate": pytest.approx(3 / 22),
        "rows_with_unk": 2,
        "truncated": 2,
        "truncation_rate": 0.5,
    }
    a, b = h["slices"]
    assert (a["family"], a["value"], a["unk_rate"], a["truncation_rate"]) == (
        "gold label",
        "a",
        pytest.approx(3 / 14),
        0.5,
    )
    assert (b["value"], b["unk_pieces"], b["rows_with_unk"], b["truncated"]) == ("b", 0, 0, 1)


def test_normalize():
    assert dh.normalize("  A  GREAT film!!  ") == "a great film"
    assert dh.normalize("It's---fine,\tREALLY.") == "it s fine really"
    assert dh.normalize("Ｆｕｌｌ width") == "full width"  # NFKC


def test_leakage_exact_and_near():
    train = ["a great film", "Dull and slow.", "brilliant"]
    held = ["brilliant", "dull and slow", "not in train", "A GREAT film!", "a great film"]
    leak = dh.leakage(train, held)
    assert (leak["train_examples"], leak["exact"], leak["near"]) == (3, 2, 2)
    assert [(r["row"], r["train_row"], r["kind"]) for r in leak["rows"]] == [
        (0, 2, "exact"),
        (1, 1, "near"),
        (3, 0, "near"),
        (4, 0, "exact"),
    ]
    assert dh.leakage(train, held, limit=1)["rows"] == [leak["rows"][0]]
    assert dh.leakage(train, ["new text"]) == {
        "train_examples": 3,
        "exact": 0,
        "near": 0,
        "rows": [],
    }


def test_train_leakage_reads_the_file(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("sentence\tlabel\na great film\t1\nboring\t0\n")
    leak = dh.train_leakage(str(path), "sentence", None, ["Boring!", "other"])
    assert (leak["train_file"], leak["exact"], leak["near"]) == (str(path), 0, 1)
    with pytest.raises(ValueError, match="sentences"):
        dh.train_leakage(str(path), "sentences", None, ["x"])
