"""The OpenVINO peer (benchmarks/peers/openvino_peer.py) and its rows in bench_litert: the skip where the
peer interpreter lacks openvino (the CI case), the checks and table logic with exact values, and,
only where the peer interpreter has openvino, a real conversion of a tiny export."""

import sys

import numpy as np
import pytest
from absl import flags
from absl.testing import flagsaver

from benchmarks import bench_litert, common
from benchmarks.peers import openvino_peer

SKIP_MESSAGE = (
    "OpenVINO peer skipped: ImportError: no openvino in this interpreter (optional, in the "
    "interpreter of $KERAS_BERT_PEER_PYTHON: pip install openvino nncf tensorflow torch "
    "transformers onnx)\n"
)


@pytest.fixture(scope="module", autouse=True)
def litert_flags():
    """bench_litert's flags, defined for this module's tests and removed after them: other test
    files in the same worker process parse the global flags (recipes run in process)."""
    before = set(flags.FLAGS)
    bench_litert.define_flags()
    yield
    for name in set(flags.FLAGS) - before:
        delattr(flags.FLAGS, name)


@pytest.fixture
def python_without_openvino(tmp_path, monkeypatch):
    """This interpreter, with an `openvino` package that refuses to import first on its path."""
    package = tmp_path / "shadow" / "openvino"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('raise ImportError("no openvino in this interpreter")\n')
    monkeypatch.setenv("PYTHONPATH", str(package.parent))
    monkeypatch.setenv("KERAS_BERT_PEER_PYTHON", sys.executable)
    return sys.executable


def test_the_harness_skips_with_its_message_where_the_peer_python_lacks_openvino(
    python_without_openvino, capsys
):
    assert common.peer_or_none("OpenVINO", python_without_openvino) is None
    assert capsys.readouterr().out == SKIP_MESSAGE


def test_bench_litert_starts_no_peer_without_openvino_and_says_why(
    python_without_openvino, tmp_path, capsys
):
    with flagsaver.as_parsed(model_dir=".", openvino="true"):
        assert bench_litert.start_openvino(tmp_path / "export", tmp_path) is None
    assert capsys.readouterr().out == SKIP_MESSAGE
    with flagsaver.as_parsed(model_dir=".", openvino="false"):
        assert bench_litert.start_openvino(tmp_path / "export", tmp_path) is None
    assert capsys.readouterr().out == ""  # not asked for: no check, no message
    assert list(tmp_path.iterdir()) == [tmp_path / "shadow"]  # no calibration file written


@pytest.mark.parametrize(
    "name, value, error",
    [
        ("openvino_threads", "-1", "flag --openvino_threads=-1: -1 is not a non-negative integer"),
        (
            "openvino_calibration_sentences",
            "0",
            "flag --openvino_calibration_sentences=0: 0 is not a positive integer",
        ),
    ],
)
def test_the_openvino_flags_refuse_what_they_cannot_mean(name, value, error):
    with pytest.raises(flags.IllegalFlagValueError) as caught:
        with flagsaver.as_parsed(model_dir=".", **{name: value}):
            pass
    assert str(caught.value) == error


@pytest.mark.parametrize(
    "msg, error",
    [
        ({"cmd": "train", "source": "ours", "quant": "int8"}, "unknown command 'train'"),
        (
            {"cmd": "encoder", "source": "torch", "quant": "int8"},
            "source must be one of ('ours', 'hf'), got 'torch'",
        ),
        (
            {"cmd": "predict", "source": "hf", "quant": "int4"},
            "quant must be one of ('float32', 'int8'), got 'int4'",
        ),
        ({"cmd": "encoder", "quant": "int8"}, "source must be one of ('ours', 'hf'), got None"),
    ],
)
def test_the_peer_refuses_unknown_jobs(msg, error):
    with pytest.raises(ValueError) as caught:
        openvino_peer.check_job(msg)
    assert str(caught.value) == error


def test_a_known_job_passes_the_check():
    assert openvino_peer.check_job({"cmd": "predict", "source": "hf", "quant": "float32"}) is None


def test_calibration_items_are_single_sentences_at_their_own_length():
    features = {
        "input_word_ids": np.array([[101, 7, 102, 0], [101, 8, 9, 102]], np.int32),
        "input_mask": np.array([[1, 1, 1, 0], [1, 1, 1, 1]], np.int32),
        "input_type_ids": np.zeros((2, 4), np.int32),
    }
    ours = openvino_peer.calibration_items(features, "ours")
    assert [sorted(item) for item in ours] == [sorted(features)] * 2
    assert ours[0]["input_word_ids"].tolist() == [[101, 7, 102]]
    assert ours[1]["input_word_ids"].tolist() == [[101, 8, 9, 102]]
    assert ours[0]["input_word_ids"].dtype == np.int32
    hf = openvino_peer.calibration_items(features, "hf")
    assert list(hf[0]) == ["input_ids", "attention_mask", "token_type_ids"]
    assert hf[0]["input_ids"].tolist() == [[101, 7, 102]]
    assert hf[0]["attention_mask"].tolist() == [[1, 1, 1]]
    assert hf[1]["token_type_ids"].tolist() == [[0, 0, 0, 0]]
    assert {v.dtype for item in hf for v in item.values()} == {np.dtype(np.int64)}


NAMES = [
    "SavedModel (TF)",
    "LiteRT int8",
    "onnxruntime float32",
    "onnxruntime int8",
    "OpenVINO float32 (our SavedModel)",
    "OpenVINO int8 (our SavedModel)",
    "OpenVINO float32 (HF ONNX)",
    "OpenVINO int8 (HF ONNX)",
]
P50 = dict(zip(NAMES, [10.0, 2.0, 5.0, 4.0, 8.0, 3.0, 4.0, 2.5]))
P99 = dict(zip(NAMES, [20.0, 3.0, 6.0, 5.0, 9.0, 4.0, 5.0, 3.5]))
SEQS = dict(zip(NAMES, [50.0, 120.0, 60.0, 100.0, 40.0, 240.0, 80.0, 200.0]))


def test_table_rows_take_each_ratio_against_the_faster_openvino_row_of_the_same_precision():
    peers, rows = bench_litert.table_rows(NAMES, P50, P99, SEQS)
    assert peers == ["ONNX Runtime", "best OpenVINO"]
    # p50 speed: peer p50 / own; throughput: own / peer; OpenVINO float32 best p50 4.0 (HF) and
    # best seq/s 80.0 (HF); int8 best p50 2.5 (HF) and best seq/s 240.0 (ours).
    assert rows == [
        ("SavedModel (TF)", 10.0, 20.0, "0.50x", "0.40x", 50.0, "0.83x", "0.62x"),
        ("LiteRT int8", 2.0, 3.0, "2.00x", "1.25x", 120.0, "1.20x", "0.50x"),
        ("onnxruntime float32", 5.0, 6.0, "1.00x", "0.80x", 60.0, "1.00x", "0.75x"),
        ("onnxruntime int8", 4.0, 5.0, "1.00x", "0.62x", 100.0, "1.00x", "0.42x"),
        ("OpenVINO float32 (our SavedModel)", 8.0, 9.0, "0.62x", "0.50x", 40.0, "0.67x", "0.50x"),
        ("OpenVINO int8 (our SavedModel)", 3.0, 4.0, "1.33x", "0.83x", 240.0, "2.40x", "1.00x"),
        ("OpenVINO float32 (HF ONNX)", 4.0, 5.0, "1.25x", "1.00x", 80.0, "1.33x", "1.00x"),
        ("OpenVINO int8 (HF ONNX)", 2.5, 3.5, "1.60x", "1.00x", 200.0, "2.00x", "0.83x"),
    ]


def test_table_rows_without_openvino_keep_the_onnx_runtime_columns_only():
    names = NAMES[:4]
    peers, rows = bench_litert.table_rows(names, P50, P99, SEQS)
    assert peers == ["ONNX Runtime"]
    assert rows[0] == ("SavedModel (TF)", 10.0, 20.0, "0.50x", 50.0, "0.83x")
    assert rows[1] == ("LiteRT int8", 2.0, 3.0, "2.00x", 120.0, "1.20x")


def test_table_rows_without_onnx_runtime_say_n_a():
    names = ["LiteRT int8", "OpenVINO int8 (HF ONNX)"]
    _, rows = bench_litert.table_rows(names, P50, P99, SEQS)
    assert rows[0] == ("LiteRT int8", 2.0, 3.0, "n/a", "1.25x", 120.0, "n/a", "0.60x")


def test_served_overhead_pairs_each_served_row_with_its_in_process_twin():
    p50 = {
        "LiteRT float32": 3.70,
        "LiteRT int8": 1.37,
        "gRPC LiteRT float32": 4.75,
        "gRPC LiteRT int8": 2.27,
        "gRPC SavedModel": 9.3,  # its in-process twin did not run (--nosaved_model): no pair
    }
    assert bench_litert.served_overhead_notes(p50) == [
        "Served overhead at batch 1 (served p50 minus in-process p50): "
        "LiteRT float32 1.05 ms, LiteRT int8 0.90 ms."
    ]
    assert bench_litert.served_overhead_notes({"LiteRT float32": 3.7}) == []


def test_token_cosines_count_real_tokens_only():
    a = np.array([[[1.0, 0.0], [1.0, 1.0], [5.0, 5.0]]])
    b = np.array([[[1.0, 0.0], [1.0, -1.0], [-5.0, -5.0]]])
    cos = bench_litert.token_cosines(a, b, np.array([[1, 1, 0]]))
    assert cos.tolist() == [1.0, 0.0]


def test_agreement_notes_name_every_runtime_and_the_encoder_cosine():
    agree = {
        "examples": 872,
        "accuracy": {"SavedModel": 0.8, "OpenVINO int8": 0.75},
        "same_prediction": {"OpenVINO int8": 0.9},
        "max_prob_diff": {"OpenVINO float32": 1e-6, "OpenVINO int8": 0.125},
        "openvino_hf_int8_cosine": (0.99, 0.5, 1000),
    }
    assert bench_litert.agreement_notes(agree) == [
        "SST-2 dev (872 sentences): accuracy SavedModel 80.00%, OpenVINO int8 75.00%; int8 "
        "predictions equal to the same runtime's float32: OpenVINO int8 90.00%; largest "
        "probability difference against the SavedModel: OpenVINO float32 1.00e-06, OpenVINO "
        "int8 1.25e-01.",
        "OpenVINO int8 (HF ONNX) against its float32, last_hidden_state on the first 64 dev "
        "sentences (1000 real tokens): cosine mean 0.9900, minimum 0.5000.",
    ]


def test_a_tiny_export_converts_and_matches_the_saved_model(tmp_path, uncased_vocab):
    """Real conversion, float32 and NNCF int8, where the peer interpreter
    ($KERAS_BERT_PEER_PYTHON, default this one) has openvino and what the peer needs."""
    if common.peer_or_none("OpenVINO") is None:
        pytest.skip(
            "the peer interpreter lacks openvino, nncf, tensorflow, torch, transformers or "
            "onnx (optional; set KERAS_BERT_PEER_PYTHON to one that has them)"
        )
    import tensorflow as tf

    from tests.export.conftest import TEXTS, tiny_classifier

    task = tiny_classifier(2, ["negative", "positive"], "sst2", 0, uncased_vocab, for_export=True)
    export_dir = task.export(tmp_path / "base", "tiny", version=1)
    ids = common.featurize(TEXTS * 3, 16)
    np.savez(tmp_path / "calibration.npz", **ids)
    np.savez(tmp_path / "ids.npz", **ids)
    expected = tf.saved_model.load(str(export_dir)).signatures["encoded"](
        **{k: tf.constant(v) for k, v in ids.items()}
    )["probabilities"]
    peer = common.peer("OpenVINO", export_dir, tmp_path / "calibration.npz")
    try:
        outputs = {}
        for quant in ("float32", "int8"):
            out = tmp_path / f"{quant}.npz"
            peer.add(
                "predict",
                source="ours",
                quant=quant,
                threads=1,
                ids=str(tmp_path / "ids.npz"),
                out=str(out),
            )
            outputs[quant] = np.load(out)["output"]
            run = peer.add("encoder", source="ours", quant=quant, batch=2, seq=16, threads=1)
            assert run() > 0
    finally:
        peer.close()
    np.testing.assert_allclose(outputs["float32"], expected.numpy(), atol=1e-5)
    assert outputs["int8"].shape == expected.shape
    np.testing.assert_allclose(outputs["int8"].sum(-1), 1.0, atol=1e-5)
