"""An independent float64 NumPy BERT forward pass, written from the paper's equations.

Used by the parity tests: it reads weights from a `BertEncoder` only through their documented
roles, and recomputes everything (embeddings, LayerNorm, scaled dot-product attention with an
additive mask, GELU, pooler) without TensorFlow.
"""

import math

import numpy as np
from scipy.special import erf


def gelu(x, approximate=False):
    if approximate:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def encoder_weights(encoder):
    """Extracts float64 arrays by role from a built `BertEncoder`."""
    f = lambda v: np.asarray(v.numpy(), np.float64)  # noqa: E731
    emb = encoder.embeddings
    w = {
        "word": f(emb.word_embeddings.embeddings),
        "position": f(emb.position_embeddings),
        "type": f(emb.type_embeddings.embeddings),
        "emb_ln": (f(emb.layer_norm.gamma), f(emb.layer_norm.beta)),
        "pooler": (f(encoder.pooler.kernel), f(encoder.pooler.bias)),
        "layers": [],
    }
    for block in encoder.transformer_layers:
        att = block.self_attention
        dense = lambda d: (f(d.kernel), f(d.bias))  # noqa: E731
        w["layers"].append(
            {
                "q": dense(att.query),
                "k": dense(att.key),
                "v": dense(att.value),
                "o": dense(block.attention_output),
                "ln1": (f(block.attention_layer_norm.gamma), f(block.attention_layer_norm.beta)),
                "i": dense(block.intermediate),
                "out": dense(block.output_dense),
                "ln2": (f(block.output_layer_norm.gamma), f(block.output_layer_norm.beta)),
            }
        )
    return w


def forward(
    w, word_ids, input_mask, type_ids, num_heads, eps=1e-12, approximate=False, causal=False
):
    """Returns (sequence_output [B,T,H], pooled_output [B,H], list of block outputs), float64."""
    batch, seq = word_ids.shape
    x = w["word"][word_ids] + w["position"][:seq][None] + w["type"][type_ids]
    x = layer_norm(x, *w["emb_ln"], eps)
    hidden = x.shape[-1]
    d = hidden // num_heads
    allowed = np.broadcast_to(input_mask[:, None, :], (batch, seq, seq)).astype(bool)
    if causal:
        allowed = allowed & np.tril(np.ones((seq, seq), bool))[None]
    outs = []
    for lw in w["layers"]:

        def proj(t, p):
            return t @ p[0] + p[1]

        q, k, v = (
            proj(x, lw[n]).reshape(batch, seq, num_heads, d).transpose(0, 2, 1, 3)
            for n in ("q", "k", "v")
        )
        logits = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
        logits = np.where(allowed[:, None], logits, logits - 10000.0)
        logits -= logits.max(-1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
        x = layer_norm(x + proj(ctx, lw["o"]), *lw["ln1"], eps)
        ffn = proj(gelu(proj(x, lw["i"]), approximate), lw["out"])
        x = layer_norm(x + ffn, *lw["ln2"], eps)
        outs.append(x)
    pooled = np.tanh(x[:, 0] @ w["pooler"][0] + w["pooler"][1])
    return x, pooled, outs
