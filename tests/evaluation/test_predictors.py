"""The predictors over a task and its exported SavedModel give the task's own probabilities."""

import numpy as np
import pytest

from keras_bert.evaluation import predictors
from tests.evaluation.tiny_task import LABELS, TEXTS, tiny_classifier


@pytest.fixture(scope="module")
def task_and_export(uncased_vocab, tmp_path_factory):
    task = tiny_classifier(uncased_vocab, seed=3)
    return task, task.export(tmp_path_factory.mktemp("export"), "tiny")


@pytest.mark.slow
def test_task_and_saved_model_predictors_agree_with_predict(task_and_export):
    task, version_dir = task_and_export
    expected = task.predict(TEXTS)
    for predictor in (
        predictors.TaskPredictor(task, name="t"),
        predictors.open_predictor(str(version_dir)),
    ):
        outputs, seconds, sizes = predictor.run(TEXTS, batch_size=5, progress=False)
        np.testing.assert_allclose(outputs["probabilities"], expected, rtol=1e-5, atol=1e-6)
        assert sizes.tolist() == [5, 5, 2] and seconds.shape == (3,) and (seconds > 0).all()
        assert outputs["labels"].tolist() == [LABELS[i].encode() for i in expected.argmax(1)]
    info = predictors.read_export_info(version_dir)
    assert (info.name, info.task_type, info.label_names, info.is_pair, info.max_seq_length) == (
        "tiny",
        "classification",
        LABELS,
        False,
        16,
    )
    assert info.vocabulary == task.preprocessor.vocabulary


def test_open_predictor_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        predictors.open_predictor(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="holds 0 .keras files"):
        predictors.open_predictor(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="export_config.json missing"):
        predictors.read_export_info(tmp_path)


def test_run_rejects_bad_batch_size(uncased_vocab):
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        predictors.TaskPredictor(tiny_classifier(uncased_vocab)).run(TEXTS, batch_size=0)
