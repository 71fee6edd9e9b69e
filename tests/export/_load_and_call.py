"""Loads exported SavedModels in a fresh process that imports only TensorFlow, and calls them.

Run as `python -I _load_and_call.py SPEC.pkl OUT.pkl` (isolated: neither the repository nor
PYTHONPATH is on sys.path, so keras_bert cannot be imported even by accident).

SPEC: {key: {"dir": str, "calls": {call_id: (kind, name, inputs)}}} where kind is "signature"
(inputs: dict name -> ndarray, called as keyword arguments of `obj.signatures[name]`) or
"function" (the restored `obj.<name>` tf.function, keyword arguments).
OUT: {"modules": [top-level modules loaded], key: {"signatures": {name: {"inputs": {n: (dtype,
shape)}, "outputs": {n: (dtype, shape)}}}, "calls": {call_id: {out: ndarray} or
("error", exception type name, message)}}}.
"""

import pickle
import sys

import tensorflow as tf


def _spec(t):
    return (t.dtype.name, None if t.shape.rank is None else tuple(t.shape.as_list()))


def main(spec_path, out_path):
    with open(spec_path, "rb") as f:
        spec = pickle.load(f)
    out = {}
    for key, item in spec.items():
        obj = tf.saved_model.load(item["dir"])
        sigs = {}
        for name, fn in obj.signatures.items():
            sigs[name] = {
                "inputs": {n: _spec(t) for n, t in fn.structured_input_signature[1].items()},
                "outputs": {n: _spec(t) for n, t in fn.structured_outputs.items()},
            }
        calls = {}
        for call_id, (kind, name, inputs) in item["calls"].items():
            fn = obj.signatures[name] if kind == "signature" else getattr(obj, name)
            try:
                result = fn(**{k: tf.constant(v) for k, v in inputs.items()})
                calls[call_id] = {k: v.numpy() for k, v in result.items()}
            except Exception as e:
                calls[call_id] = ("error", type(e).__name__, str(e)[:2000])
        out[key] = {
            "signatures": sigs,
            "calls": calls,
            "asset_paths": {
                a: getattr(obj, a).asset_path.numpy().decode()
                for a in ("vocab_file", "config_file", "labels_file")
                if hasattr(obj, a)
            },
        }
    out["modules"] = sorted({m.split(".")[0] for m in sys.modules})
    with open(out_path, "wb") as f:
        pickle.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
