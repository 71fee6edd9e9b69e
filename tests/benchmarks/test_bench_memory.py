"""benchmarks/bench_memory.py: the runs' measurement and command lines (a run of any of those
contenders imports TensorFlow, 15 s or more on a 2-core machine, too long for CI: they are run by
hand, the script's docstring), and the server's cases at a CI size: a tiny classifier exported
with model.tflite, served as a SavedModel (one model, then a second added) and from LiteRT, and 3
version swaps. The readings' layout and the report are checked, never their size (SPEC section
10)."""

import pathlib
import sys

from benchmarks import bench_memory as bench


def test_peak_rss_is_the_child_processes_own_high_water_mark(tmp_path):
    grab = "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096])"
    big, _, code = bench.peak_rss([sys.executable, "-c", grab], str(tmp_path / "big.log"))
    small, _, _ = bench.peak_rss([sys.executable, "-c", "pass"], str(tmp_path / "small.log"))
    assert code == 0
    assert big >= 300 * 2**20 > small  # the first child's peak is not carried into the second


def test_a_large_parent_does_not_raise_the_childs_peak(tmp_path):
    # The kernel seeds a spawned child's ru_maxrss with its parent's resident size; the launcher
    # keeps this process's size out of the figure.
    ballast = bytearray(400 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])
    small, _, code = bench.peak_rss([sys.executable, "-c", "pass"], str(tmp_path / "small.log"))
    assert code == 0 and small < 200 * 2**20
    del ballast


def test_a_failing_contender_reports_its_exit_status(tmp_path):
    _, _, code = bench.peak_rss([sys.executable, "-c", "raise SystemExit(3)"], str(tmp_path / "x"))
    assert code == 3


def test_the_exports_read_the_classifier_run_and_write_apart(tmp_path):
    table = bench.commands(str(tmp_path), "data", squad_questions=200, sst2_examples=160)
    assert tuple(table) == bench.KEYS
    sst2_dir = [a for a in table["sst2"][1] if a.startswith("--output_dir=")][0].split("=", 1)[1]
    bases = set()
    for key in ("savedmodel", "litert", "litert_int8"):
        argv = table[key][1]
        assert f"--model_dir={sst2_dir}" in argv
        bases.add(next(a for a in argv if a.startswith("--export_dir=")))
    assert len(bases) == 3
    assert (
        "--export_tflite" in table["litert"][1]
        and "--export_quantize=int8" in table["litert_int8"][1]
    )
    assert "--max_train_examples=200" in table["squad"][1]
    # data in an object store: its URI as given (pathlib made gs://d gs:/d)
    on_gcs = bench.commands(str(tmp_path), "gs://bucket/data", 200, 160)
    assert "--data_dir=gs://bucket/data/glue" in on_gcs["sst2"][1]
    assert "--data_dir=gs://bucket/data/glue/sst2" in on_gcs["hf_sst2"][1]


def test_the_fine_tuning_contenders_share_their_settings(tmp_path):
    """Ours, keras-hub and the Hugging Face Trainer: the same SST-2 sentences, batch 32 x 128,
    one epoch; each in float32 and in its bfloat16 mode; each run apart."""
    table = bench.commands(str(tmp_path), "data", squad_questions=200, sst2_examples=160)
    ours, ours_bf16 = table["sst2"][1], table["sst2_bf16"][1]
    assert ours_bf16[:-1] == ours[:-1] + ["--mixed_precision=mixed_bfloat16"]
    for argv in (ours, table["hf_sst2"][1]):
        for flag in ("--max_seq_length=128", "--max_train_examples=160", "--num_train_epochs=1"):
            assert flag in argv
    assert "--train_batch_size=32" in ours
    hf, hf_bf16 = table["hf_sst2"][1], table["hf_sst2_bf16"][1]
    assert "--per_device_train_batch_size=32" in hf and "--data_dir=data/glue/sst2" in hf
    assert hf_bf16[:-2] == hf[:-1] and hf_bf16[-2] == "--bf16"
    assert table["keras_hub_sst2"][1][-2:] == ["160", "float32"]
    assert table["keras_hub_sst2_bf16"][1][-2:] == ["160", "mixed_bfloat16"]
    assert "batch_size=32" in bench.KERAS_HUB_FIT and "featurize(texts, 128)" in bench.KERAS_HUB_FIT
    outputs = [a for _, argv in table.values() for a in argv if a.startswith("--output_dir=")]
    assert len(outputs) == len(set(outputs)) == 5  # squad, ours x 2, Hugging Face x 2


def test_small_server_run_reads_every_case(tmp_path, uncased_vocab):
    from tests.export.conftest import tiny_classifier

    task = tiny_classifier(2, ["neg", "pos"], "sst2", seed=0, vocab_file=uncased_vocab)
    model_dir = pathlib.Path(task.export(str(tmp_path / "export"), "tiny", litert="float32"))
    assert bench.call_shape(model_dir) == (1, 16)  # the export's max_seq_length is below 32
    result = bench.server_memory(model_dir, tmp_path / "run", calls=2, cycles=3)
    for case in ("saved_model", "second_model", "litert"):
        rss, peak = result[case]
        assert 0 < rss <= peak, case
    # The LiteRT server never loads TensorFlow's runtime; the SavedModel one needs it.
    assert result["tensorflow_loaded"] == {"saved_model": True, "litert": False}
    assert [cycle for cycle, _ in result["swaps"]] == [0, 1, 3]
    assert result["swap_growth_mib"] == result["swaps"][-1][1] - result["swaps"][0][1]
    text = bench.server_report(result, 3, 2, "tiny export", bench.call_shape(model_dir))
    assert "| LiteRT (--prefer_tflite_model), one model |" in text
    assert "Growth over 3 version swaps: " in text
    assert text.endswith(
        " MiB per swap.\n\ntiny export, 2 calls of 1 x 16 on `encoded` before each reading; "
        "each case a fresh server.\n"
    )
