"""The ONNX Runtime peer: Hugging Face's BertModel exported to ONNX (float32, and int8 by dynamic
quantization) on ONNX Runtime's CPU provider, in its own process on the line protocol of
torch_peer.py; bench_encoder and bench_litert time it against ours. The export, the sessions'
settings and the load command: README.md here. Needs torch, transformers, onnx and onnxruntime:

    python -m benchmarks.peers.ort_peer HF_MODEL_DIR
"""

import pathlib
import shutil
import sys
import tempfile
import time

from benchmarks import common, peers

QUANTS = ("float32", "int8")
ONNX_INPUTS = {  # model.onnx's input name -> ours
    "input_ids": "input_word_ids",
    "attention_mask": "input_mask",
    "token_type_ids": "input_type_ids",
}


def export_float32_onnx(model_dir: str, path: pathlib.Path) -> None:
    """Writes `path`: `transformers.BertModel` of `model_dir` through `torch.onnx.export`, the
    `model.onnx` of README.md here (also what openvino_peer.py converts)."""
    import torch
    import transformers

    class LastHidden(torch.nn.Module):  # one named output, not BertModel's output dataclass
        def __init__(self):
            super().__init__()
            self.bert = transformers.BertModel.from_pretrained(
                model_dir, attn_implementation="eager"
            )

        def forward(self, *inputs):  # input_ids, attention_mask, token_type_ids
            return self.bert(*inputs).last_hidden_state

    ids = torch.full((2, 16), 1000, dtype=torch.long)
    axes = {name: {0: "batch", 1: "sequence"} for name in [*ONNX_INPUTS, "last_hidden_state"]}
    with torch.inference_mode():
        torch.onnx.export(
            LastHidden().eval(),
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            str(path),
            input_names=list(ONNX_INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            do_constant_folding=True,
            dynamo=False,
        )


def onnx_feeds(features: dict) -> dict:
    """Our int32 features [B, T] as the int64 inputs of `model.onnx`."""
    import numpy as np

    return {onnx: np.asarray(features[ours], np.int64) for onnx, ours in ONNX_INPUTS.items()}


def main():
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="keras_bert_ort_"))
    files = {"float32": tmp / "model.onnx", "int8": tmp / "model.int8.onnx"}

    def load(msg):
        peers.check_command(msg, quant=QUANTS)
        if not files["int8"].exists():  # export and quantize once, on the first load command
            start = time.perf_counter()
            export_float32_onnx(sys.argv[1], files["float32"])
            exported = time.perf_counter()
            quantize_dynamic(str(files["float32"]), str(files["int8"]), weight_type=QuantType.QInt8)
            print(
                f"ort_peer: exported in {exported - start:.1f} s, quantized in "
                f"{time.perf_counter() - exported:.1f} s",
                file=sys.stderr,
                flush=True,
            )
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(msg.get("threads") or 0)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(
            str(files[msg["quant"]]), options, providers=["CPUExecutionProvider"]
        )
        feeds = onnx_feeds(peers.fixed_input(msg))
        return (lambda: None), (lambda s=session, f=feeds: s.run(["last_hidden_state"], f)[0])

    try:
        common.serve_peer(load)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
