"""run_pretraining.py end to end on a WikiText-2 slice: the MLM loss falls; a SIGKILLed run resumes."""

import glob
import json
import os
import pathlib
import runpy
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from absl import flags

from keras_bert.training import arg_flags
from keras_bert.training.pretraining import PretrainConfig, run_pretraining
from tests.conftest import REPO_ROOT
from tests.recipes.recipe_process import run_recipe_main, usage_error

SEQ, PRED = 64, 10


def write_shards(directory, data_dir, uncased_vocab) -> str:
    """Two pretraining shards in `directory` from the first 10 WikiText-2 test documents
    (sequences of `SEQ` pieces, `PRED` predictions, two duplicates); their glob."""
    from keras_bert.data import pretraining_data as pd
    from keras_bert.tokenization import FullTokenizer

    tok = FullTokenizer(uncased_vocab)
    raw = pd.read_raw_documents(
        str(data_dir / "wikitext/wikitext-2-raw/wiki.test.raw"), "wikitext"
    )[:10]
    docs = [[tok.tokenize(s) for s in d] for d in raw]
    instances = pd.create_training_instances(
        docs, list(tok.vocab), SEQ, dupe_factor=2, max_predictions_per_seq=PRED, random_seed=1
    )
    out = directory / "wiki.tfrecord"
    pd.write_instances(instances, tok.vocab, pd.shard_paths(str(out), 2), SEQ, PRED)
    return f"{out}-*"


@pytest.fixture(scope="module")
def shards(tmp_path_factory, data_dir, uncased_vocab):
    return write_shards(tmp_path_factory.mktemp("shards"), data_dir, uncased_vocab)


def _cmd(shards, vocab, out, steps, *extra):
    return [
        sys.executable,
        "-m",
        "recipes.run_pretraining",
        f"--input_file={shards}",
        f"--vocab_file={vocab}",
        f"--output_dir={out}",
        "--preset=bert_tiny",
        f"--max_seq_length={SEQ}",
        f"--max_predictions_per_seq={PRED}",
        "--train_batch_size=16",
        f"--num_train_steps={steps}",
        "--num_warmup_steps=5",
        "--learning_rate=1e-3",
        *extra,
    ]


def _env():
    return dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="2")


@pytest.mark.slow
def test_fifty_steps_lower_the_mlm_loss_and_save_a_loadable_encoder(
    shards, uncased_vocab, tmp_path
):
    out = tmp_path / "run"
    subprocess.run(
        _cmd(shards, uncased_vocab, out, 50, "--save_checkpoints_steps=10"),
        cwd=REPO_ROOT,
        env=_env(),
        check=True,
        capture_output=True,
        timeout=600,
    )
    metrics = json.loads((out / "metrics.json").read_text())
    history = metrics["history"]
    assert [h["step"] for h in history] == [10, 20, 30, 40, 50] and metrics["steps"] == 50
    # Mean MLM loss over steps 1-10 starts near ln(30522) = 10.3; over steps 41-50 it is lower.
    assert history[0]["mlm_loss"] > 9.0
    assert history[-1]["mlm_loss"] < history[0]["mlm_loss"] - 1.0
    assert {"mlm_accuracy", "nsp_loss", "nsp_accuracy"} <= set(history[-1])
    config = json.loads((out / "config.json").read_text())
    assert config["bert_config"]["num_layers"] == 2 and config["bert_config"]["vocab_size"] == 30522
    assert list((out / "logs").rglob("events.out.tfevents.*"))

    import keras_bert

    encoder = keras_bert.from_pretrained(
        str(out / "encoder")
    )  # what run_classifier --init_checkpoint does
    assert encoder.bert_config.hidden_size == 128 and not encoder.causal
    assert (out / "encoder" / "vocab.txt").read_bytes() == uncased_vocab.read_bytes()
    first = np.asarray(encoder.embeddings.word_embeddings.embeddings)
    from keras_bert.models import BertEncoder

    fresh = BertEncoder.from_config_object(encoder.bert_config)
    fresh.build()
    assert not np.allclose(first, np.asarray(fresh.embeddings.word_embeddings.embeddings))


@pytest.mark.slow
def test_sigkilled_ltr_run_resumes_from_its_checkpoint(shards, uncased_vocab, tmp_path):
    out = tmp_path / "run"
    cmd = _cmd(shards, uncased_vocab, out, 40, "--save_checkpoints_steps=5", "--ltr")
    proc = subprocess.Popen(
        cmd, cwd=REPO_ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    state = out / "checkpoints" / "checkpoint.json"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if state.exists() and json.loads(state.read_text())["step"] >= 10:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = json.loads(state.read_text())["step"]
    assert 10 <= killed_at < 40 and not (out / "metrics.json").exists()
    subprocess.run(cmd, cwd=REPO_ROOT, env=_env(), check=True, capture_output=True, timeout=600)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["resumed_from_step"] == killed_at and metrics["steps"] == 40
    steps = [h["step"] for h in metrics["history"]]
    assert steps[-1] == 40 and steps == sorted(set(steps))
    assert "nsp_loss" not in metrics["final"]  # --ltr trains without NSP
    meta = json.loads((out / "encoder" / "keras_bert_checkpoint.json").read_text())
    assert meta["causal"] is True


@pytest.mark.slow
def test_a_rerun_with_another_batch_size_is_refused_and_a_resume_counts_the_recorded_batches(
    shards, uncased_vocab, tmp_path
):
    out = tmp_path / "run"

    def cmd(batch):
        return [
            a if not a.startswith("--train_batch_size=") else f"--train_batch_size={batch}"
            for a in _cmd(shards, uncased_vocab, out, 6, "--save_checkpoints_steps=2")
        ]

    killed = subprocess.run(
        cmd(8),
        cwd=REPO_ROOT,
        env=_env() | {"KERAS_BERT_CRASH_AT": "train_batch:3"},
        capture_output=True,
        timeout=600,
    )
    assert killed.returncode == -signal.SIGKILL
    state = out / "checkpoints" / "checkpoint.json"
    recorded, checkpoint = (out / "config.json").read_bytes(), state.read_bytes()
    assert json.loads(checkpoint)["step"] == 2

    refused = subprocess.run(
        cmd(4), cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=600
    )
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[-1] == (
        f"run_pretraining.py: error: output_dir {out} holds a run with different settings (recorded -> "
        "this run): train_batch_size 8 -> 4; use a new --output_dir, or rerun with the recorded values"
    )
    assert (out / "config.json").read_bytes() == recorded and state.read_bytes() == checkpoint
    assert not (out / "metrics.json").exists()

    subprocess.run(cmd(8), cwd=REPO_ROOT, env=_env(), check=True, capture_output=True, timeout=600)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["resumed_from_step"] == 2 and metrics["steps"] == 6
    assert metrics["examples_seen"] == 48  # 6 steps of the recorded 8 examples
    assert [h["step"] for h in metrics["history"]] == [2, 4, 6]
    assert json.loads((out / "config.json").read_text())["flags"]["train_batch_size"] == 8


@pytest.fixture(scope="module")
def made_records(tmp_path_factory, data_dir, uncased_vocab) -> str:
    """create_pretraining_data's records of the first two WikiText-2 test articles, made with
    --max_seq_length=32 --max_predictions_per_seq=5 (two shards and their .summary.json); their
    glob."""
    directory = tmp_path_factory.mktemp("made")
    lines = (data_dir / "wikitext/wikitext-2-raw/wiki.test.raw").read_text().splitlines()
    titles = [i for i, line in enumerate(lines) if line.startswith(" = ") and line[3] != "="]
    (directory / "corpus.raw").write_text("\n".join(lines[: titles[2]]) + "\n")
    run_recipe_main(
        "create_pretraining_data",
        f"--input_file={directory / 'corpus.raw'}",
        "--input_format=wikitext",
        f"--output_file={directory / 'wiki.tfrecord'}",
        "--num_shards=2",
        f"--vocab_file={uncased_vocab}",
        "--max_seq_length=32",
        "--max_predictions_per_seq=5",
        "--dupe_factor=1",
        "--num_workers=1",
        "--noprogress",
    )
    assert (directory / "wiki.tfrecord.summary.json").exists()
    return f"{directory / 'wiki.tfrecord'}-*"


def _pretraining_main(argv):
    """recipes/run_pretraining.py's main on `argv` (its own FlagValues)."""
    main_of = runpy.run_path(str(REPO_ROOT / "recipes" / "run_pretraining.py"), run_name="rp")[
        "main_of"
    ]
    fv = flags.FlagValues()
    arg_flags.define_flags(PretrainConfig, flag_values=fv)
    fv(["run_pretraining.py", *argv])
    return lambda: main_of(fv)(["run_pretraining.py"])


def test_records_made_with_other_lengths_are_refused_before_anything_is_written(
    made_records, uncased_vocab, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "run"
    settings = dict(input_file=made_records, vocab_file=str(uncased_vocab), output_dir=str(out))
    with pytest.raises(ValueError) as e:  # both flags at their defaults, 128 and 20
        run_pretraining(PretrainConfig(**settings))
    assert str(e.value) == (
        f"--max_seq_length=128 and --max_predictions_per_seq=20 but the records in "
        f"{made_records} were made with max_seq_length=32 and max_predictions_per_seq=5 (their "
        ".summary.json); pass --max_seq_length=32 --max_predictions_per_seq=5"
    )
    with pytest.raises(ValueError) as e:
        run_pretraining(PretrainConfig(**settings, max_seq_length=32))
    assert str(e.value) == (
        f"--max_predictions_per_seq=20 but the records in {made_records} were made with "
        "max_predictions_per_seq=5 (their .summary.json); pass --max_predictions_per_seq=5"
    )
    assert not out.exists()
    main = _pretraining_main([f"--{k}={v}" for k, v in settings.items()] + ["--max_seq_length=64"])
    assert usage_error(capsys, monkeypatch, "run_pretraining.py", main) == (
        f"run_pretraining.py: error: --max_seq_length=64 and --max_predictions_per_seq=20 but "
        f"the records in {made_records} were made with max_seq_length=32 and "
        "max_predictions_per_seq=5 (their .summary.json); pass --max_seq_length=32 "
        "--max_predictions_per_seq=5\n"
    )
    assert not out.exists()  # a rerun with the records' values is not refused by the rerun check


def test_records_without_a_summary_are_checked_by_one_record(shards, uncased_vocab, tmp_path):
    out = tmp_path / "run"
    config = PretrainConfig(
        input_file=shards,
        vocab_file=str(uncased_vocab),
        output_dir=str(out),
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED + 1,
    )
    first = sorted(glob.glob(shards))[0]
    with pytest.raises(ValueError) as e:
        run_pretraining(config)
    assert str(e.value) == (
        f"--max_predictions_per_seq={PRED + 1} but the records in {shards} were made with "
        f"max_predictions_per_seq={PRED} (a record of {first}); pass "
        f"--max_predictions_per_seq={PRED}"
    )
    assert not out.exists()


def test_shards_made_with_different_lengths_are_refused(shards, uncased_vocab, tmp_path):
    copies = []
    for path in sorted(glob.glob(shards)):
        copies.append(tmp_path / os.path.basename(path))
        copies[-1].write_bytes(pathlib.Path(path).read_bytes())
    summary = {  # the second shard's own summary says other lengths
        "config": {"max_seq_length": 32, "max_predictions_per_seq": 5},
        "summary": {"shards": {copies[1].name: 1}},
    }
    pathlib.Path(f"{copies[1]}.summary.json").write_text(json.dumps(summary))
    pattern = str(tmp_path / "wiki.tfrecord-*")
    config = PretrainConfig(
        input_file=pattern,
        vocab_file=str(uncased_vocab),
        output_dir=str(tmp_path / "run"),
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED,
    )
    with pytest.raises(ValueError) as e:
        run_pretraining(config)
    assert str(e.value) == (
        f"the records in {pattern} were made with different settings: max_seq_length={SEQ} "
        f"and max_predictions_per_seq={PRED} (a record of {copies[0]}); max_seq_length=32 and "
        "max_predictions_per_seq=5 (their .summary.json); pass shards made alike"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_run_with_the_records_lengths_trains_on_them(made_records, uncased_vocab, tmp_path):
    out = tmp_path / "run"
    main = _pretraining_main(
        [
            f"--input_file={made_records}",
            f"--vocab_file={uncased_vocab}",
            f"--output_dir={out}",
            "--max_seq_length=32",
            "--max_predictions_per_seq=5",
            "--train_batch_size=2",
            "--num_train_steps=2",
            "--num_warmup_steps=1",
            "--save_checkpoints_steps=2",
        ]
    )
    main()
    metrics = json.loads((out / "metrics.json").read_text())
    summary = json.loads(pathlib.Path(made_records[: -len("-*")] + ".summary.json").read_text())
    assert (metrics["steps"], metrics["records"]) == (2, summary["summary"]["instances"])
    assert json.loads((out / "config.json").read_text())["flags"]["max_seq_length"] == 32


@pytest.mark.slow
def test_accumulated_pretraining_counts_optimizer_steps(made_records, uncased_vocab, tmp_path):
    """--gradient_accumulation_steps=2: --num_train_steps=4 optimizer steps are 8 batches, the
    history has a line every --save_checkpoints_steps=2 steps, the optimizer made 4 updates and
    examples_seen counts every batch."""
    out = tmp_path / "run"
    main = _pretraining_main(
        [
            f"--input_file={made_records}",
            f"--vocab_file={uncased_vocab}",
            f"--output_dir={out}",
            "--max_seq_length=32",
            "--max_predictions_per_seq=5",
            "--train_batch_size=2",
            "--gradient_accumulation_steps=2",
            "--num_train_steps=4",
            "--num_warmup_steps=1",
            "--save_checkpoints_steps=2",
        ]
    )
    main()
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["steps"], metrics["examples_seen"]) == (4, 16)
    assert [h["step"] for h in metrics["history"]] == [2, 4]
    state = json.loads((out / "checkpoints" / "checkpoint.json").read_text())
    assert state["step"] == 8  # batches: the data position
    config = json.loads((out / "config.json").read_text())
    assert config["flags"]["gradient_accumulation_steps"] == 2
