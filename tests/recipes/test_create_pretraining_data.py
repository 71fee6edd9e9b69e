"""create_vocab.py and create_pretraining_data.py as command lines on a real WikiText-2 slice."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.recipes.beam_logs import beam_info_lines


def _run(*args):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO_ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def wiki_slice(tmp_path_factory, data_dir):
    """The first 8 articles of the WikiText-2 raw test split (its own format, titles included)."""
    lines = (
        (data_dir / "wikitext/wikitext-2-raw/wiki.test.raw")
        .read_text(encoding="utf-8")
        .splitlines()
    )
    titles = [
        i for i, line in enumerate(lines) if line.startswith(" = ") and not line.startswith(" = = ")
    ]
    path = tmp_path_factory.mktemp("wiki") / "slice.raw"
    path.write_text("\n".join(lines[: titles[8]]) + "\n", encoding="utf-8")
    # The same articles in two files, the later four first: another input order.
    (path.parent / "later.raw").write_text(
        "\n".join(lines[titles[4] : titles[8]]) + "\n", encoding="utf-8"
    )
    (path.parent / "earlier.raw").write_text("\n".join(lines[: titles[4]]) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_vocab_then_data_deterministic_across_workers(wiki_slice, tmp_path):
    from keras_bert.tokenization import FullTokenizer

    vocab = tmp_path / "vocab.txt"
    _run(
        "recipes.create_vocab",
        f"--input_file={wiki_slice}",
        "--input_format=wikitext",
        f"--vocab_file={vocab}",
        "--vocab_size=2000",
    )
    tokens = vocab.read_text(encoding="utf-8").splitlines()
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert 1500 < len(tokens) <= 2000 and len(set(tokens)) == len(tokens)
    tok = FullTokenizer(vocab, do_lower_case=True)
    assert tok.tokenize("The Bill") == ["the", "bill"]  # frequent words are whole pieces
    assert json.loads((tmp_path / "vocab.txt.config.json").read_text())[
        "vocab_size_written"
    ] == len(tokens)

    outputs = {}
    # Two Beam DirectRunner worker processes on the slice as one file; one worker, in this
    # process, on the same articles as two files in the other order.
    inputs = {
        2: f"{wiki_slice}",
        1: f"{wiki_slice.parent / 'later.raw'},{wiki_slice.parent / 'earlier.raw'}",
    }
    logs = {}
    for workers in (2, 1):  # progress logged by the 2 worker processes, not by the single run
        out = tmp_path / f"w{workers}" / "data.tfrecord"
        logs[workers] = _run(
            "recipes.create_pretraining_data",
            f"--input_file={inputs[workers]}",
            "--input_format=wikitext",
            f"--output_file={out}",
            "--num_shards=3",
            f"--vocab_file={vocab}",
            "--dupe_factor=3",
            "--do_whole_word_mask",
            f"--num_workers={workers}",
            "--random_seed=9",
            "--progress" if workers == 2 else "--noprogress",
        ).stderr
        files = sorted(out.parent.iterdir())
        assert sorted(f.name for f in files) == sorted(
            [f"data.tfrecord-0000{i}-of-00003" for i in range(3)] + ["data.tfrecord.summary.json"]
        )
        outputs[workers] = {f.name: f.read_bytes() for f in files}
    reports = [json.loads(outputs[w].pop("data.tfrecord.summary.json")) for w in (1, 2)]
    # byte-identical records for a seed, whatever the parallelism and the input order
    assert outputs[1] == outputs[2]
    assert reports[0]["summary"] == reports[1]["summary"]
    report = reports[0]
    s = report["summary"]
    import tensorflow as tf

    records = {
        name: sum(1 for _ in tf.data.TFRecordDataset(str(tmp_path / "w1" / name)))
        for name in s["shards"]
    }
    assert records == s["shards"] and all(n > 0 for n in records.values())
    assert s["documents"] == 8
    # Beam's own logs stay at warnings, here and in the worker processes; the workers' loggers
    # of this project take the recipe's levels (--progress: INFO; --noprogress: WARNING)
    assert beam_info_lines(logs[2]) == [] and beam_info_lines(logs[1]) == []
    progress = [line for line in logs[2].splitlines() if "pretraining data: group" in line]
    assert progress == [
        "INFO:keras_bert.data.pretraining_beam:pretraining data: group 0 made "
        f"{s['instances']} instances"
    ]
    assert "pretraining data:" not in logs[1]
    assert report["config"]["do_whole_word_mask"] is True and report["config"]["seed"] == 9
    assert s["instances"] == sum(s["shards"].values()) > 300
    assert abs(s["masked_fraction"] - 0.15) < 0.01  # whole words may undershoot a little
    assert abs(s["mask_split"]["mask"] - 0.8) < 0.03
    assert abs(s["nsp_positive_rate"] - 0.5) < 0.06
