"""The one label rule (names or ids, never a mix) and every reader of a user's labels applying it."""

import pytest

from keras_bert.data import labels
from keras_bert.evaluation import evidence_pack as ep
from keras_bert.evaluation.kinds import classification
from keras_bert.evaluation.predictors import ModelInfo
from keras_bert.training.families import distillation
from keras_bert.training.families.classification import ClassifierArgs, load_task_data

NAMES = ["negative", "neutral", "positive"]
MIXED = ["positive", "negative", "2", "0"]  # the file: names and ids mixed


def mixed_message(source) -> str:
    return (
        f"{source}: data row 2 (0-based): label '2' is an id but data row 0 is the name "
        "'positive'; give every label as a name of ['negative', 'neutral', 'positive'] or "
        "every label as an id 0..2, not a mix"
    )


def write_csv(path, label_values):
    path.write_text("text,label\n" + "".join(f"text {i},{v}\n" for i, v in enumerate(label_values)))
    return path


def test_names_or_ids_never_a_mix():
    assert labels.label_ids(["positive", "negative", "neutral"], NAMES, "f").tolist() == [2, 0, 1]
    assert labels.label_ids(["2", "0"], NAMES, "f").tolist() == [2, 0]
    with pytest.raises(labels.LabelError) as e:
        labels.label_ids(MIXED, NAMES, "held.csv")
    assert str(e.value) == mixed_message("held.csv")
    tail = (
        "give every label as a name of ['negative', 'neutral', 'positive'] or every label "
        "as an id 0..2, not a mix"
    )
    with pytest.raises(labels.LabelError) as e:  # a mix in the other order: the first id offends
        labels.label_ids(["2", "great", "neutral"], NAMES, "f")
    assert str(e.value) == (
        f"f: data row 0 (0-based): label '2' is an id but data row 2 is the name 'neutral'; {tail}"
    )
    with pytest.raises(labels.LabelError) as e:
        labels.label_ids(["positive", "great"], NAMES, "f")
    assert (
        str(e.value)
        == f"f: data row 1 (0-based): label 'great' is neither a label name nor an id; {tail}"
    )
    with pytest.raises(labels.LabelError) as e:
        labels.label_ids(["0", "1", "3"], NAMES, "f")
    assert str(e.value) == f"f: data row 2 (0-based): label '3' is an id out of range; {tail}"


def test_number_names_are_read_as_names_only():
    stars = ["1", "2", "3", "4", "5"]
    assert labels.label_ids(["5", "1"], stars, "f").tolist() == [4, 0]
    with pytest.raises(labels.LabelError) as e:  # "0" is no star; it is not read as an id
        labels.label_ids(["0"], stars, "f")
    assert str(e.value) == (
        "f: data row 0 (0-based): label '0' is not a label name (the names are "
        "numbers, so ids are not read); give every label as one of the names "
        "['1', '2', '3', '4', '5']"
    )


def test_training_label_set():
    assert labels.label_set(["pos", "neg", "pos"], "t") == ["neg", "pos"]
    assert labels.label_set(["1", "0", "1"], "t") == ["0", "1"]
    with pytest.raises(labels.LabelError) as e:
        labels.label_set(MIXED, "train.csv")
    assert str(e.value) == (
        "train.csv: data row 2 (0-based): label '2' is an id but data row 0 is "
        "the name 'positive'; give every label as a name or every label as an "
        "id, not a mix"
    )
    with pytest.raises(
        labels.LabelError, match=r"^t: 1 distinct label\(s\) \['pos'\]; need at least 2$"
    ):
        labels.label_set(["pos", "pos"], "t")


def test_evaluate_reader(tmp_path):
    path = write_csv(tmp_path / "held.csv", MIXED)
    info = ModelInfo("m", "classification", NAMES, False, [], True, 16)
    with pytest.raises(ep.DataError) as e:
        classification.read_eval_data(path, info)
    assert str(e.value) == mixed_message(path)


def test_fine_tuning_own_data_reader(tmp_path):
    train = write_csv(tmp_path / "train.csv", NAMES)
    dev = write_csv(tmp_path / "dev.csv", MIXED)
    config = ClassifierArgs(
        task_name="text_classification",
        output_dir=str(tmp_path),
        train_file=str(train),
        dev_file=str(dev),
    )
    with pytest.raises(labels.LabelError) as e:
        load_task_data(config)
    assert str(e.value) == mixed_message(dev)
    write_csv(dev, ["2", "0"])  # ids of the training label set are read as its names
    assert [e.label for e in load_task_data(config).dev["dev"]] == ["positive", "negative"]


def test_distillation_reader(tmp_path):
    train = write_csv(tmp_path / "train.csv", NAMES)
    dev = write_csv(tmp_path / "dev.csv", MIXED)
    config = distillation.DistillArgs(
        teacher=str(tmp_path), output_dir=str(tmp_path), train_file=str(train), dev_file=str(dev)
    )
    with pytest.raises(labels.LabelError) as e:
        distillation.labelled_examples(config, NAMES)
    assert str(e.value) == mixed_message(dev)
    write_csv(dev, ["2", "0"])
    _, _, gold, dev_gold = distillation.labelled_examples(config, NAMES)
    assert (gold.tolist(), dev_gold.tolist()) == ([0, 1, 2], [2, 0])
