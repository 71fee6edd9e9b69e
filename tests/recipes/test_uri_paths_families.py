"""The SQuAD, SWAG and distillation families end to end with every path a `ram://` URI: data
(real rows from $KERAS_BERT_DATA_DIR, or the official SWAG CSV layout), the real uncased vocab,
the init checkpoint or teacher, output_dir and --export_dir all there; the outputs read back
there (metrics, predictions, config, one complete export version) and no local `ram:` directory
in the cwd (the `ram` fixture of tests/recipes/conftest.py checks that at teardown).

As in test_uri_paths.py, everything runs in process (`trainer.prepare` / `trainer.run`, what
`recipe.run_recipe` calls), since ram:// lives in one process.
"""

import csv
import io
import json

import pytest

from keras_bert import fileio
from keras_bert.tasks import MultipleChoice, SpanQuestionAnswerer, TextClassifier, load_task
from keras_bert.training.families import classification, distillation, squad, swag
from tests.data.test_swag import HEADER, ROWS
from tests.recipes.on_ram import (
    exported_epoch,
    quiet_epoch,
    run_and_assert_kept,
    run_family,
    tiny_checkpoint,
    write,
)
from tests.tiny import TINY_SQUAD_WINDOWS

VERSION_FILES = {"assets", "saved_model.pb", "variables", fileio.COMPLETE_MARKER}


@pytest.fixture(scope="module")
def real_data(data_dir):
    """$KERAS_BERT_DATA_DIR made absolute before the `ram` fixture changes the cwd."""
    return data_dir.resolve()


@pytest.fixture
def init(ram, real_data):
    """A random bert_tiny init checkpoint on ram:// (`on_ram.tiny_checkpoint`) over the real
    bert-base-uncased vocab, copied there as <ram>/vocab/uncased.txt."""
    vocab = f"{ram}/vocab/uncased.txt"
    write(vocab, (real_data / "vocab" / "bert-base-uncased-vocab.txt").read_bytes())
    return tiny_checkpoint(ram, vocab)


def _assert_one_complete_version(export_dir: str, name: str, summary: dict) -> dict:
    """`<export_dir>/<name>` holds version 1 only (no staging dir left), complete (saved_model.pb
    and the marker); returns its assets/export_config.json."""
    version = f"{export_dir}/{name}/1"
    assert summary["export_path"] == version
    assert fileio.listdir(f"{export_dir}/{name}") == ["1"]
    assert VERSION_FILES <= set(fileio.listdir(version))
    assert fileio.is_complete(version)
    return fileio.read_json(f"{version}/assets/export_config.json")


@pytest.mark.slow  # about 75 s on 2 busy CPU cores
def test_run_squad_on_ram(ram, real_data, init):
    article = json.loads((real_data / "squad" / "dev-v2.0-subset.json").read_text())["data"][0]
    paragraph = article["paragraphs"][0]  # 9 questions: 5 answerable, then 4 without answer
    file = f"{ram}/squad/dev.json"
    squad_json = {
        "version": "v2.0",
        "data": [{"title": article["title"], "paragraphs": [paragraph]}],
    }
    write(file, json.dumps(squad_json))
    args = squad.SquadArgs(
        init_checkpoint=init,
        train_file=file,
        predict_file=file,
        version_2_with_negative=True,
        max_train_examples=4,
        max_eval_examples=6,
        **TINY_SQUAD_WINDOWS,
        train_batch_size=16,
        **exported_epoch(ram, "qa_tiny"),
    )
    summary, metrics = run_and_assert_kept(
        squad, args, "train_file", "predict_file", "init_checkpoint", "export_dir", "doc_stride"
    )
    out, models = args.output_dir, args.export_dir
    assert (metrics["family"], metrics["monitor"], metrics["best"]) == ("squad", "f1", None)
    assert (metrics["train_examples"], metrics["predict_examples"]) == (4, 6)
    assert metrics["version_2_with_negative"] is True and len(metrics["runs"]) == 1
    for key in ("exact", "f1", "total", "HasAns_total", "NoAns_total", "best_f1"):
        assert key in metrics
    assert (metrics["total"], metrics["HasAns_total"], metrics["NoAns_total"]) == (6, 5, 1)
    assert "export_path" not in metrics and summary["f1"] == metrics["f1"]
    question_ids = [qa["id"] for qa in paragraph["qas"][:6]]
    predictions = fileio.read_json(f"{out}/predictions.json")
    assert sorted(predictions) == sorted(question_ids)
    assert all(
        isinstance(text, str) and text in paragraph["context"] for text in predictions.values()
    )
    for name in ("nbest_predictions.json", "null_odds.json"):
        assert sorted(fileio.read_json(f"{out}/{name}")) == sorted(question_ids)
    assert fileio.read_json(f"{out}/checkpoints/checkpoint.json")["complete"] is True

    export_config = _assert_one_complete_version(models, "qa_tiny", summary)
    assert export_config["task_type"] == "span_question_answering"
    assert export_config["doc_stride"] == 32 and export_config["version_2_with_negative"] is True
    task = load_task(out)
    assert isinstance(task, SpanQuestionAnswerer) and task.preprocessor.max_seq_length == 64


def _swag_csv(rows) -> str:
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(HEADER)
    writer.writerows(rows)
    return text.getvalue()


@pytest.mark.slow  # about 50-80 s on 2 busy CPU cores
def test_run_swag_on_ram(ram, init):
    # SWAG is not shipped (../shared/data/README.md): two rows of the official val.csv layout.
    train, dev = f"{ram}/swag/train.csv", f"{ram}/swag/val.csv"
    write(train, _swag_csv(ROWS * 2))
    write(dev, _swag_csv(ROWS))
    args = swag.SwagArgs(
        train_file=train,
        dev_file=dev,
        init_checkpoint=init,
        max_seq_length=24,
        train_batch_size=2,
        **exported_epoch(ram, "swag_tiny"),
    )
    summary, metrics = run_and_assert_kept(
        swag, args, "train_file", "dev_file", "init_checkpoint", "export_dir", "max_seq_length"
    )
    out, models = args.output_dir, args.export_dir
    assert (metrics["family"], metrics["monitor"], metrics["train_examples"]) == (
        "swag",
        "accuracy",
        4,
    )
    run = metrics["runs"][0]
    assert run["steps"] == 2 and [e["epoch"] for e in run["epochs"]] == [1]
    assert metrics["best"]["accuracy"] == metrics["dev"]["accuracy"] in (0.0, 0.5, 1.0)
    assert fileio.read_json(f"{out}/checkpoints/checkpoint.json")["step"] == 2

    export_config = _assert_one_complete_version(models, "swag_tiny", summary)
    assert export_config["dev"] == metrics["dev"]
    assert isinstance(load_task(out), MultipleChoice)


def _sst2_rows(real_data, split: str, n: int) -> str:
    """The header and the first `n` rows of the real SST-2 `split`.tsv."""
    lines = (real_data / "glue" / "sst2" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
    return "\n".join(lines[: n + 1]) + "\n"


@pytest.mark.slow  # about 70-90 s on 2 busy CPU cores (a teacher run, then the student)
def test_distillation_on_ram(ram, real_data, init):
    glue_dir = f"{ram}/glue"
    write(f"{glue_dir}/sst2/train.tsv", _sst2_rows(real_data, "train", 16))
    write(f"{glue_dir}/sst2/dev.tsv", _sst2_rows(real_data, "dev", 8))
    teacher = f"{ram}/teacher"
    teacher_args = classification.ClassifierArgs(
        task_name="sst2",
        data_dir=glue_dir,
        init_checkpoint=init,
        max_seq_length=16,
        train_batch_size=8,
        **quiet_epoch(teacher),
    )
    run_family(classification, teacher_args)

    args = distillation.DistillArgs(
        teacher=teacher,
        task_name="sst2",
        data_dir=glue_dir,
        student_layers=1,
        train_batch_size=8,
        **exported_epoch(ram, "student"),
    )
    summary, metrics = run_and_assert_kept(
        distillation, args, "teacher", "data_dir", "student_layers", "export_dir"
    )
    out, models = args.output_dir, args.export_dir
    assert (metrics["family"], metrics["monitor"]) == ("distillation", "dev_accuracy")
    assert (metrics["train_examples"], metrics["dev_examples"]) == (16, 8)
    assert metrics["teacher"]["path"] == teacher and metrics["teacher"]["layers"] == 2
    assert metrics["student"]["layers"] == 1
    run = metrics["runs"][0]
    assert run["steps"] == 2 and [e["epoch"] for e in run["epochs"]] == [1]
    assert metrics["best"] == run["epochs"][0]
    assert {"dev_accuracy", "dev_agreement", "train_agreement", "loss"} <= set(metrics["best"])
    assert fileio.read_json(f"{out}/checkpoints/checkpoint.json")["step"] == 2

    export_config = _assert_one_complete_version(models, "student", summary)
    assert export_config["bert_config"]["num_layers"] == 1
    student = load_task(out)
    assert isinstance(student, TextClassifier) and student.encoder.bert_config.num_layers == 1
