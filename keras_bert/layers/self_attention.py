"""Multi-head scaled dot-product self-attention (Vaswani et al. 2017, §3.2.2; BERT §3)."""

import contextlib
import math

import keras
import tensorflow as tf

from keras_bert.layers.arguments import ConfigFromArguments
from keras_bert.layers.dense import FlatDense
from keras_bert.layers.dropout import BertDropout, apply_keep_mask, keep_mask_16bit
from keras_bert.layers.initializers import truncated_normal

# Added to the logits of masked positions. google-research/bert modeling.py uses -10000: finite,
# representable in float16 and bfloat16, and exp() of it is exactly 0 in float32 (PITFALLS.md).
MASK_LOGIT = -10000.0


# Same-width integer types: a transpose moves bits, so it can run on these (see swap_axes_1_2).
_BITS = {tf.float32: tf.int32, tf.bfloat16: tf.int16, tf.float16: tf.int16}
_portable = False  # True inside `portable_attention()`


@contextlib.contextmanager
def portable_attention():
    """Within it, traced attention takes the form other runtimes run best, for graphs they run
    (the LiteRT export). Same function, other op order:

    - Heads move by a float `Transpose`, not by `swap_axes_1_2`'s integer-bit one, which is
      faster only in the TensorFlow runtime. LiteRT's XNNPACK delegate transposes float32 but not
      int32, which falls to TensorFlow Lite's reference kernel (18.6% of an int8 32 x 128 call
      of MiniLM-L6); and OpenVINO reads no BITCAST.
    - The 1 / sqrt(head size) scale multiplies the query's product, where the LiteRT converter
      folds it into the query's weights, not the [B, N, T, T] logits, a pass over the largest
      tensor of the block.

    docs/results/export-litert.md, "LiteRT's attention form". The switch is process-wide while the block
    runs; a function traced before it keeps the form it was traced with.
    """
    global _portable
    previous, _portable = _portable, True
    try:
        yield
    finally:
        _portable = previous


def _swap(x):
    itype = _BITS.get(x.dtype)
    if itype is None or _portable:
        return tf.transpose(x, [0, 2, 1, 3])
    return tf.bitcast(tf.transpose(tf.bitcast(x, itype), [0, 2, 1, 3]), x.dtype)


@tf.custom_gradient
def swap_axes_1_2(x):
    """[A, B, C, D] -> [A, C, B, D] (the head split and merge of attention), exactly.

    TensorFlow's oneDNN build rewrites a float `Transpose` into `_MklTranspose`, which builds a
    oneDNN reorder on every call: ~45 us for a [1, 32, 12, 32] tensor, 24 of them in a MiniLM-L6
    forward pass, ~20% of batch-1 latency (docs/results/encoder.md, "transposes"). The same
    permutation on the bits as a same-width integer tensor runs TensorFlow's own transpose
    kernel. The permutation is its own inverse, so the gradient is the same swap.
    """
    return _swap(x), _swap


def attention_bias(attention_mask):
    """int attention mask -> float32 additive logit bias, 0 where allowed, MASK_LOGIT elsewhere.

    Args:
        attention_mask: int Tensor [B, T, T] or [B, 1, T] (1 = may attend).

    Returns:
        float32 Tensor [B, 1, T or 1, T], broadcast over heads (and queries) by the logits.
    """
    mask = tf.cast(tf.expand_dims(attention_mask, 1), tf.float32)
    return (1.0 - mask) * MASK_LOGIT


def attention_probs(query, key, bias, scale):
    """softmax(query key^T * scale + bias) over keys, float32 [B, N, T, T] (logits and softmax in
    float32, safe under mixed precision)."""
    logits = tf.cast(tf.matmul(query, key, transpose_b=True), tf.float32)
    if scale != 1.0:  # 1.0: the query carries it (`portable_attention`)
        logits = logits * scale
    return tf.nn.softmax(logits + bias, axis=-1)


def attention_with_dropout(query, key, value, bias, scale, rate, seed):
    """`dropout_16bit(attention_probs(...), rate, seed) @ value`, whose gradient keeps only the
    float32 probabilities and the bool dropout mask (and the inputs).

    Differentiated op by op, a training step keeps, per block, the probabilities for the softmax
    and the dropped probabilities for the product, both [B, N, T, T] floats, beside the mask; here
    the dropped probabilities are rebuilt from the two in the backward pass. In a MiniLM-L6 SQuAD
    step (batch 32 x 384) that cut about 1 GB of the peak (docs/results/memory.md, "Where a
    fine-tuning step's memory goes"). The forward values, the mask and the gradients are those of
    the op-by-op form (up to float summation order). No gradient reaches `bias` (it comes from
    the integer mask).

    Args:
        query, key, value: Tensors [B, N, T, D], compute dtype.
        bias: float32 Tensor broadcastable to [B, N, T, T] (`attention_bias`).
        scale: float, the logit scale (1 / sqrt(D)).
        rate: float, the attention dropout rate (`dropout_16bit`'s range).
        seed: int32 Tensor [2], the mask's stateless seed (`BertDropout.next_seed`).

    Returns:
        Tensor [B, N, T, D], compute dtype.
    """

    @tf.custom_gradient
    def attend(q, k, v, b):
        probs = attention_probs(q, k, b, scale)
        keep = keep_mask_16bit(tf.shape(probs), rate, seed)
        context = tf.matmul(apply_keep_mask(tf.cast(probs, q.dtype), keep, rate), v)

        def grad(dcontext):
            with tf.control_dependencies([dcontext]):  # in the backward pass, not kept from before
                dropped = apply_keep_mask(tf.cast(probs, q.dtype), keep, rate)
            dvalue = tf.matmul(dropped, dcontext, transpose_a=True)
            dprobs = apply_keep_mask(tf.matmul(dcontext, v, transpose_b=True), keep, rate)
            dprobs = tf.cast(dprobs, tf.float32)
            dlogits = (dprobs - tf.reduce_sum(dprobs * probs, -1, keepdims=True)) * probs
            dlogits = tf.cast(dlogits * scale, q.dtype)
            dquery = tf.matmul(dlogits, k)
            dkey = tf.matmul(dlogits, q, transpose_a=True)
            return dquery, dkey, dvalue, None

        return context, grad

    return attend(query, key, value, bias)


def on_rows(rows_fn, inputs, attention_mask, training=None):
    """`rows_fn` (a layer's rows-layout method) applied to [B, T, H] `inputs`: the sequences are
    flattened to [B*T, H] rows, the int mask becomes the float32 bias (`attention_bias`), and the
    [B*T, H] result is reshaped back to [B, T, H]."""
    shape = tf.shape(inputs)
    rows = rows_fn(
        tf.reshape(inputs, [-1, inputs.shape[-1] or shape[-1]]),
        shape[0],
        shape[1],
        attention_bias(attention_mask),
        training=training,
    )
    return tf.reshape(rows, shape)


@keras.saving.register_keras_serializable(package="keras_bert")
class BertSelfAttention(ConfigFromArguments, keras.layers.Layer):
    """Query/key/value projections, masked softmax attention, heads concatenated.

    The output projection is the owning block's `attention_output` Dense, as in
    google-research/bert (`attention/output/dense`).

    Args:
        hidden_size: int. Model width H = num_heads * head size D.
        num_heads: int. Number of heads N.
        attention_dropout_rate: float in [0, 1). Dropout on the attention probabilities.
        initializer_range: float. Stddev of the truncated-normal initializer.

    Call args:
        inputs: Tensor [batch_size, seq_length, hidden_size].
        attention_mask: int32 Tensor [batch_size, seq_length, seq_length], or
            [batch_size, 1, seq_length] to broadcast over queries; 1 = may attend.
        training: bool. Dropout acts only when True.

    Returns:
        Tensor [batch_size, seq_length, hidden_size], the concatenated heads, compute dtype.
        Logits and softmax are computed in float32.

    Raises:
        ValueError: if hidden_size is not divisible by num_heads.
    """

    def __init__(
        self, hidden_size, num_heads, attention_dropout_rate=0.1, initializer_range=0.02, **kwargs
    ):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(
                f"hidden_size={hidden_size} must be divisible by num_heads={num_heads}"
            )
        self.keep_arguments(locals())

    def build(self, input_shape=None):
        for name in ("query", "key", "value"):
            dense = FlatDense(
                self.hidden_size,
                kernel_initializer=truncated_normal(self.initializer_range),
                dtype=self.dtype_policy,
                name=name,
            )
            dense.build((None, None, self.hidden_size))
            setattr(self, name, dense)
        self.dropout = BertDropout(
            self.attention_dropout_rate, dtype=self.dtype_policy, name="dropout"
        )
        self.built = True

    def call(self, inputs, attention_mask, training=None):
        return on_rows(self.attend_rows, inputs, attention_mask, training=training)

    def attend_rows(self, rows, batch_size, seq_length, bias, training=None):
        """Attention on the rows layout the encoder keeps between blocks.

        Args:
            rows: Tensor [batch_size * seq_length, hidden_size], compute dtype, the sequences
                one after another (row b * seq_length + t is token t of sequence b).
            batch_size, seq_length: int32 scalars B and T.
            bias: float32 Tensor broadcastable to [B, N, T, T], from `attention_bias`.
            training: bool. Dropout acts only when True.

        Returns:
            Tensor [batch_size * seq_length, hidden_size], compute dtype.

        The encoder computes B, T and the bias once for all its blocks, so a dynamic-shape graph
        (a SavedModel signature, a `tf.function` traced with `reduce_retracing`) holds no
        per-layer shape arithmetic; the dense products are plain 2-D MatMuls.
        """
        # B = batch, T = seq_length, N = num_heads, D = head size, H = N * D.
        head_size = self.hidden_size // self.num_heads
        heads = tf.stack([batch_size, seq_length, self.num_heads, head_size])

        def split_heads(x):  # [B*T, H] -> [B, N, T, D]
            return swap_axes_1_2(tf.reshape(x, heads))

        scale = 1.0 / math.sqrt(head_size)
        query = self.query(rows)
        if _portable:
            query, scale = query * tf.cast(scale, query.dtype), 1.0
        query = split_heads(query)
        key = split_heads(self.key(rows))
        value = split_heads(self.value(rows))
        if training and self.dropout.rate > 0 and self.dropout.draws_16bit:
            context = attention_with_dropout(
                query, key, value, bias, scale, self.dropout.rate, self.dropout.next_seed()
            )
        else:
            probs = tf.cast(attention_probs(query, key, bias, scale), self.compute_dtype)
            context = tf.matmul(self.dropout(probs, training=training), value)
        context = swap_axes_1_2(context)  # [B, T, N, D]
        return tf.reshape(context, [-1, self.hidden_size])
