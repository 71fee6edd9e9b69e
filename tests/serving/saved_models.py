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
import os

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
        return {"probabilities": probabilities, "label_ids": label_ids,
                "labels": tf.gather(self.labels, label_ids)}

    @tf.function(input_signature=[_STR, _STR])
    def serving_default(self, text, text_b):
        return self._head(_text_features(text, text_b))

    @tf.function(input_signature=[_IDS, _IDS, _IDS])
    def encoded(self, input_word_ids, input_mask, input_type_ids):
        ids = tf.cast(input_word_ids * input_mask, tf.float32)
        features = tf.stack([tf.reduce_sum(ids, 1) / 1000.0, tf.cast(tf.reduce_sum(input_mask, 1), tf.float32) / 10.0,
                             tf.cast(tf.reduce_sum(input_type_ids, 1), tf.float32) / 10.0,
                             tf.ones_like(ids[:, 0])], axis=1)
        return self._head(features)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def classification(self, inputs):
        parsed = tf.io.parse_example(inputs, {"text": tf.io.FixedLenFeature([], tf.string),
                                              "text_b": tf.io.FixedLenFeature([], tf.string, "")})
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
    pb = os.path.join(path, "saved_model.pb")
    proto = saved_model_pb2.SavedModel()
    with open(pb, "rb") as f:
        proto.ParseFromString(f.read())
    for key, method in methods.items():
        proto.meta_graphs[0].signature_def[key].method_name = method
    with open(pb, "wb") as f:
        f.write(proto.SerializeToString())


def write_warmup(path, requests):
    """assets.extra/tf_serving_warmup_requests: PredictionLog records, one per PredictRequest."""
    os.makedirs(os.path.join(path, "assets.extra"), exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(path, "assets.extra", "tf_serving_warmup_requests")) as w:
        for request in requests:
            w.write(prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)).SerializeToString())


def build_classifier(path, seed=0, warmup=True):
    module = _Classifier(seed)
    tf.saved_model.save(module, path, signatures={
        "serving_default": module.serving_default, "encoded": module.encoded,
        "classification": module.classification})
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
    tf.saved_model.save(module, path, signatures={"serving_default": module.serving_default,
                                                  "regression": module.regression})
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
