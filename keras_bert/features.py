"""Feature extraction: fixed per-token vectors from chosen encoder layers (BERT section 5.3).

The google-research/bert `extract_features.py` interface: `layers` is a comma-separated list of
indexes into the transformer layers' outputs (Python list indexing: -1 = the last layer, -2 the
one before, 0 the first), and each example becomes one JSON object

    {"linex_index": i, "features": [{"token": "[CLS]", "layers": [{"index": -1,
      "values": [0.123456, ...]}, ...]}, ...]}

with one entry per WordPiece token of the packed sequence (`[CLS] A [SEP] (B [SEP])`, no padding)
and values rounded to 6 decimals, as there. The input text of a pair is written `A ||| B`.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

PAIR_SEPARATOR = " ||| "


def parse_layers(spec: str, num_layers: int) -> list[int]:
    """ "-1,-2,-3,-4" -> [-1, -2, -3, -4], each in [-num_layers, num_layers - 1].

    Raises:
        ValueError: empty, not integers, or out of range (naming the encoder's layer count).
    """
    try:
        layers = [int(x) for x in str(spec).split(",") if x.strip()]
    except ValueError:
        raise ValueError(
            f"layers must be comma-separated integers like -1,-2,-3,-4, got {spec!r}"
        ) from None
    bad = [i for i in layers if not -num_layers <= i < num_layers]
    if not layers or bad:
        raise ValueError(
            f"layers {spec!r}: each index must be in [-{num_layers}, {num_layers - 1}] "
            f"(the encoder has {num_layers} layers)"
        )
    return layers


def split_pair(line: str) -> tuple[str, str | None]:
    """ "A ||| B" -> ("A", "B"); a line without the separator -> (line, None)."""
    text_a, sep, text_b = line.partition("|||")
    return (text_a.strip(), text_b.strip()) if sep else (line.strip(), None)


def extract_features(encoder, preprocessor, texts, layers, batch_size: int = 8):
    """Yields, per example, (tokens, {layer index: float32 [n_tokens, H]}).

    Args:
        encoder: a `BertEncoder`.
        preprocessor: a `BertPreprocessor` (max_seq_length bounds the tokens; longer texts are
            truncated as in training, pairs longest-first).
        texts: list of str; "A ||| B" is a pair.
        layers: list of int layer indexes (`parse_layers`).
        batch_size: examples per encoder call.

    Yields:
        (list of str tokens incl. [CLS]/[SEP], dict index -> numpy float32 [n_tokens, hidden]).
    """
    vocabulary = np.array(preprocessor.vocabulary, dtype=object)
    step = tf.function(
        lambda x: encoder(x, training=False)["encoder_outputs"], reduce_retracing=True
    )
    for start in range(0, len(texts), batch_size):
        pairs = [split_pair(t) for t in texts[start : start + batch_size]]
        results = {}
        for is_pair in (False, True):  # singles and pairs packed apart: no empty B segments
            rows = [i for i, p in enumerate(pairs) if (p[1] is not None) == is_pair]
            if not rows:
                continue
            a = tf.constant([pairs[i][0] for i in rows])
            inputs = preprocessor(
                {"text": a, "text_b": tf.constant([pairs[i][1] for i in rows])} if is_pair else a
            )
            outputs = step(inputs)
            ids, lengths = inputs["input_word_ids"].numpy(), inputs["input_mask"].numpy().sum(1)
            for j, i in enumerate(rows):
                n = lengths[j]
                results[i] = (
                    list(vocabulary[ids[j, :n]]),
                    {k: outputs[k][j, :n].numpy() for k in layers},
                )
        yield from (results[i] for i in range(len(pairs)))


def feature_json(index: int, tokens, values: dict) -> dict:
    """One output line in google-research's layout (module docstring)."""
    return {
        "linex_index": index,
        "features": [
            {
                "token": token,
                "layers": [
                    {"index": i, "values": [round(float(x), 6) for x in v[t]]}
                    for i, v in values.items()
                ],
            }
            for t, token in enumerate(tokens)
        ],
    }
