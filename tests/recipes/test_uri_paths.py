"""The recipes end to end with every path a `ram://` URI (TensorFlow's in-memory file system, the
stand-in for gs:// / s3:// here): data, vocab, init checkpoint and outputs there, the outputs
read back there, and no local `ram:` directory (what pathlib's folding of `ram://x` would make).

ram:// lives in one process, so everything runs in process: the fine-tuning families through
`trainer.prepare` / `trainer.run` (what `recipe.run_recipe` calls), pretraining through
`run_pretraining`, and the absl recipes through their `main` (`recipe_process.run_recipe_main`). An unreachable
remote URI is checked once in a subprocess (the exit status and the one stderr line) and in process.
"""

import os

import pytest

from keras_bert import fileio
from keras_bert.cli import check_paths_reachable
from keras_bert.training.families import classification, ner
from keras_bert.training.pretraining import PretrainConfig, run_pretraining
from tests.recipes.on_ram import (
    RESERVED,
    WORDS,
    quiet_epoch,
    run_and_assert_kept,
    run_family,
    tiny_checkpoint,
    write,
)
from tests.recipes.recipe_process import run_recipe, run_recipe_main

SST2 = [("a good film", 1), ("a bad film", 0), ("great plot", 1), ("dull movie", 0)] * 3
TEXT = "\n".join(
    [f"the {w} film was {v} ." for w in WORDS[:8] for v in ("good", "bad")]
    + [""]
    + [f"it is not a {w} movie ." for w in WORDS[8:]]
)


def _fine_tune_sst2(ram: str, dev_rows, output_dir: str) -> tuple[dict, dict]:
    """`SST2` as <ram>/data/glue/sst2/train.tsv and `dev_rows` as its dev.tsv, then one epoch of
    the classification family from a tiny init checkpoint into `output_dir`, all on ram://, the
    run's settings checked in its config.json (`run_and_assert_kept`); returns (the run's summary,
    its metrics.json)."""
    glue_dir = f"{ram}/data/glue"
    for split, rows in (("train", SST2), ("dev", dev_rows)):
        lines = ["sentence\tlabel"] + [f"{t}\t{label}" for t, label in rows]
        write(f"{glue_dir}/sst2/{split}.tsv", "\n".join(lines) + "\n")
    args = classification.ClassifierArgs(
        task_name="sst2",
        data_dir=glue_dir,
        init_checkpoint=tiny_checkpoint(ram, f"{ram}/vocab.txt"),
        max_seq_length=8,
        train_batch_size=4,
        **quiet_epoch(output_dir),
    )
    return run_and_assert_kept(classification, args, "task_name", "data_dir", "init_checkpoint")


@pytest.mark.slow  # about 15-30 s on 2 CPU cores
def test_run_classifier_on_ram(ram):
    out = f"{ram}/out"
    summary, metrics = _fine_tune_sst2(ram, SST2[:4], out)
    assert {"runs", "best", "monitor", "family"} <= set(metrics)
    assert metrics["monitor"] == "accuracy" and metrics["runs"][0]["steps"] == 3
    assert fileio.read_json(f"{out}/checkpoints/checkpoint.json")["step"] == 3
    assert summary["best"] == metrics["best"]


@pytest.mark.slow  # about 15-30 s on 2 CPU cores
def test_run_ner_on_ram(ram):
    data = f"{ram}/conll"
    rows = "-DOCSTART- O\n\nthe O\nfilm B-MISC\nwas O\ngood O\n\nit O\nis O\nthe O\nplot B-MISC\n"
    for split in ("train", "valid", "test"):
        fileio.write_text(f"{data}/{split}.txt", rows)
    args = ner.NerArgs(
        data_dir=data,
        init_checkpoint=tiny_checkpoint(ram, f"{ram}/vocab.txt"),
        max_seq_length=8,
        train_batch_size=2,
        **quiet_epoch(f"{ram}/ner"),
    )
    run_family(ner, args)
    labels = fileio.read_json(f"{ram}/ner/labels.json")
    assert labels == {"task_type": "token_classification", "labels": ["O", "B-MISC", "I-MISC"]}
    assert fileio.read_json(f"{ram}/ner/config.json")["data_dir"] == data
    assert fileio.read_json(f"{ram}/ner/metrics.json")["family"] == "ner"


@pytest.mark.slow  # about 15-30 s on 2 CPU cores
def test_vocab_pretraining_data_pretraining_and_features_on_ram(ram, capsys):
    fileio.write_text(f"{ram}/corpus/a.txt", TEXT + "\n")
    run_recipe_main(
        "create_vocab",
        f"--input_file={ram}/corpus/*.txt",
        f"--vocab_file={ram}/learned/vocab.txt",
        "--vocab_size=60",
        "--min_count=1",
    )
    learned = fileio.read_text(f"{ram}/learned/vocab.txt").split("\n")
    assert learned[:5] == RESERVED
    record = fileio.read_json(f"{ram}/learned/vocab.txt.config.json")
    assert record["config"]["vocab_file"] == f"{ram}/learned/vocab.txt"
    assert record["vocab_size_written"] == len(learned) - 1

    run_recipe_main(
        "create_pretraining_data",
        f"--input_file={ram}/corpus/a.txt",
        f"--output_file={ram}/shards/train.tfrecord",
        "--num_shards=2",
        f"--vocab_file={ram}/vocab.txt",
        "--max_seq_length=16",
        "--max_predictions_per_seq=3",
        "--dupe_factor=2",
        "--num_workers=1",
        "--noprogress",
    )
    summary = fileio.read_json(f"{ram}/shards/train.tfrecord.summary.json")
    assert sorted(summary["summary"]["shards"]) == [
        "train.tfrecord-00000-of-00002",
        "train.tfrecord-00001-of-00002",
    ]
    assert fileio.listdir(f"{ram}/shards") == sorted(
        ["train.tfrecord.summary.json", *summary["summary"]["shards"]]
    )

    metrics = run_pretraining(
        PretrainConfig(
            input_file=f"{ram}/shards/train.tfrecord-*",
            vocab_file=f"{ram}/vocab.txt",
            output_dir=f"{ram}/pretrain",
            preset="bert_tiny",
            max_seq_length=16,
            max_predictions_per_seq=3,
            train_batch_size=2,
            num_train_steps=2,
            num_warmup_steps=1,
            save_checkpoints_steps=2,
        )
    )
    assert metrics["steps"] == 2 and metrics["encoder_dir"] == f"{ram}/pretrain/encoder"
    assert fileio.read_json(f"{ram}/pretrain/metrics.json")["steps"] == 2
    assert fileio.read_json(f"{ram}/pretrain/config.json")["flags"]["output_dir"] == (
        f"{ram}/pretrain"
    )
    assert len(fileio.read_jsonl(f"{ram}/pretrain/history.jsonl")) == 1
    assert fileio.listdir(f"{ram}/pretrain/encoder") == [
        "config.json",
        "encoder.weights.h5",
        "keras_bert_checkpoint.json",
        "vocab.txt",
    ]

    fileio.write_text(f"{ram}/sentences.txt", "a good film\nthe plot ||| was dull\n")
    run_recipe_main(
        "extract_features",
        f"--input_file={ram}/sentences.txt",
        f"--output_file={ram}/features/out.jsonl",
        f"--init_checkpoint={ram}/pretrain/encoder",
        "--layers=-1",
        "--max_seq_length=8",
    )
    lines = fileio.read_jsonl(f"{ram}/features/out.jsonl")
    assert [line["linex_index"] for line in lines] == [0, 1]
    assert [t["token"] for t in lines[0]["features"]] == [
        "[CLS]",
        "a",
        "good",
        "film",
        "[SEP]",
    ]
    assert f"wrote 2 examples to {ram}/features/out.jsonl" in capsys.readouterr().out


@pytest.mark.slow  # about 15-30 s on 2 CPU cores
def test_evaluate_on_ram(ram):
    """evaluate.py on a fine-tuning output_dir kept on ram:// (the task predictor, no export)."""
    _fine_tune_sst2(ram, SST2, f"{ram}/run")
    held_out = "text,label\n" + "".join(f"{t},{'positive' if y else 'negative'}\n" for t, y in SST2)
    fileio.write_text(f"{ram}/heldout.csv", held_out)
    run_recipe_main(
        "evaluate",
        f"--model={ram}/run",
        f"--data={ram}/heldout.csv",
        f"--output_dir={ram}/eval",
        "--noprogress",
    )
    assert {"metrics.json", "report.md", "report.html"} <= set(fileio.listdir(f"{ram}/eval"))
    metrics = fileio.read_json(f"{ram}/eval/metrics.json")
    assert metrics["data"]["file"] == f"{ram}/heldout.csv"
    assert metrics["model"]["name"] == "run"


@pytest.mark.parametrize(
    "flag, uri, cause",
    [
        ("output_dir", "gs://keras-bert-unreachable-bucket/run", ""),
        ("data_dir", "s3://keras-bert-unreachable/glue", "File system scheme 's3' not implemented"),
    ],
)
def test_unreachable_uri_fails_in_process_before_anything(tmp_path, monkeypatch, flag, uri, cause):
    monkeypatch.chdir(tmp_path)
    values = {"output_dir": str(tmp_path / "out"), "data_dir": str(tmp_path / "data"), flag: uri}
    with pytest.raises(fileio.UnreachablePathError) as e:
        check_paths_reachable(values)
    assert str(e.value).startswith(f"cannot reach --{flag} {uri}: {cause}")
    assert "\n" not in str(e.value) and os.listdir(tmp_path) == []


@pytest.mark.slow  # about 15-30 s on 2 CPU cores
def test_recipe_with_an_unreachable_output_dir_exits_2_with_one_line(tmp_path):
    uri = "gs://keras-bert-unreachable-bucket/run"
    proc = run_recipe(
        "run_classifier.py",
        "--task_name=sst2",
        f"--data_dir={tmp_path / 'data'}",
        "--preset=bert_tiny",
        f"--vocab_file={tmp_path / 'vocab.txt'}",
        f"--output_dir={uri}",
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"run_classifier.py: error: cannot reach --output_dir {uri}: ")
    assert os.listdir(tmp_path) == []
