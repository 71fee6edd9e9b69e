"""`BertEncoder`: the bidirectional Transformer encoder of BERT (Devlin et al. 2018, §3)."""

import dataclasses

import keras
import tensorflow as tf

from keras_bert.layers.arguments import BuildsFromArguments
from keras_bert.config import BertConfig
from keras_bert.layers.bert_embeddings import BertEmbeddings
from keras_bert.layers.initializers import truncated_normal
from keras_bert.layers.self_attention import attention_bias
from keras_bert.layers.transformer_encoder_block import TransformerEncoderBlock


@keras.saving.register_keras_serializable(package="keras_bert")
class BertEncoder(BuildsFromArguments, keras.Model):
    """BERT encoder: embeddings, L post-LN Transformer blocks, tanh pooler on [CLS].

    Constructor arguments are the `BertConfig` fields (`BertEncoder(**dataclasses.asdict(cfg))`
    or `BertEncoder.from_config_object(cfg)`), plus:

    Args:
        causal: bool. If True each position attends only to itself and earlier positions
            (left-to-right, the "LTR & No NSP" ablation of BERT §5.1, table 5).

    Call args:
        inputs: dict with `input_word_ids`, `input_mask` (1 = real token, 0 = padding) and
            `input_type_ids`, int32 (int64 accepted) Tensors [batch_size, seq_length]. A missing
            `input_mask` means all ones; a missing `input_type_ids` means all zeros.
        training: bool. Dropout acts only when True.

    Returns:
        dict with
        `sequence_output`: [batch_size, seq_length, hidden_size], last block's output;
        `pooled_output`: [batch_size, hidden_size], tanh(Dense(sequence_output[:, 0]))
            (google-research/bert modeling.py "pooler");
        `encoder_outputs`: list of num_layers Tensors [batch_size, seq_length, hidden_size].
        All in the compute dtype of the dtype policy (float32, or bfloat16/float16 under mixed
        precision, with LayerNorm and softmax computed in float32).

    Raises:
        ValueError: if `input_word_ids` is missing, or a static seq_length exceeds
            max_sequence_length; InvalidArgumentError at run time for a dynamic one.
    """

    def __init__(
        self,
        vocab_size=30522,
        hidden_size=768,
        num_layers=12,
        num_heads=12,
        intermediate_size=3072,
        hidden_activation="gelu",
        dropout_rate=0.1,
        attention_dropout_rate=0.1,
        max_sequence_length=512,
        type_vocab_size=2,
        initializer_range=0.02,
        layer_norm_epsilon=1e-12,
        causal=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        arguments = locals()
        self.bert_config = BertConfig(  # validates all hyperparameters
            **{field.name: arguments[field.name] for field in dataclasses.fields(BertConfig)}
        )
        self.causal = bool(causal)
        cfg = self.bert_config
        self.embeddings = BertEmbeddings.from_bert_config(
            cfg, dtype=self.dtype_policy, name="embeddings"
        )
        self.transformer_layers = [
            TransformerEncoderBlock.from_bert_config(
                cfg, dtype=self.dtype_policy, name=f"transformer_layer_{i}"
            )
            for i in range(cfg.num_layers)
        ]
        self.pooler = keras.layers.Dense(
            cfg.hidden_size,
            activation="tanh",
            kernel_initializer=truncated_normal(cfg.initializer_range),
            dtype=self.dtype_policy,
            name="pooler",
        )

    @classmethod
    def from_config_object(cls, config, **kwargs) -> "BertEncoder":
        """Builds an encoder from a `BertConfig`: the one helper for "this config, but ...".

        kwargs naming `BertConfig` fields override them (e.g. `vocab_size=len(vocab)`,
        `hidden_activation="gelu_approximate"`; a None value keeps the config's); the others
        (causal, name, dtype) pass to the constructor.
        """
        fields = {f.name for f in dataclasses.fields(config)}
        overrides = {k: kwargs.pop(k) for k in list(kwargs) if k in fields}
        config = dataclasses.replace(
            config, **{k: v for k, v in overrides.items() if v is not None}
        )
        return cls(**dataclasses.asdict(config), **kwargs)

    def build(self, input_shape=None):
        h = self.bert_config.hidden_size
        if not self.embeddings.built:
            self.embeddings.build()
        for layer in self.transformer_layers:
            if not layer.built:
                layer.build((None, None, h))
        if not self.pooler.built:
            self.pooler.build((None, h))
        self.built = True

    def call(self, inputs, training=None):
        if not isinstance(inputs, dict) or "input_word_ids" not in inputs:
            raise ValueError(
                "BertEncoder expects a dict with 'input_word_ids' (and "
                f"'input_mask', 'input_type_ids'); got {type(inputs).__name__}"
            )
        word_ids = tf.cast(inputs["input_word_ids"], tf.int32)
        mask = inputs.get("input_mask")
        mask = tf.ones_like(word_ids) if mask is None else tf.cast(mask, tf.int32)
        type_ids = inputs.get("input_type_ids")
        type_ids = tf.zeros_like(word_ids) if type_ids is None else tf.cast(type_ids, tf.int32)

        x = self.embeddings(word_ids, type_ids, training=training)
        # The blocks run on the rows layout [B*T, H] with B, T and the logit bias computed once
        # here: a dynamic-shape graph then holds no per-layer shape arithmetic (docs/
        # results/encoder.md, "rows layout").
        shape = tf.shape(x)
        bias = attention_bias(self._attention_mask(mask))
        rows = tf.reshape(x, [-1, self.bert_config.hidden_size])
        encoder_outputs = []
        for layer in self.transformer_layers:
            rows = layer.call_rows(rows, shape[0], shape[1], bias, training=training)
            encoder_outputs.append(tf.reshape(rows, shape))
        x = encoder_outputs[-1]
        pooled = self.pooler(x[:, 0, :])
        return {"sequence_output": x, "pooled_output": pooled, "encoder_outputs": encoder_outputs}

    def _attention_mask(self, input_mask):
        """[B, T] padding mask -> int32 mask, 1 = query i may attend to key j.

        [B, 1, T] (broadcast over queries) when not causal, [B, T, T] when causal: the
        attention layer broadcasts either against its [B, N, T, T] logits, and the smaller
        form saves building and converting a [B, T, T] tensor in every layer.
        """
        mask = tf.expand_dims(input_mask, 1)  # [B, 1, T]
        if self.causal:
            seq_length = tf.shape(input_mask)[1]
            lower = tf.linalg.band_part(tf.ones([seq_length, seq_length], tf.int32), -1, 0)
            mask = mask * lower[tf.newaxis]  # [B, T, T]
        return mask

    @property
    def word_embeddings(self):
        """The [vocab_size, hidden_size] word embedding variable (tied by the MLM head)."""
        return self.embeddings.word_embeddings.embeddings

    def get_config(self):
        config = super().get_config()
        config.update(dataclasses.asdict(self.bert_config))
        config["causal"] = self.causal
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)
