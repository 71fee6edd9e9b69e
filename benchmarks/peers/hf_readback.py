"""Parity of `save_encoder(format="huggingface")` read back by transformers' `BertModel`, in two
environments (README.md here):

    .venv/bin/python -m benchmarks.peers.hf_readback write OUT_DIR      # ours: the HF dir + our outputs
    <python with torch==2.13.0 transformers> benchmarks/peers/hf_readback.py read OUT_DIR
"""

import pathlib
import sys

import numpy as np

TEXTS = [
    "The movie was wonderful.",
    "A dull, tedious mess that goes nowhere.",
    "naïve café",
    "Is this a question?",
]


def write(out: pathlib.Path) -> None:
    import keras_bert  # our environment only
    from keras_bert.tokenization import BertPreprocessor

    encoder = keras_bert.from_pretrained("minilm_l6_h384_uncased")
    vocab = keras_bert.checkpoints.resolve_vocab_file("minilm_l6_h384_uncased")
    keras_bert.checkpoints.save_encoder(
        encoder, str(out / "hf"), vocab_file=vocab, do_lower_case=True, format="huggingface"
    )
    ids = {k: np.asarray(v) for k, v in BertPreprocessor(vocab, max_seq_length=24)(TEXTS).items()}
    outputs = encoder(ids)
    np.savez(
        out / "ours.npz",
        **ids,
        seq=np.asarray(outputs["sequence_output"]),
        pooled=np.asarray(outputs["pooled_output"]),
    )


def read(out: pathlib.Path) -> None:
    import torch  # the PyTorch peer environment only
    import transformers

    d = np.load(out / "ours.npz")
    model = transformers.BertModel.from_pretrained(str(out / "hf")).eval()
    names = ("input_word_ids", "input_mask", "input_type_ids")  # BertModel's first three inputs
    with torch.no_grad():
        o = model(*(torch.tensor(d[k], dtype=torch.long) for k in names))
    mask = d["input_mask"].astype(bool)
    seq = np.abs(o.last_hidden_state.numpy() - d["seq"])[mask].max()
    pooled = np.abs(o.pooler_output.numpy() - d["pooled"]).max()
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__} BertModel vs ours: "
        f"sequence_output {seq:.2e}, pooled_output {pooled:.2e} (hidden_act "
        f"{model.config.hidden_act})"
    )


if __name__ == "__main__":
    mode, directory = sys.argv[1], pathlib.Path(sys.argv[2])
    directory.mkdir(parents=True, exist_ok=True)
    {"write": write, "read": read}[mode](directory)
