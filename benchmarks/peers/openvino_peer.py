"""The OpenVINO peer: OpenVINO's CPU plugin running float32 and NNCF-int8 models of our exported
SavedModel ("ours": its `encoded` signature) and of Hugging Face's BertModel of the same checkpoint
("hf": ort_peer.py's model.onnx), in its own process; bench_litert times it against ours.
Conversion, quantization and the load commands: README.md here. Needs openvino, nncf, tensorflow,
torch, transformers and onnx in `$KERAS_BERT_PEER_PYTHON`:

    python -m benchmarks.peers.openvino_peer HF_MODEL_DIR EXPORT_DIR CALIBRATION_NPZ
"""

import functools
import pathlib
import sys
import tempfile
import time

from benchmarks import common, peers
from benchmarks.peers import ort_peer

SOURCES = ("ours", "hf")
PREDICT_CHUNK = 64


def check_job(msg: dict) -> None:
    """Raises ValueError unless msg names a known command, source and quantization."""
    peers.check_command(msg, ("encoder", "predict"), source=SOURCES, quant=ort_peer.QUANTS)


def feeds_for(features: dict, source: str) -> dict:
    """Our int32 features as the inputs of `source`'s model."""
    return ort_peer.onnx_feeds(features) if source == "hf" else features


def calibration_items(features: dict, source: str) -> list[dict]:
    """One feed dict per row of `features` (our int32 [N, T] arrays), cut to the row's real
    length (its `input_mask` sum), batch 1, under the input names of `source`'s model."""
    return [
        feeds_for({k: v[i : i + 1, : int(length)] for k, v in features.items()}, source)
        for i, length in enumerate(features["input_mask"].sum(axis=1))
    ]


def bitcast_as_identity(node):
    """OpenVINO conversion of a TensorFlow Bitcast between types of the same width: its input
    (README.md here says why that is exact for our graphs). Raises ValueError for a Bitcast that
    changes the element width (it changes the shape too)."""
    x = node.get_input(0)
    to = node.get_attribute("type")
    if x.get_element_type().bitwidth != to.bitwidth:
        raise ValueError(f"Bitcast {x.get_element_type()} -> {to} changes the element width")
    return [x]


def main():
    import nncf
    import numpy as np
    import openvino as ov

    model_dir, export_dir, calibration_npz = sys.argv[1:4]
    with np.load(calibration_npz) as f:
        calibration = {k: f[k] for k in f.files}
    core = ov.Core()
    tmp = None  # the temporary directory of model.onnx, set below

    @functools.cache
    def model(source, quant):
        start = time.perf_counter()
        if quant == "float32" and source == "hf":  # ort_peer's model.onnx
            ort_peer.export_float32_onnx(model_dir, tmp / "model.onnx")
            converted = ov.convert_model(str(tmp / "model.onnx"))
        elif quant == "float32":  # the `encoded` signature, output `probabilities` only
            import tensorflow as tf
            from openvino.frontend.tensorflow import ConversionExtension

            loaded = tf.saved_model.load(export_dir)  # owns the variables: alive until converted
            encoded = loaded.signatures["encoded"]
            probabilities = tf.function(lambda **ids: encoded(**ids)["probabilities"])
            function = probabilities.get_concrete_function(**encoded.structured_input_signature[1])
            extension = ConversionExtension("Bitcast", bitcast_as_identity)
            converted = ov.convert_model(function, extension=[extension])
        else:
            items = calibration_items(calibration, source)
            converted = nncf.quantize(
                model(source, "float32"),
                nncf.Dataset(items),
                model_type=nncf.ModelType.TRANSFORMER,
                subset_size=len(items),
            )
        took = time.perf_counter() - start
        print(f"openvino_peer: {source} {quant} ready in {took:.1f} s", file=sys.stderr, flush=True)
        return converted

    @functools.cache
    def compiled(source, quant, threads):
        config = {"INFERENCE_PRECISION_HINT": "f32"} | (
            {"INFERENCE_NUM_THREADS": threads} if threads else {}
        )
        return core.compile_model(model(source, quant), "CPU", config)

    def load(msg):
        check_job(msg)
        source = msg["source"]
        request = compiled(
            source, msg["quant"], int(msg.get("threads") or 0)
        ).create_infer_request()
        if msg["cmd"] == "predict":
            with np.load(msg["ids"]) as f:
                ids = {k: f[k] for k in f.files}
            chunks = []
            for i in range(0, len(ids["input_word_ids"]), PREDICT_CHUNK):
                chunk = {k: v[i : i + PREDICT_CHUNK] for k, v in ids.items()}
                chunks.append(request.infer(feeds_for(chunk, source))[0].copy())
            np.savez(msg["out"], output=np.concatenate(chunks))
            return (lambda: None), (lambda: None)
        feeds = feeds_for(peers.fixed_input(msg), source)
        return (lambda: None), (lambda: request.infer(feeds))

    with tempfile.TemporaryDirectory(prefix="keras_bert_openvino_") as name:
        tmp = pathlib.Path(name)
        common.serve_peer(load)


if __name__ == "__main__":
    main()
