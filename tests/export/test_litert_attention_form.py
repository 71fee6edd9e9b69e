"""The attention form of the LiteRT flatbuffer (`portable_attention`): ops XNNPACK runs, the scale
folded into the query's product, and the same values as the TensorFlow form."""

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from keras_bert.layers.self_attention import portable_attention
from keras_bert.saved_model import litert
from tests.tiny import NO_DROPOUT, tiny_encoder

LAYERS = 2
IDS = {
    "input_word_ids": np.array([[2, 7, 9, 11, 3, 0], [2, 5, 3, 0, 0, 0]], np.int32),
    "input_mask": np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], np.int32),
    "input_type_ids": np.array([[0, 0, 0, 1, 1, 0], [0, 0, 0, 0, 0, 0]], np.int32),
}


@pytest.fixture(scope="module")
def encoder():
    model = tiny_encoder(num_layers=LAYERS, **NO_DROPOUT)
    model(IDS)
    return model


def graph_ops(encoder) -> list:
    @tf.function(
        input_signature=[{k: tf.TensorSpec([None, None], tf.int32) for k in IDS}],
    )
    def forward(ids):
        return encoder(ids)["sequence_output"]

    return [op.type for op in forward.get_concrete_function().graph.get_operations()]


def flatbuffer_ops(content: bytes) -> list[dict]:
    """The flatbuffer's own ops (no delegate applied), with their operand dtypes and producers."""
    interpreter = Interpreter(
        model_content=content,
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    return interpreter._get_ops_details()


def test_the_tensorflow_form_moves_heads_as_integer_bits_and_the_portable_form_does_not(encoder):
    # Four head moves a block (split query, key, value; merge the context), two Bitcasts each.
    assert graph_ops(encoder).count("Bitcast") == 8 * LAYERS
    with portable_attention():
        ops = graph_ops(encoder)
    assert ops.count("Bitcast") == 0 and ops.count("Transpose") == 4 * LAYERS
    assert graph_ops(encoder).count("Bitcast") == 8 * LAYERS  # the form is back after the block


def test_the_portable_form_gives_the_tensorflow_forms_values(encoder):
    want = encoder(IDS)["sequence_output"].numpy()

    @tf.function
    def forward(ids):
        return encoder(ids)["sequence_output"]

    with portable_attention():
        forward.get_concrete_function({k: tf.constant(v) for k, v in IDS.items()})
    got = forward({k: tf.constant(v) for k, v in IDS.items()}).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


@pytest.mark.parametrize("quantize", ["float32", "int8"])
def test_litert_flatbuffer_transposes_float_and_feeds_the_logits_straight_to_the_mask(
    encoder, quantize
):
    ops = flatbuffer_ops(litert.convert_encoder(encoder, quantize))
    names = [op["op_name"] for op in ops]
    assert "BITCAST" not in names
    transposes = [op for op in ops if op["op_name"] == "TRANSPOSE"]
    assert len(transposes) == 4 * LAYERS
    assert all(op["operand_types"][0] is np.float32 for op in transposes)
    # softmax(query' key^T + bias): query' carries the scale, so the logits of each block's first
    # BATCH_MATMUL go into the mask's ADD and then the SOFTMAX, with no MUL between.
    producer = {int(t): op for op in ops for t in op["outputs"]}
    softmaxes = [op for op in ops if op["op_name"] == "SOFTMAX"]
    assert len(softmaxes) == LAYERS
    for softmax in softmaxes:
        add = producer[int(softmax["inputs"][0])]
        assert add["op_name"] == "ADD"
        assert {producer[int(t)]["op_name"] for t in add["inputs"] if int(t) in producer} >= {
            "BATCH_MATMUL"
        }


def test_litert_flatbuffer_gives_the_encoders_values(encoder):
    interpreter = Interpreter(model_content=litert.convert_encoder(encoder))
    inputs = interpreter.get_input_details()
    for detail in inputs:
        interpreter.resize_tensor_input(detail["index"], IDS["input_word_ids"].shape)
    interpreter.allocate_tensors()
    for detail in inputs:
        (name,) = [k for k in IDS if k in detail["name"]]
        interpreter.set_tensor(detail["index"], IDS[name])
    interpreter.invoke()
    got = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    want = encoder(IDS)["sequence_output"].numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)
