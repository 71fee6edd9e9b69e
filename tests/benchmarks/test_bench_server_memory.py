"""benchmarks/bench_server_memory.py at a CI size: a tiny classifier exported with model.tflite,
served as a SavedModel (one model, then a second added) and from LiteRT, and 3 version swaps.
The readings' layout and the report are checked, never their size (SPEC section 10)."""

import pathlib

from benchmarks import bench_server_memory as bench


def test_small_run_reads_every_case(tmp_path, uncased_vocab):
    from tests.export.conftest import tiny_classifier

    task = tiny_classifier(2, ["neg", "pos"], "sst2", seed=0, vocab_file=uncased_vocab)
    model_dir = pathlib.Path(task.export(str(tmp_path / "export"), "tiny", litert="float32"))
    assert bench.call_shape(model_dir) == (1, 16)  # the export's max_seq_length is below 32
    result = bench.run_benchmark(model_dir, tmp_path / "run", calls=2, cycles=3)
    for case in ("saved_model", "second_model", "litert"):
        rss, peak = result[case]
        assert 0 < rss <= peak, case
    # The LiteRT server never loads TensorFlow's runtime; the SavedModel one needs it.
    assert result["tensorflow_loaded"] == {"saved_model": True, "litert": False}
    assert [cycle for cycle, _ in result["swaps"]] == [0, 1, 3]
    assert result["swap_growth_mib"] == result["swaps"][-1][1] - result["swaps"][0][1]
    text = bench.report(result, 3)
    assert "| LiteRT (--prefer_tflite_model), one model |" in text
    assert "Growth over 3 version swaps: " in text
