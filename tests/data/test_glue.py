"""GLUE readers on the real dev/train files (../shared/data/glue), plus malformed rows and tfds rows."""

import numpy as np
import pytest

from keras_bert.data import glue
from keras_bert.data.glue import InputExample

RTE_LAST_A = (
    'Danny Kennedy, Greenpeace campaigns director, said: "The burden of proof in the Scott Parkin '
    "expulsion case lies morally with the Commonwealth, to prove that he is a danger. When the "
    "Government brought in anti-terror legislation, they promised the public that these laws would "
    "only be used to confront a real and present risk of a terrorist attack, not a sweep-all approach "
    "against citizens. Peace is not terrorism. Peace is not a threat to national security. No "
    'democratic government should expel a foreign citizen because [it] opposes his political opinions."'
)

EXPECTED = {
    "sst2": (
        872,
        InputExample("dev-2", "it 's a charming and often affecting journey . ", None, "1"),
        InputExample(
            "dev-873",
            "looking aristocratic , luminous yet careworn in jane hamilton 's "
            "exemplary costumes , rampling gives a performance that could not be "
            "improved upon . ' ",
            None,
            "1",
        ),
    ),
    "mrpc": (
        408,
        InputExample(
            "dev-2",
            "He said the foodservice pie business doesn't fit the company's "
            "long-term growth strategy.",
            '"The foodservice pie business does not fit our long-term growth strategy.',
            "1",
        ),
        InputExample(
            "dev-409",
            "Ex-KGB agent Putin added that the Beatles were considered "
            "'propaganda of an alien ideology'.",
            "In Soviet times the Beatles' music \"was considered propaganda of an alien ideology.",
            "1",
        ),
    ),
    "rte": (
        277,
        InputExample(
            "dev-2",
            "Dana Reeve, the widow of the actor Christopher Reeve, has died of "
            "lung cancer at age 44, according to the Christopher Reeve Foundation.",
            "Christopher Reeve had an accident.",
            "not_entailment",
        ),
        InputExample(
            "dev-278",
            RTE_LAST_A,
            "Greenpeace director said that peace is terrorism.",
            "not_entailment",
        ),
    ),
    "stsb": (
        1500,
        InputExample(
            "dev-2",
            "A man with a hard hat is dancing.",
            "A man wearing a hard hat is dancing.",
            5.0,
        ),
        InputExample(
            "dev-1501",
            "New video shows US police officers beating mentally-ill man",
            "New York police officer critically wounded in hatchet attack",
            0.0,
        ),
    ),
    "cola": (
        1043,
        InputExample("dev-1", "The sailors rode the breeze clear of the rocks.", None, "1"),
        InputExample("dev-1043", "John talked to Bill about himself.", None, "1"),
    ),
}


@pytest.mark.parametrize("task", sorted(EXPECTED))
def test_dev_row_counts_first_and_last(task, data_dir):
    count, first, last = EXPECTED[task]
    examples = glue.read_glue(task, "dev", data_dir / "glue", on_error="raise")
    assert len(examples) == count
    assert examples[0] == first
    assert examples[-1] == last


def test_label_counts_and_train_sizes(data_dir):
    # Label totals from ../shared/data/README.md: independent of our column choice.
    sst2 = glue.read_glue("SST-2", "dev", data_dir, on_error="raise")
    assert sum(e.label == "1" for e in sst2) == 444
    mrpc = glue.read_glue("mrpc", "dev", data_dir, on_error="raise")
    assert sum(e.label == "1" for e in mrpc) == 279
    cola = glue.read_glue("cola", "dev", data_dir, on_error="raise")
    assert sum(e.label == "1" for e in cola) == 721
    rte = glue.read_glue("rte", "dev", data_dir, on_error="raise")
    assert sum(e.label == "entailment" for e in rte) == 146
    stsb = glue.read_glue("stsb", "dev", data_dir, on_error="raise")
    assert min(e.label for e in stsb) == 0.0 and max(e.label for e in stsb) == 5.0
    assert len(glue.read_glue("mrpc", "train", data_dir, on_error="raise")) == 3668
    assert len(glue.read_glue("stsb", "train", data_dir, on_error="raise")) == 5749


def test_malformed_row_reported_and_does_not_shift_labels(tmp_path, caplog):
    path = tmp_path / "dev.tsv"
    path.write_text(
        "index\tsentence1\tsentence2\tlabel\n"
        "0\ta\tb\tentailment\n"
        '1\t"unbalanced quote\tonly three\n'  # one column short
        "2\tc\td\tnot_entailment\n"
        "3\te\tf\tmaybe\n"  # unknown label
        "4\tg\th\tentailment\n",
        encoding="utf-8",
    )
    examples = glue.read_tsv_file(path, "rte", "dev")
    assert [(e.guid, e.text_a, e.label) for e in examples] == [
        ("dev-2", "a", "entailment"),
        ("dev-4", "c", "not_entailment"),
        ("dev-6", "g", "entailment"),
    ]
    assert f"{path}:3: malformed rte row: expected 4 tab-separated columns, found 3" in caplog.text
    assert f"{path}:5: malformed rte row: label 'maybe' is not one of" in caplog.text
    with pytest.raises(glue.MalformedRowError, match=r"dev.tsv:3: .*expected 4 .* found 3"):
        glue.read_tsv_file(path, "rte", "dev", on_error="raise")


def test_quotes_are_plain_characters_and_crlf(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text(
        "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n"
        '1\t1\t2\t"He said\tShe said "no\r\n'
        '0\t3\t4\tx\ty"\r\n',
        encoding="utf-8",
    )
    examples = glue.read_tsv_file(path, "mrpc", "train", on_error="raise")
    assert examples == [
        InputExample("train-2", '"He said', 'She said "no', "1"),
        InputExample("train-3", "x", 'y"', "0"),
    ]


def test_a_header_narrower_than_the_task_is_one_error_whatever_on_error_says(tmp_path):
    """Found by tests/test_fileio_readers.py's fuzzing: an IndexError on every row before."""
    path = tmp_path / "train.tsv"
    path.write_text("id,text\nr1,a\n", encoding="utf-8")  # a CSV given as SST-2's TSV
    for on_error in ("warn", "ignore", "raise"):
        with pytest.raises(glue.MalformedRowError) as e:
            glue.read_tsv_file(path, "sst2", "train", on_error=on_error)
        assert str(e.value) == (
            f"{path}:1: the header has 1 tab-separated columns; sst2 train rows need at least 2"
        )


def test_test_split_has_no_labels_and_mnli_splits(tmp_path):
    (tmp_path / "MNLI").mkdir()
    header = "index\tpromptID\tpairID\tgenre\ts1b\ts2b\ts1p\ts2p\tsentence1\tsentence2"
    (tmp_path / "MNLI" / "test_matched.tsv").write_text(
        header + "\n0\t1\t2\tg\t-\t-\t-\t-\tpremise\thypothesis\n"
    )
    (tmp_path / "MNLI" / "dev_mismatched.tsv").write_text(
        header + "\tlabel1\tgold_label\n0\t1\t2\tg\t-\t-\t-\t-\tp\th\tneutral\tneutral\n"
    )
    assert glue.read_glue("mnli", "test_matched", tmp_path) == [
        InputExample("test_matched-2", "premise", "hypothesis", None)
    ]
    assert glue.read_glue("MNLI", "dev_mismatched", tmp_path)[0].label == "neutral"
    assert glue.get_task("mnli").dev_splits == ("dev_matched", "dev_mismatched")
    with pytest.raises(ValueError, match="task 'mnli' has no split 'dev'"):
        glue.read_glue("mnli", "dev", tmp_path)
    with pytest.raises(FileNotFoundError, match="no train.tsv for GLUE task 'mnli'"):
        glue.read_glue("mnli", "train", tmp_path)
    with pytest.raises(ValueError, match="unknown GLUE task 'squad'"):
        glue.get_task("squad")


def test_all_nine_tasks_defined():
    assert sorted(glue.TASKS) == [
        "cola",
        "mnli",
        "mrpc",
        "qnli",
        "qqp",
        "rte",
        "sst2",
        "stsb",
        "wnli",
    ]
    assert glue.get_task("stsb").num_classes == 1 and glue.get_task("mnli").num_classes == 3
    assert glue.get_task("qqp").is_pair and not glue.get_task("cola").is_pair


def test_tfds_rows_map_labels_by_name():
    rows = [
        {"premise": b"p0", "hypothesis": b"h0", "label": np.int64(0), "idx": 0},
        {"premise": b"p1", "hypothesis": b"h1", "label": np.int64(2), "idx": 1},
        {"premise": b"p2", "hypothesis": b"h2", "label": np.int64(-1), "idx": 2},
    ]
    # tensorflow-datasets' MNLI ClassLabel order differs from ours.
    out = glue.examples_from_tfds(
        "mnli", "dev_matched", rows, ["entailment", "neutral", "contradiction"]
    )
    assert out == [
        InputExample("dev_matched-0", "p0", "h0", "entailment"),
        InputExample("dev_matched-1", "p1", "h1", "contradiction"),
        InputExample("dev_matched-2", "p2", "h2", None),
    ]
    stsb = glue.examples_from_tfds(
        "stsb", "dev", [{"sentence1": b"a", "sentence2": b"b", "label": 3.8}]
    )
    assert stsb[0].label == pytest.approx(3.8)


def test_a_non_finite_stsb_score_is_a_malformed_row(tmp_path):
    # The glue_tsv fuzz target's property (a regression label is a finite number): "nan" and
    # "inf" parsed as STS-B scores.
    path = tmp_path / "dev.tsv"
    header = "genre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    path.write_text(header + "g\tf\ty\t0\ts\ts\ta\tb\tnan\ng\tf\ty\t1\ts\ts\tc\td\t-inf\n")
    with pytest.raises(glue.MalformedRowError) as raised:
        glue.read_tsv_file(path, "stsb", "dev", on_error="raise")
    assert str(raised.value) == f"{path}:2: malformed stsb row: label 'nan' is not a number"
    assert glue.read_tsv_file(path, "stsb", "dev", on_error="ignore") == []
