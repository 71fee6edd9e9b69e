"""One name table for every external checkpoint format: a row per canonical weight.

Each row names one canonical weight (`source.py` lists them; `{i}` is the layer index) in every
format: google-research/bert TF1 checkpoints, Hugging Face `BertModel` / `BertForPreTraining`,
TF Hub-style encoder SavedModels (Model Garden's Keras `BertEncoder` variables), keras-hub
`BertBackbone` presets and Model Garden TF2 object-based checkpoints. None: the format has no
such weight (the pretraining heads exist only in the google-research and Hugging Face formats).

The Model Garden column is relative: embeddings by their full key, a transformer block's weights
relative to the block (`layer_with_weights-{4 + i}/`), the pooler's relative to its dense layer
(`layer_with_weights-{4 + num_layers}/`), because the object graph numbers layers in order.

The layout transform of a row follows from the canonical name and the format (`transform`), not
per row: Hugging Face stores every dense kernel as PyTorch's [out, in]; the per-head einsum
formats split query/key/value and the attention output by head; google-research stores only
the next-sentence kernel as [2, H].
"""

from keras_bert.checkpoints.source import MERGE_HEADS_IN, MERGE_HEADS_OUT, TRANSPOSE

FORMATS = ("google", "huggingface", "tfhub", "keras_hub", "model_garden")

# fmt: off
NAME_ROWS = (
    # canonical, google-research, Hugging Face, TF Hub SavedModel, keras-hub, Model Garden
    ("embeddings/word_embeddings", "bert/embeddings/word_embeddings",
     "embeddings.word_embeddings.weight", "word_embeddings/embeddings",
     "token_embedding/embeddings", "layer_with_weights-0/embeddings"),
    ("embeddings/position_embeddings", "bert/embeddings/position_embeddings",
     "embeddings.position_embeddings.weight", "position_embedding/embeddings",
     "position_embedding/embeddings", "layer_with_weights-1/embeddings"),
    ("embeddings/type_embeddings", "bert/embeddings/token_type_embeddings",
     "embeddings.token_type_embeddings.weight", "type_embeddings/embeddings",
     "segment_embedding/embeddings", "layer_with_weights-2/embeddings"),
    ("embeddings/layer_norm/gamma", "bert/embeddings/LayerNorm/gamma",
     "embeddings.LayerNorm.weight", "embeddings/layer_norm/gamma",
     "embeddings_layer_norm/gamma", "layer_with_weights-3/gamma"),
    ("embeddings/layer_norm/beta", "bert/embeddings/LayerNorm/beta",
     "embeddings.LayerNorm.bias", "embeddings/layer_norm/beta",
     "embeddings_layer_norm/beta", "layer_with_weights-3/beta"),
    ("layer_{i}/attention/query/kernel", "bert/encoder/layer_{i}/attention/self/query/kernel",
     "encoder.layer.{i}.attention.self.query.weight",
     "transformer/layer_{i}/self_attention/query/kernel",
     "transformer_layer_{i}/self_attention_layer/query/kernel",
     "_attention_layer/_query_dense/kernel"),
    ("layer_{i}/attention/query/bias", "bert/encoder/layer_{i}/attention/self/query/bias",
     "encoder.layer.{i}.attention.self.query.bias",
     "transformer/layer_{i}/self_attention/query/bias",
     "transformer_layer_{i}/self_attention_layer/query/bias",
     "_attention_layer/_query_dense/bias"),
    ("layer_{i}/attention/key/kernel", "bert/encoder/layer_{i}/attention/self/key/kernel",
     "encoder.layer.{i}.attention.self.key.weight",
     "transformer/layer_{i}/self_attention/key/kernel",
     "transformer_layer_{i}/self_attention_layer/key/kernel",
     "_attention_layer/_key_dense/kernel"),
    ("layer_{i}/attention/key/bias", "bert/encoder/layer_{i}/attention/self/key/bias",
     "encoder.layer.{i}.attention.self.key.bias",
     "transformer/layer_{i}/self_attention/key/bias",
     "transformer_layer_{i}/self_attention_layer/key/bias",
     "_attention_layer/_key_dense/bias"),
    ("layer_{i}/attention/value/kernel", "bert/encoder/layer_{i}/attention/self/value/kernel",
     "encoder.layer.{i}.attention.self.value.weight",
     "transformer/layer_{i}/self_attention/value/kernel",
     "transformer_layer_{i}/self_attention_layer/value/kernel",
     "_attention_layer/_value_dense/kernel"),
    ("layer_{i}/attention/value/bias", "bert/encoder/layer_{i}/attention/self/value/bias",
     "encoder.layer.{i}.attention.self.value.bias",
     "transformer/layer_{i}/self_attention/value/bias",
     "transformer_layer_{i}/self_attention_layer/value/bias",
     "_attention_layer/_value_dense/bias"),
    ("layer_{i}/attention/output/kernel", "bert/encoder/layer_{i}/attention/output/dense/kernel",
     "encoder.layer.{i}.attention.output.dense.weight",
     "transformer/layer_{i}/self_attention/attention_output/kernel",
     "transformer_layer_{i}/self_attention_layer/attention_output/kernel",
     "_attention_layer/_output_dense/kernel"),
    ("layer_{i}/attention/output/bias", "bert/encoder/layer_{i}/attention/output/dense/bias",
     "encoder.layer.{i}.attention.output.dense.bias",
     "transformer/layer_{i}/self_attention/attention_output/bias",
     "transformer_layer_{i}/self_attention_layer/attention_output/bias",
     "_attention_layer/_output_dense/bias"),
    ("layer_{i}/attention/layer_norm/gamma",
     "bert/encoder/layer_{i}/attention/output/LayerNorm/gamma",
     "encoder.layer.{i}.attention.output.LayerNorm.weight",
     "transformer/layer_{i}/self_attention_layer_norm/gamma",
     "transformer_layer_{i}/self_attention_layer_norm/gamma",
     "_attention_layer_norm/gamma"),
    ("layer_{i}/attention/layer_norm/beta",
     "bert/encoder/layer_{i}/attention/output/LayerNorm/beta",
     "encoder.layer.{i}.attention.output.LayerNorm.bias",
     "transformer/layer_{i}/self_attention_layer_norm/beta",
     "transformer_layer_{i}/self_attention_layer_norm/beta",
     "_attention_layer_norm/beta"),
    ("layer_{i}/intermediate/kernel", "bert/encoder/layer_{i}/intermediate/dense/kernel",
     "encoder.layer.{i}.intermediate.dense.weight", "transformer/layer_{i}/intermediate/kernel",
     "transformer_layer_{i}/feedforward_intermediate_dense/kernel",
     "_intermediate_dense/kernel"),
    ("layer_{i}/intermediate/bias", "bert/encoder/layer_{i}/intermediate/dense/bias",
     "encoder.layer.{i}.intermediate.dense.bias", "transformer/layer_{i}/intermediate/bias",
     "transformer_layer_{i}/feedforward_intermediate_dense/bias", "_intermediate_dense/bias"),
    ("layer_{i}/output/kernel", "bert/encoder/layer_{i}/output/dense/kernel",
     "encoder.layer.{i}.output.dense.weight", "transformer/layer_{i}/output/kernel",
     "transformer_layer_{i}/feedforward_output_dense/kernel", "_output_dense/kernel"),
    ("layer_{i}/output/bias", "bert/encoder/layer_{i}/output/dense/bias",
     "encoder.layer.{i}.output.dense.bias", "transformer/layer_{i}/output/bias",
     "transformer_layer_{i}/feedforward_output_dense/bias", "_output_dense/bias"),
    ("layer_{i}/output/layer_norm/gamma", "bert/encoder/layer_{i}/output/LayerNorm/gamma",
     "encoder.layer.{i}.output.LayerNorm.weight", "transformer/layer_{i}/output_layer_norm/gamma",
     "transformer_layer_{i}/feedforward_layer_norm/gamma", "_output_layer_norm/gamma"),
    ("layer_{i}/output/layer_norm/beta", "bert/encoder/layer_{i}/output/LayerNorm/beta",
     "encoder.layer.{i}.output.LayerNorm.bias", "transformer/layer_{i}/output_layer_norm/beta",
     "transformer_layer_{i}/feedforward_layer_norm/beta", "_output_layer_norm/beta"),
    ("pooler/kernel", "bert/pooler/dense/kernel", "pooler.dense.weight",
     "pooler_transform/kernel", "pooled_dense/kernel", "kernel"),
    ("pooler/bias", "bert/pooler/dense/bias", "pooler.dense.bias",
     "pooler_transform/bias", "pooled_dense/bias", "bias"),
    # The pretraining heads: run_pretraining.py's `cls/...` and BertForPreTraining's `cls....`.
    ("masked_lm/transform/kernel", "cls/predictions/transform/dense/kernel",
     "cls.predictions.transform.dense.weight", None, None, None),
    ("masked_lm/transform/bias", "cls/predictions/transform/dense/bias",
     "cls.predictions.transform.dense.bias", None, None, None),
    ("masked_lm/layer_norm/gamma", "cls/predictions/transform/LayerNorm/gamma",
     "cls.predictions.transform.LayerNorm.weight", None, None, None),
    ("masked_lm/layer_norm/beta", "cls/predictions/transform/LayerNorm/beta",
     "cls.predictions.transform.LayerNorm.bias", None, None, None),
    ("masked_lm/output_bias", "cls/predictions/output_bias", "cls.predictions.bias",
     None, None, None),
    ("next_sentence/kernel", "cls/seq_relationship/output_weights",
     "cls.seq_relationship.weight", None, None, None),
    ("next_sentence/bias", "cls/seq_relationship/output_bias", "cls.seq_relationship.bias",
     None, None, None),
)
# fmt: on

_HEADS_SPLIT = ("tfhub", "keras_hub", "model_garden")
_SPLIT_IN = tuple(
    f"layer_{{i}}/attention/{p}/{w}" for p in ("query", "key", "value") for w in ("kernel", "bias")
)


def transform(format_name: str, canonical: str):
    """The layout transform (`source.TRANSPOSE`, `MERGE_HEADS_IN` / `_OUT` or None) of a weight.

    Hugging Face: every dense kernel is [out, in]. google-research/bert: only the next-sentence
    kernel, stored as [2, H]. Per-head einsum formats: query, key and value kernels and biases
    carry a head axis on their output side, the attention output kernel on its input side.
    """
    if format_name == "huggingface":
        return TRANSPOSE if canonical.endswith("kernel") else None
    if format_name == "google":
        return TRANSPOSE if canonical == "next_sentence/kernel" else None
    if format_name in _HEADS_SPLIT:
        if canonical in _SPLIT_IN:
            return MERGE_HEADS_IN
        if canonical == "layer_{i}/attention/output/kernel":
            return MERGE_HEADS_OUT
    return None


def name_table(format_name: str) -> tuple:
    """The `(canonical, source, transform)` rows of one format (see `source.apply_table`),
    the weights it has only, in canonical order."""
    column = 1 + FORMATS.index(format_name)
    return tuple(
        (row[0], row[column], transform(format_name, row[0]))
        for row in NAME_ROWS
        if row[column] is not None
    )
