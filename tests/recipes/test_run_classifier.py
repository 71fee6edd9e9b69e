"""Two-step smoke test of recipes/run_classifier.py on a tiny config, handing the model to export."""

import json

import pytest
from tensorboard.backend.event_processing import event_accumulator

from tests.recipes.finished_run import assert_finished_run_dir, result_line
from tests.recipes.recipe_process import exported_run_flags, run_recipe, tiny_run_flags


@pytest.mark.slow
def test_two_step_smoke_with_export(tmp_path, data_dir, uncased_vocab):
    out, export_base = tmp_path / "out", tmp_path / "models"
    proc = run_recipe(
        "run_classifier.py",
        "--task_name=rte",
        f"--data_dir={data_dir / 'glue'}",
        *tiny_run_flags(uncased_vocab, 32, 4, 8),
        "--num_train_epochs=1",
        "--verbose=0",
        "--log_steps=1",
        *exported_run_flags(out, export_base, "rte_tiny"),
        "--export_dtype=bfloat16",
        tf_log_level="2",
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = json.loads((out / "config.json").read_text())
    assert (
        config["task_name"] == "rte"
        and config["train_batch_size"] == 4
        and config["preset"] == "bert_tiny"
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["runs"][0]["steps"] == 2 and metrics["monitor"] == "accuracy"
    assert len(metrics["runs"][0]["epochs"]) == 1 and 0 <= metrics["best"]["accuracy"] <= 1
    assert_finished_run_dir(out)
    assert json.loads((out / "checkpoints" / "checkpoint.json").read_text())["step"] == 2
    # --log_steps=1: a training-loss point in TensorBoard after every batch (default: every 100).
    events = event_accumulator.EventAccumulator(str(out / "logs" / "train"))
    events.Reload()
    assert [e.step for e in events.Tensors("step_loss")] == [1, 2]
    assert [e.step for e in events.Tensors("learning_rate")] == [1, 2]
    assert config["log_steps"] == 1 and "log_steps" in config["given"]
    assert (export_base / "rte_tiny" / "1" / "saved_model.pb").is_file()
    exported = json.loads(
        (export_base / "rte_tiny" / "1" / "assets" / "export_config.json").read_text()
    )
    assert exported["dtype_policy"] == "bfloat16" and exported["is_pair"] is True
    assert exported["label_names"] == ["entailment", "not_entailment"]
    assert "exported to" in proc.stdout
    # One line for the person, the whole record in metrics.json (no JSON dump on stdout).
    assert result_line(proc.stdout) == (
        f"dev accuracy {metrics['best']['accuracy']:.4f}, after 1 epoch "
        f"(all metrics: {out}/metrics.json)"
    )


def test_bad_flag_value_is_a_usage_error_without_traceback(tmp_path):
    proc = run_recipe(
        "run_classifier.py",
        "--task_name=sst2",
        f"--output_dir={tmp_path / 'out'}",
        "--evaluations_per_epoch=0",
        timeout=300,
    )
    assert proc.returncode == 2
    assert "run_classifier.py: error: --evaluations_per_epoch must be >= 1, got 0" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def _run(tmp_path, *flags):
    return run_recipe("run_classifier.py", *flags, f"--output_dir={tmp_path / 'out'}", timeout=300)


@pytest.mark.slow
def test_bad_user_data_is_one_clear_line_with_exit_code_2(tmp_path, uncased_vocab):
    (tmp_path / "train.csv").write_text("review,stars\ngreat,5\nawful,1\n")
    (tmp_path / "dev.csv").write_text("review,stars\nfine,3\n")
    (tmp_path / "empty.csv").write_text("")
    own = ["--task_name=text_classification", "--preset=bert_tiny", f"--vocab_file={uncased_vocab}"]
    cases = [
        (
            [f"--train_file={tmp_path / 'train.csv'}", f"--dev_file={tmp_path / 'train.csv'}"],
            f"{tmp_path / 'train.csv'}: missing column(s) ['text', 'label']; columns present: "
            "['review', 'stars']",
        ),
        (
            [
                f"--train_file={tmp_path / 'train.csv'}",
                f"--dev_file={tmp_path / 'dev.csv'}",
                "--text_column=review",
                "--label_column=stars",
            ],
            f"{tmp_path / 'dev.csv'}: data row 0 (0-based): label '3' is not a label name (the names "
            "are numbers, so ids are not read); give every label as one of the names ['1', '5']",
        ),
        (
            [
                f"--train_file={tmp_path / 'empty.csv'}",
                f"--dev_file={tmp_path / 'dev.csv'}",
                "--text_column=review",
                "--label_column=stars",
            ],
            "empty.csv",
        ),
    ]
    for flags, fragment in cases:
        proc = _run(tmp_path, *own, *flags)
        assert proc.returncode == 2, proc.stderr[-2000:]
        errors = [
            line
            for line in proc.stderr.splitlines()
            if "error" in line.lower() and "cuInit" not in line and "oneDNN" not in line
        ]
        assert len(errors) == 1 and errors[0].startswith("run_classifier.py: error: "), proc.stderr
        assert fragment in errors[0], errors[0]
        assert "Traceback" not in proc.stderr and "USAGE" not in proc.stderr
