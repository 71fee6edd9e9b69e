"""The ONNX Runtime peer: Hugging Face's BertModel exported to ONNX (float32, and int8 by dynamic
quantization), run by ONNX Runtime on CPU, in its own process (`common.peer` starts it;
bench_encoder times it against ours). The export and the sessions' settings: README.md here.
Needs torch, transformers, onnx and onnxruntime; started, from the repository root, as

    python -m benchmarks.peers.ort_peer HF_MODEL_DIR

Line protocol of torch_peer.py, load command {"cmd": "encoder", "quant": "float32"|"int8",
"batch": B, "seq": T, "threads": N} on a fixed random input.
"""

import pathlib
import shutil
import sys
import tempfile
import time

from benchmarks import common, peers

QUANTS = ("float32", "int8")
# model.onnx's input name -> ours
ONNX_INPUTS = {
    "input_ids": "input_word_ids",
    "attention_mask": "input_mask",
    "token_type_ids": "input_type_ids",
}


def export_float32_onnx(model_dir: str, path: pathlib.Path) -> None:
    """Writes `path`: `transformers.BertModel` of `model_dir` through `torch.onnx.export`, the
    `model.onnx` of README.md here (also what openvino_peer.py converts)."""
    import torch
    import transformers

    model = transformers.BertModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    ids = torch.full((2, 16), 1000, dtype=torch.long)
    args = (ids, torch.ones_like(ids), torch.zeros_like(ids))
    names = list(ONNX_INPUTS)
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}

    class LastHidden(torch.nn.Module):  # one named output, not BertModel's output dataclass
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    with torch.inference_mode():
        torch.onnx.export(
            LastHidden(model),
            args,
            str(path),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            do_constant_folding=True,
            dynamo=False,
        )


def export_onnx(model_dir: str, out_dir: pathlib.Path) -> dict:
    """Writes model.onnx and model.int8.onnx under out_dir; returns quant -> path."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    start = time.perf_counter()
    fp32 = out_dir / "model.onnx"
    export_float32_onnx(model_dir, fp32)
    exported = time.perf_counter()
    int8 = out_dir / "model.int8.onnx"
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    print(
        f"ort_peer: exported in {exported - start:.1f} s, quantized in "
        f"{time.perf_counter() - exported:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return {"float32": fp32, "int8": int8}


def onnx_feeds(features: dict) -> dict:
    """Our int32 features (`input_word_ids`, `input_mask`, `input_type_ids` [B, T]) as the int64
    inputs of `model.onnx` (`input_ids`, `attention_mask`, `token_type_ids`)."""
    import numpy as np

    return {onnx: np.asarray(features[ours], np.int64) for onnx, ours in ONNX_INPUTS.items()}


def main():
    import onnxruntime as ort

    model_dir = sys.argv[1]
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="keras_bert_ort_"))
    files = {}

    def load(msg):
        peers.check_command(msg, quant=QUANTS)
        if not files:
            files.update(export_onnx(model_dir, tmp))
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
