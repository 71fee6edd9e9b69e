"""Small deterministic SavedModels that follow the SPEC section 7 signature contract.

Built from core TF ops only (hash / length features, a fixed linear layer held in a tf.Variable), so
the serving tests need nothing from keras_bert or export/. Rows are independent, so batched and
unbatched calls give bit-identical outputs.

Classifier signatures:
    serving_default(text [B] string, text_b [B] string) -> probabilities [B,C] float32,
        label_ids [B] int64, labels [B] string
    encoded(input_word_ids, input_mask, input_type_ids int32 [B,T]) -> the same outputs
    classification(inputs [B] serialized tf.Example, features text/text_b)  (tensorflow/serving/classify)
        -> classes [B,C] string, scores [B,C] float32
Regressor signatures:
    serving_default(text [B] string) -> scores [B] float32
    regression(inputs [B] serialized tf.Example)  (tensorflow/serving/regress) -> outputs [B] float32
"""

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

LABELS = ("negative", "neutral", "positive")
_STR = tf.TensorSpec([None], tf.string)
_IDS = tf.TensorSpec([None, None], tf.int32)


def _weights(seed, shape):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _text_features(text, text_b):
    h = tf.cast(tf.strings.to_hash_bucket_fast(text, 1009), tf.float32) / 1009.0
    n = tf.cast(tf.strings.length(text), tf.float32) / 10.0
    hb = tf.cast(tf.strings.to_hash_bucket_fast(text_b, 1013), tf.float32) / 1013.0
    return tf.stack([h, n, hb, tf.ones_like(h)], axis=1)  # [B, 4]


class _Classifier(tf.Module):
    def __init__(self, seed):
        super().__init__()
        self.kernel = tf.Variable(_weights(seed, [4, len(LABELS)]))
        self.labels = tf.constant(LABELS)

    def _head(self, features):
        probabilities = tf.nn.softmax(tf.matmul(features, self.kernel), axis=-1)  # [B, C]
        label_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int64)  # [B]
        return {
            "probabilities": probabilities,
            "label_ids": label_ids,
            "labels": tf.gather(self.labels, label_ids),
        }

    @tf.function(input_signature=[_STR, _STR])
    def serving_default(self, text, text_b):
        return self._head(_text_features(text, text_b))

    @tf.function(input_signature=[_IDS, _IDS, _IDS])
    def encoded(self, input_word_ids, input_mask, input_type_ids):
        ids = tf.cast(input_word_ids * input_mask, tf.float32)
        features = tf.stack(
            [
                tf.reduce_sum(ids, 1) / 1000.0,
                tf.cast(tf.reduce_sum(input_mask, 1), tf.float32) / 10.0,
                tf.cast(tf.reduce_sum(input_type_ids, 1), tf.float32) / 10.0,
                tf.ones_like(ids[:, 0]),
            ],
            axis=1,
        )
        return self._head(features)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def classification(self, inputs):
        parsed = tf.io.parse_example(
            inputs,
            {
                "text": tf.io.FixedLenFeature([], tf.string),
                "text_b": tf.io.FixedLenFeature([], tf.string, ""),
            },
        )
        out = self._head(_text_features(parsed["text"], parsed["text_b"]))
        batch = tf.shape(inputs)[0]
        return {"classes": tf.tile(self.labels[None], [batch, 1]), "scores": out["probabilities"]}


class _Regressor(tf.Module):
    def __init__(self, seed):
        super().__init__()
        self.kernel = tf.Variable(_weights(seed, [4]))

    def _score(self, text):
        return tf.reduce_sum(_text_features(text, text) * self.kernel, axis=1)  # [B]

    @tf.function(input_signature=[_STR])
    def serving_default(self, text):
        return {"scores": self._score(text)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def regression(self, inputs):
        parsed = tf.io.parse_example(inputs, {"text": tf.io.FixedLenFeature([], tf.string)})
        return {"outputs": self._score(parsed["text"])}


def _set_method_names(path, methods):
    """tf.saved_model.save writes every signature as tensorflow/serving/predict; Classify/Regress need
    their own method names, so set them in saved_model.pb (what TF2 exporters for TF Serving do)."""
    pb = f"{path}/saved_model.pb"  # `path` may be a URI (ram://): tf.io.gfile, not open()
    proto = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(pb, "rb") as f:
        proto.ParseFromString(f.read())
    for key, method in methods.items():
        proto.meta_graphs[0].signature_def[key].method_name = method
    tf.io.gfile.remove(pb)  # ram:// appends to an existing file opened for writing
    with tf.io.gfile.GFile(pb, "wb") as f:
        f.write(proto.SerializeToString())


def write_warmup(path, requests):
    """assets.extra/tf_serving_warmup_requests: PredictionLog records, one per PredictRequest."""
    tf.io.gfile.makedirs(f"{path}/assets.extra")
    with tf.io.TFRecordWriter(f"{path}/assets.extra/tf_serving_warmup_requests") as w:
        for request in requests:
            w.write(
                prediction_log_pb2.PredictionLog(
                    predict_log=prediction_log_pb2.PredictLog(request=request)
                ).SerializeToString()
            )


def build_classifier(path, seed=0, warmup=True):
    module = _Classifier(seed)
    tf.saved_model.save(
        module,
        path,
        signatures={
            "serving_default": module.serving_default,
            "encoded": module.encoded,
            "classification": module.classification,
        },
    )
    _set_method_names(path, {"classification": "tensorflow/serving/classify"})
    if warmup:
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "warmup"
        request.inputs["text"].CopyFrom(tf.make_tensor_proto([b"warm", b"up"]))
        request.inputs["text_b"].CopyFrom(tf.make_tensor_proto([b"", b"x"]))
        write_warmup(path, [request, request])
    return path


def build_regressor(path, seed=1):
    module = _Regressor(seed)
    tf.saved_model.save(
        module,
        path,
        signatures={"serving_default": module.serving_default, "regression": module.regression},
    )
    _set_method_names(path, {"regression": "tensorflow/serving/regress"})
    return path


def build_custom_op_model(path):
    """A model whose graph needs a tensorflow-text op (CaseFoldUTF8)."""
    import tensorflow_text as text

    class _M(tf.Module):
        @tf.function(input_signature=[_STR])
        def serving_default(self, text_in):
            return {"folded": text.case_fold_utf8(text_in)}

    m = _M()
    tf.saved_model.save(m, path, signatures={"serving_default": m.serving_default})
    return path


# ------------------------------------------------------------------ REST conformance models
# Signatures named after the tensor maps of TF Serving's json_tensor_test.cc: every input has
# unknown rank and comes back unchanged as the output of the same name, so a Predict response shows
# exactly the tensor the server decoded from JSON.
ECHO_SIGNATURES = {
    "int32": {"default": tf.int32},
    "float": {"default": tf.float32},
    "double": {"default": tf.float64},
    "string": {"default": tf.string},
    "predict_images": {"default": tf.int32},
    "multi": {
        "int_tensor": tf.int32,
        "str_tensor": tf.string,
        "float_tensor": tf.float32,
        "dbl_tensor": tf.float64,
    },
    "int_tensor": {"int_tensor": tf.int32},
    "str_tensor": {"str_tensor": tf.string},
    "float_tensor": {"float_tensor": tf.float32},
    "str_tensor_bytes": {"str_tensor_bytes": tf.string},
    "int_and_str": {"int_tensor": tf.int32, "str_tensor": tf.string},
    "int_str_bin": {"int_tensor": tf.int32, "str_tensor": tf.string, "bin_tensor": tf.string},
    "five": {
        "int_tensor": tf.int32,
        "str_tensor": tf.string,
        "float_tensor": tf.float32,
        "double_scalar_tensor": tf.float64,
        "str_tensor_bytes": tf.string,
    },
    **{
        f"{d.name}": {"default": d}
        for d in (tf.int8, tf.int16, tf.uint8, tf.int64, tf.uint32, tf.uint64, tf.bool, tf.float16)
    },
}


def _echo_function(dtypes):
    names = sorted(dtypes)

    def echo(*args):
        return {name: tf.identity(arg) for name, arg in zip(names, args)}

    return tf.function(
        echo, input_signature=[tf.TensorSpec(None, dtypes[n], name=n) for n in names]
    )


def build_echo(path):
    """A model whose ECHO_SIGNATURES return their inputs, plus three whose outputs JSON cannot
    carry in the row format or at all: `complex` (x float -> complex64 x), `scalar_output`
    (x float -> total, a scalar) and `uneven_outputs` (x [B] float -> y = x [B], extra [B+1])."""
    module = tf.Module()
    signatures = {key: _echo_function(dtypes) for key, dtypes in ECHO_SIGNATURES.items()}
    x = tf.TensorSpec([None], tf.float32, name="x")
    signatures["complex"] = tf.function(lambda x: {"z": tf.complex(x, 0.0)}, input_signature=[x])
    signatures["scalar_output"] = tf.function(
        lambda x: {"total": tf.reduce_sum(x)}, input_signature=[x]
    )
    signatures["uneven_outputs"] = tf.function(
        lambda x: {"y": x, "extra": tf.zeros([tf.size(x) + 1])}, input_signature=[x]
    )
    tf.saved_model.save(module, path, signatures=signatures)
    return path


def build_half_plus_two(path):
    """TF Serving's test model `half_plus_two` (y = 0.5 x + 2), the one its REST handler tests use:
    serving_default (x float, any shape -> y), classify_x_to_y (tf.Example feature x -> scores
    [B,1]), regress_x_to_y (-> outputs [B,1]); plus classify_echo (feature `scores` [3] -> classes
    car/bike/bus with those scores) and regress_echo (feature `value` -> outputs), which return what
    they are sent so result layouts can be compared with TF Serving's json_tensor_test.cc."""
    module = tf.Module()
    examples = tf.TensorSpec([None], tf.string, name="inputs")

    def parse(serialized, name, size=1):
        return tf.io.parse_example(serialized, {name: tf.io.FixedLenFeature([size], tf.float32)})[
            name
        ]

    signatures = {
        "serving_default": tf.function(
            lambda x: {"y": 0.5 * x + 2.0},
            input_signature=[tf.TensorSpec(None, tf.float32, name="x")],
        ),
        "classify_x_to_y": tf.function(
            lambda inputs: {"scores": 0.5 * parse(inputs, "x") + 2.0}, input_signature=[examples]
        ),
        "regress_x_to_y": tf.function(
            lambda inputs: {"outputs": 0.5 * parse(inputs, "x") + 2.0}, input_signature=[examples]
        ),
        "classify_echo": tf.function(
            lambda inputs: {
                "classes": tf.tile(tf.constant([["car", "bike", "bus"]]), [tf.shape(inputs)[0], 1]),
                "scores": parse(inputs, "scores", 3),
            },
            input_signature=[examples],
        ),
        "regress_echo": tf.function(
            lambda inputs: {"outputs": parse(inputs, "value")}, input_signature=[examples]
        ),
    }
    tf.saved_model.save(module, path, signatures=signatures)
    _set_method_names(
        path,
        {
            "classify_x_to_y": "tensorflow/serving/classify",
            "classify_echo": "tensorflow/serving/classify",
            "regress_x_to_y": "tensorflow/serving/regress",
            "regress_echo": "tensorflow/serving/regress",
        },
    )
    return path
