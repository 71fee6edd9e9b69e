"""Test helpers: write checkpoints in the published formats, and a HF-named NumPy BERT.

Everything here is written independently of `keras_bert.checkpoints` (own name rules), so a
round trip through our converters is a real check of their tables.
"""

import json
import os
import re

import numpy as np
import scipy.special


def random_hf_weights(cfg, seed=0, heads=False, prefix=""):
    """Random float32 tensors under Hugging Face BertModel names for a config dict (HF keys)."""
    rng = np.random.default_rng(seed)
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]  # noqa: E741 (config letters)
    P, S = cfg["max_position_embeddings"], cfg["type_vocab_size"]
    shapes = {
        "embeddings.word_embeddings.weight": (V, H),
        "embeddings.position_embeddings.weight": (P, H),
        "embeddings.token_type_embeddings.weight": (S, H),
        "embeddings.LayerNorm.weight": (H,),
        "embeddings.LayerNorm.bias": (H,),
        "pooler.dense.weight": (H, H),
        "pooler.dense.bias": (H,),
    }
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for n in (
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
        ):
            shapes.update({p + n + ".weight": (H, H), p + n + ".bias": (H,)})
        shapes.update(
            {
                p + "intermediate.dense.weight": (I, H),
                p + "intermediate.dense.bias": (I,),
                p + "output.dense.weight": (H, I),
                p + "output.dense.bias": (H,),
            }
        )
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes.update({p + n + ".weight": (H,), p + n + ".bias": (H,)})
    out = {}
    for name, shape in shapes.items():
        scale = 1.0 if name.endswith("LayerNorm.weight") else 0.0
        out[prefix + name] = (scale + 0.3 * rng.standard_normal(shape)).astype(np.float32)
    if heads:
        out.update(
            {
                "cls.predictions.transform.dense.weight": (H, H),
                "cls.predictions.transform.dense.bias": (H,),
                "cls.predictions.transform.LayerNorm.weight": (H,),
                "cls.predictions.transform.LayerNorm.bias": (H,),
                "cls.predictions.bias": (V,),
                "cls.seq_relationship.weight": (2, H),
                "cls.seq_relationship.bias": (2,),
            }
        )
        for name in [k for k in out if k.startswith("cls.")]:
            out[name] = (0.3 * rng.standard_normal(out[name])).astype(np.float32)
        out["cls.predictions.decoder.weight"] = out[prefix + "embeddings.word_embeddings.weight"]
        out["cls.predictions.decoder.bias"] = out["cls.predictions.bias"]
    return out


def write_hf_dir(directory, cfg, tensors, do_lower_case=True):
    """config.json + model.safetensors (+ tokenizer_config.json) in a HF directory."""
    from safetensors.numpy import save_file

    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(dict(cfg, model_type="bert"), f)
    save_file(tensors, os.path.join(directory, "model.safetensors"))
    if do_lower_case is not None:
        with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
            json.dump({"do_lower_case": do_lower_case}, f)
    return str(directory)


# Regex rewrites HF name -> google-research/bert name, and whether the tensor is transposed.
_HF_TO_GOOGLE = [
    (r"embeddings\.(word|position)_embeddings\.weight", r"bert/embeddings/\1_embeddings", False),
    (r"embeddings\.token_type_embeddings\.weight", "bert/embeddings/token_type_embeddings", False),
    (r"embeddings\.LayerNorm\.weight", "bert/embeddings/LayerNorm/gamma", False),
    (r"embeddings\.LayerNorm\.bias", "bert/embeddings/LayerNorm/beta", False),
    (
        r"encoder\.layer\.(\d+)\.(.*)\.LayerNorm\.weight",
        r"bert/encoder/layer_\1/\2/LayerNorm/gamma",
        False,
    ),
    (
        r"encoder\.layer\.(\d+)\.(.*)\.LayerNorm\.bias",
        r"bert/encoder/layer_\1/\2/LayerNorm/beta",
        False,
    ),
    (r"encoder\.layer\.(\d+)\.(.*)\.weight", r"bert/encoder/layer_\1/\2/kernel", True),
    (r"encoder\.layer\.(\d+)\.(.*)\.bias", r"bert/encoder/layer_\1/\2/bias", False),
    (r"pooler\.dense\.weight", "bert/pooler/dense/kernel", True),
    (r"pooler\.dense\.bias", "bert/pooler/dense/bias", False),
    (r"cls\.predictions\.transform\.dense\.weight", "cls/predictions/transform/dense/kernel", True),
    (r"cls\.predictions\.transform\.dense\.bias", "cls/predictions/transform/dense/bias", False),
    (
        r"cls\.predictions\.transform\.LayerNorm\.weight",
        "cls/predictions/transform/LayerNorm/gamma",
        False,
    ),
    (
        r"cls\.predictions\.transform\.LayerNorm\.bias",
        "cls/predictions/transform/LayerNorm/beta",
        False,
    ),
    (r"cls\.predictions\.bias", "cls/predictions/output_bias", False),
    # run_pretraining.py stores the NSP weights [2, hidden], as HF does: no transpose.
    (r"cls\.seq_relationship\.weight", "cls/seq_relationship/output_weights", False),
    (r"cls\.seq_relationship\.bias", "cls/seq_relationship/output_bias", False),
]
_SKIP = {
    "embeddings.position_ids",
    "cls.predictions.decoder.weight",
    "cls.predictions.decoder.bias",
}


def hf_to_google(tensors):
    """Renames HF tensors to google-research/bert names (kernels [in, out])."""
    out = {}
    for name, value in tensors.items():
        if name in _SKIP:
            continue
        for pattern, target, transpose in _HF_TO_GOOGLE:
            if re.fullmatch(pattern, name):
                g = re.sub(pattern, target, name).replace(".", "/")
                out[g] = np.ascontiguousarray(value.T if transpose else value)
                break
        else:
            raise KeyError(name)
    return out


def write_tf1_checkpoint(prefix, tensors, slots=True, global_step=1000000, scope=""):
    """Writes tensors as a TF1 checkpoint with tf.compat.v1 Saver, names exactly as given.

    Like a checkpoint saved by google-research/bert run_pretraining.py, each weight gets its
    AdamWeightDecayOptimizer slots `<name>/adam_m`, `<name>/adam_v` (zeros) and there is an int64
    `global_step`. `scope` (e.g. "module/") prefixes every name.
    """
    import tensorflow as tf

    v1 = tf.compat.v1
    with tf.Graph().as_default():
        variables = {}
        for name, value in tensors.items():
            variables[name] = v1.get_variable(
                scope + name,
                shape=value.shape,
                dtype=tf.float32,
                initializer=v1.zeros_initializer(),
            )
            if slots:
                for slot in ("adam_m", "adam_v"):
                    v1.get_variable(
                        f"{scope}{name}/{slot}",
                        shape=value.shape,
                        dtype=tf.float32,
                        initializer=v1.zeros_initializer(),
                        trainable=False,
                    )
        step = v1.get_variable(
            scope + "global_step",
            shape=[],
            dtype=tf.int64,
            initializer=v1.constant_initializer(global_step),
            trainable=False,
        )
        del step
        saver = v1.train.Saver()
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            for name, var in variables.items():
                var.load(tensors[name], sess)
            saver.save(sess, prefix, write_meta_graph=False)
    return prefix


def write_google_dir(directory, cfg, tensors, hidden_act="gelu", **kwargs):
    """bert_config.json (google keys, no layer_norm_eps) + bert_model.ckpt.* in `directory`."""
    os.makedirs(directory, exist_ok=True)
    keys = (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "hidden_dropout_prob",
        "attention_probs_dropout_prob",
        "max_position_embeddings",
        "type_vocab_size",
        "initializer_range",
    )
    google_cfg = {k: cfg[k] for k in keys if k in cfg}
    google_cfg["hidden_act"] = hidden_act
    with open(os.path.join(directory, "bert_config.json"), "w") as f:
        json.dump(google_cfg, f)
    return write_tf1_checkpoint(os.path.join(directory, "bert_model.ckpt"), tensors, **kwargs)


def numpy_bert(w, features, num_layers, num_heads, eps=1e-12, approximate=False):
    """float64 BERT forward pass from the equations (BERT §3; Transformer §3.2), HF names.

    Returns (sequence_output [B, T, H], pooled_output [B, H]) as float64 arrays.
    """
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    ids, mask, types = (features[k] for k in ("input_word_ids", "input_mask", "input_type_ids"))
    B, T = ids.shape

    def layer_norm(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[p + ".weight"] + w[p + ".bias"]

    def linear(x, p):
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    def gelu(x):
        if approximate:  # tanh form, google-research/bert modeling.py
            return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
        return 0.5 * x * (1.0 + scipy.special.erf(x / np.sqrt(2.0)))  # x * Phi(x)

    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:T]
        + w["embeddings.token_type_embeddings.weight"][types]
    )
    x = layer_norm(x, "embeddings.LayerNorm")
    H = x.shape[-1]
    D = H // num_heads
    keep = mask[:, None, None, :].astype(bool)  # [B, 1, 1, T]: padded keys are excluded

    def heads(t):  # [B, T, H] -> [B, N, T, D]
        return t.reshape(B, T, num_heads, D).transpose(0, 2, 1, 3)

    for i in range(num_layers):
        p = f"encoder.layer.{i}."
        q, k, v = (heads(linear(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        scores = np.where(keep, q @ k.transpose(0, 1, 3, 2) / np.sqrt(D), -np.inf)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(B, T, H)
        x = layer_norm(
            x + linear(context, p + "attention.output.dense"), p + "attention.output.LayerNorm"
        )
        ffn = linear(gelu(linear(x, p + "intermediate.dense")), p + "output.dense")
        x = layer_norm(x + ffn, p + "output.LayerNorm")
    return x, np.tanh(linear(x[:, 0], "pooler.dense"))


# The tiny encoder of the checkpoint tests: vocab 23, hidden 8, heads 2, intermediate 12, layers 2,
# positions 7, types 3 (Hugging Face key names).
CFG = {
    "vocab_size": 23,
    "hidden_size": 8,
    "num_attention_heads": 2,
    "intermediate_size": 12,
    "num_hidden_layers": 2,
    "max_position_embeddings": 7,
    "type_vocab_size": 3,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-12,
}
FEATURES = {
    "input_word_ids": np.array([[1, 5, 22, 7, 2], [1, 9, 2, 0, 0]], np.int32),
    "input_mask": np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32),
    "input_type_ids": np.array([[0, 0, 1, 2, 1], [0, 1, 1, 0, 0]], np.int32),
}
MASK = FEATURES["input_mask"].astype(bool)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(18)]
VOCAB_TEXT = "".join(t + "\n" for t in VOCAB)  # a vocab.txt of VOCAB, one piece a line


def random_keras_hub_backbone(seed, gamma=0.0):
    """keras-hub's own `BertBackbone` at the sizes of CFG, with random weights.

    Every weight is drawn from N(0, 0.3^2) by `np.random.default_rng(seed)`, LayerNorm gammas
    shifted by `gamma`: a model made by keras-hub itself, whose preset our readers and converters
    are checked against.
    """
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=CFG["vocab_size"],
        num_layers=CFG["num_hidden_layers"],
        num_heads=CFG["num_attention_heads"],
        hidden_dim=CFG["hidden_size"],
        intermediate_dim=CFG["intermediate_size"],
        max_sequence_length=CFG["max_position_embeddings"],
        num_segments=CFG["type_vocab_size"],
    )
    rng = np.random.default_rng(seed)
    for variable in backbone.weights:
        base = gamma if variable.path.endswith("gamma") else 0.0
        variable.assign(base + 0.3 * rng.standard_normal(variable.shape).astype(np.float32))
    return backbone


def keras_hub_outputs(backbone):
    """(sequence_output, pooled_output) as numpy of a keras-hub `BertBackbone` on FEATURES."""
    out = backbone(
        {
            "token_ids": FEATURES["input_word_ids"],
            "segment_ids": FEATURES["input_type_ids"],
            "padding_mask": FEATURES["input_mask"],
        },
        training=False,
    )
    return np.asarray(out["sequence_output"]), np.asarray(out["pooled_output"])


def encoder_outputs(encoder):
    """(sequence_output, pooled_output) as numpy of `encoder` on FEATURES."""
    out = encoder(FEATURES, training=False)
    return np.asarray(out["sequence_output"]), np.asarray(out["pooled_output"])


def max_diff(a, b) -> float:
    """Largest absolute difference of two (sequence_output, pooled_output) pairs, real tokens only."""
    return max(
        float(np.abs(np.asarray(a[0])[MASK] - np.asarray(b[0])[MASK]).max()),
        float(np.abs(np.asarray(a[1]) - np.asarray(b[1])).max()),
    )
