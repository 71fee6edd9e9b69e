"""The request handlers behind both front ends (gRPC and REST): tensorflow.serving protos in and out.

REST requests are converted to the same protos (as TF Serving's REST handler does), so both paths
share validation, batching, status codes and metrics.
"""

import logging
import threading
import time

import grpc
import numpy as np
from google.protobuf import any_pb2
from tensorflow.core.example import example_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_management_pb2,
    predict_pb2,
    prediction_log_pb2,
    regression_pb2,
)

from keras_bert import fileio
from serving.dispatch.batching import BatchScheduler, call_sized_outputs
from serving.models.model_manager import check_configs
from serving.models.servable import CLASSIFY_METHOD, REGRESS_METHOD
from serving.monitoring.request_logger import RequestLogger, check_logging_configs
from serving.wire import dtypes, errors, tensors, tfrecords

DEFAULT_SIGNATURE = "serving_default"
WARMUP_FILE = ("assets.extra", "tf_serving_warmup_requests")  # under the version directory
_LOG = logging.getLogger("serving")


def count_examples(input_proto) -> int:
    """How many tf.Examples a tensorflow.serving.Input holds, counted without reading them."""
    kind = input_proto.WhichOneof("kind")
    if kind in ("example_list", "example_list_with_context"):
        return len(getattr(input_proto, kind).examples)
    return 0


def input_examples(input_proto) -> list:
    """The tf.Examples of a tensorflow.serving.Input: its example_list, or each example of its
    example_list_with_context merged over the context (the example's features win)."""
    kind = input_proto.WhichOneof("kind")
    if kind == "example_list":
        return list(input_proto.example_list.examples)
    if kind != "example_list_with_context":
        return []
    examples = []
    for ex in input_proto.example_list_with_context.examples:
        merged = example_pb2.Example()
        merged.CopyFrom(input_proto.example_list_with_context.context)
        merged.MergeFrom(ex)
        examples.append(merged)
    return examples


def _version_of(spec):
    return spec.version.value if spec.HasField("version") else None


class InferenceService:
    """Implements Predict, Classify, Regress, MultiInference, GetModelMetadata, GetModelStatus.

    Args:
        manager: ModelManager. limits: tensors.Limits. batching: BatchingOptions or None (off).
        metrics: metrics.Metrics. request_log: request_logger.RequestLogger (None: one that logs
            nothing until `reload` gives it logging configs).
    Every public method takes and returns tensorflow.serving protos and raises errors.ServingError.
    """

    def __init__(self, manager, limits, batching, metrics, request_log=None):
        self.manager = manager
        self.limits = limits
        self.batching = batching
        self.metrics = metrics
        self.request_log = request_log if request_log is not None else RequestLogger(metrics)
        self._schedulers = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------ plumbing
    def observe(self, api, spec, fn, entrypoint="GRPC"):
        """Runs fn() -> (response, version), recording metrics (ours and TF Serving's) by outcome."""
        start, version, code = time.monotonic(), "", grpc.StatusCode.OK
        try:
            response, version = fn()
            return response
        except errors.ServingError as e:
            code = e.code
            raise
        except Exception as e:
            _LOG.exception("%s failed", api)
            code = grpc.StatusCode.INTERNAL
            raise errors.ServingError(code, f"{type(e).__name__}: {e}") from e
        finally:
            model = self._metric_model(spec)
            self.metrics.requests.labels(model, str(version or ""), api, code.name).inc()
            seconds = time.monotonic() - start
            self.metrics.latency.labels(model, api).observe(seconds)
            self.metrics.tf.record_request(model, api, entrypoint, code.name, seconds)

    def _metric_model(self, spec) -> str:
        """The `model` label of a request's metrics: its model's name when that model is
        configured, else "". A name a request sends is not a label: a client sending a new name
        each time would add a series to every metric per request (5,000 names grew the
        exposition from 29 KB to 8.7 MB), without bound. TF Serving counts only requests that
        reach a servable."""
        name = spec.name if spec is not None else ""
        if self.manager is not None and name not in self.manager.model_names():
            return ""
        return name

    def acquire(self, spec):
        """ModelManager.acquire for a ModelSpec (context manager yielding the Servable)."""
        if not spec.name:
            raise errors.invalid_argument("model_spec.name is required")
        return self.manager.acquire(spec.name, _version_of(spec), spec.version_label or None)

    def _run(self, servable, signature, inputs):
        """Calls the signature, through the batch scheduler when batching is on and the
        signature's output widths do not depend on the call (`batching.call_sized_outputs`)."""
        if (
            self.batching is None
            or any(np.ndim(v) == 0 for v in inputs.values())
            or len({np.shape(v)[0] for v in inputs.values()}) != 1
            or call_sized_outputs(signature)
        ):
            return servable.run(signature.key, inputs)
        key = (id(servable), signature.key)
        with self._lock:
            scheduler = self._schedulers.get(key)
            if scheduler is None:

                def on_batch(rows, padded, waits, bucket, name=servable.name, sig=signature.key):
                    self.metrics.batch_size.labels(name, sig).observe(rows)
                    self.metrics.padded_batch_size.labels(name, sig).observe(padded)
                    if bucket is not None:
                        self.metrics.bucket_batch_size.labels(name, sig, bucket).observe(rows)
                    self.metrics.tf.record_batch(waits, self.batching.thread_pool_name)

                scheduler = BatchScheduler(
                    lambda x, s=servable, k=signature.key: s.run(k, x), self.batching, on_batch
                )
                self._schedulers[key] = scheduler

                def close(key=key):
                    with self._lock:
                        self._schedulers.pop(key).stop()

                servable.add_closer(close)
        return scheduler.submit(inputs)

    def logged(self, kind, servable, request, response):
        """(response, version) of a successful request, after offering it to the request log
        (`kind`: the PredictionLog field, e.g. "predict_log")."""
        spec = request.tasks[0].model_spec if kind == "multi_inference_log" else request.model_spec
        self.request_log.log(
            kind, servable, request, response, spec.signature_name or DEFAULT_SIGNATURE
        )
        return response, servable.version

    def _answer(self, api, request, answer_on, entrypoint="GRPC"):
        """The response of a one-model request (Predict, Classify, Regress): `answer_on(servable,
        request)` on the servable its model_spec names, held for the call, offered to the request
        log as `<api>_log` and recorded in the metrics under `api`. One path for the three APIs, so
        that they acquire, log and count alike."""

        def run():
            with self.acquire(request.model_spec) as servable:
                return self.logged(f"{api}_log", servable, request, answer_on(servable, request))

        return self.observe(api, request.model_spec, run, entrypoint)

    @staticmethod
    def _response_spec(target, servable, signature_key):
        target.name = servable.name
        target.version.value = servable.version
        target.signature_name = signature_key

    # ------------------------------------------------------------ Predict
    def predict(self, request: predict_pb2.PredictRequest) -> predict_pb2.PredictResponse:
        return self._answer("predict", request, self.predict_on)

    def predict_on(self, servable, request):
        key = request.model_spec.signature_name or DEFAULT_SIGNATURE
        signature = servable.signature(key)
        unknown = sorted(set(request.output_filter) - set(signature.outputs))
        if unknown:
            raise errors.invalid_argument(
                f"output tensor alias not found in signature '{key}': {unknown}; outputs are "
                f"{sorted(signature.outputs)}"
            )
        if len(set(request.output_filter)) != len(request.output_filter):
            raise errors.invalid_argument(
                f"duplicate output_filter entries: {list(request.output_filter)}"
            )
        inputs = tensors.read_inputs(signature, request.inputs, self.limits)
        outputs = self._run(servable, signature, inputs)
        response = predict_pb2.PredictResponse()
        self._response_spec(response.model_spec, servable, key)
        for name in request.output_filter or outputs:
            response.outputs[name].CopyFrom(tensors.to_proto(outputs[name]))
        return response

    # ------------------------------------------------------------ Classify / Regress
    def _examples(self, input_proto):
        """The serialized tf.Examples of an Input, counted against the batch limit before any is
        merged or read."""
        count = count_examples(input_proto)
        if not count:
            raise errors.invalid_argument("empty batch: Input is empty (no tf.Example given)")
        tensors.check_batch_size(count, self.limits)
        examples = input_examples(input_proto)
        for row, ex in enumerate(examples):
            for name in self.limits.text_inputs:
                if name in ex.features.feature:
                    for value in ex.features.feature[name].bytes_list.value:
                        tensors.check_text_feature(name, value, self.limits, row)
        return np.array([ex.SerializeToString() for ex in examples], dtype=object)

    def _signature_for(self, servable, spec, method):
        key = spec.signature_name or DEFAULT_SIGNATURE
        signature = servable.signature(key)
        if signature.method_name != method:
            raise errors.invalid_argument(
                f"Expected {'classification' if method == CLASSIFY_METHOD else 'regression'} "
                f"signature method_name to be {method}. Was: {signature.method_name} (signature "
                f"'{key}' of model '{servable.name}')"
            )
        if len(signature.inputs) != 1:
            raise errors.invalid_argument(
                f"signature '{key}' must have exactly one input (serialized "
                f"tf.Example), has {sorted(signature.inputs)}"
            )
        return signature

    def _run_examples(self, servable, signature, serialized):
        ((alias, spec),) = signature.inputs.items()
        if spec.dtype != dtypes.string:
            raise errors.invalid_argument(
                f"signature '{signature.key}' input '{alias}' must be string"
            )
        return self._run(servable, signature, {alias: serialized})

    def _classification_result(self, servable, signature, serialized, result):
        outputs = self._run_examples(servable, signature, serialized)
        classes, scores = outputs.get("classes"), outputs.get("scores")
        if classes is None and scores is None:
            raise errors.invalid_argument(
                f"classification signature '{signature.key}' has neither "
                "'classes' nor 'scores' output"
            )
        batch = len(serialized)
        for i in range(batch):
            c = result.classifications.add()
            row_classes = None if classes is None else np.reshape(classes[i], [-1])
            row_scores = None if scores is None else np.reshape(scores[i], [-1])
            for j in range(len(row_classes if row_classes is not None else row_scores)):
                entry = c.classes.add()
                if row_classes is not None:
                    entry.label = row_classes[j].decode("utf-8", "replace")
                if row_scores is not None:
                    entry.score = float(row_scores[j])

    def _regression_result(self, servable, signature, serialized, result):
        outputs = self._run_examples(servable, signature, serialized)
        if "outputs" not in outputs:
            raise errors.invalid_argument(
                f"regression signature '{signature.key}' has no 'outputs'"
            )
        values = np.reshape(outputs["outputs"], [len(serialized), -1])
        if values.shape[1] != 1:
            raise errors.invalid_argument(
                f"regression output has shape {list(outputs['outputs'].shape)}"
                "; expected [batch] or [batch, 1]"
            )
        for v in values[:, 0]:
            result.regressions.add().value = float(v)

    def _examples_on(self, servable, request, method):
        """The response to a Classify (`method` CLASSIFY_METHOD) or Regress (REGRESS_METHOD)
        request of tf.Examples: the signature of that method the request names, its model_spec,
        and the result `_classification_result` or `_regression_result` writes. The two APIs
        differ only in those, so they share this path (and its checks)."""
        response_type, fill_result = {
            CLASSIFY_METHOD: (
                classification_pb2.ClassificationResponse,
                self._classification_result,
            ),
            REGRESS_METHOD: (regression_pb2.RegressionResponse, self._regression_result),
        }[method]
        signature = self._signature_for(servable, request.model_spec, method)
        serialized = self._examples(request.input)
        response = response_type()
        self._response_spec(response.model_spec, servable, signature.key)
        fill_result(servable, signature, serialized, response.result)
        return response

    def classify(self, request, entrypoint="GRPC"):
        return self._answer("classify", request, self.classify_on, entrypoint)

    def classify_on(self, servable, request):
        return self._examples_on(servable, request, CLASSIFY_METHOD)

    def regress(self, request, entrypoint="GRPC"):
        return self._answer("regress", request, self.regress_on, entrypoint)

    def regress_on(self, servable, request):
        return self._examples_on(servable, request, REGRESS_METHOD)

    def multi_inference(self, request):
        spec = request.tasks[0].model_spec if request.tasks else None

        def run():
            if not request.tasks:
                raise errors.invalid_argument("MultiInferenceRequest has no tasks")
            names = {t.model_spec.name for t in request.tasks}
            if len(names) != 1:
                raise errors.invalid_argument(
                    "All ModelSpecs in a MultiInferenceRequest must access "
                    f"the same model name; got {sorted(names)}"
                )
            keys = [t.model_spec.signature_name or DEFAULT_SIGNATURE for t in request.tasks]
            if len(set(keys)) != len(keys):
                raise errors.invalid_argument(f"Duplicate evaluation of signature: {keys}")
            with self.acquire(spec) as servable:
                response = self.multi_inference_on(servable, request)
                return self.logged("multi_inference_log", servable, request, response)

        return self.observe("multi_inference", spec, run)

    def multi_inference_on(self, servable, request):
        serialized = self._examples(request.input)
        response = inference_pb2.MultiInferenceResponse()
        for task in request.tasks:
            if task.method_name not in (CLASSIFY_METHOD, REGRESS_METHOD):
                raise errors.invalid_argument(
                    f"Unsupported signature method_name: {task.method_name}; "
                    f"use {CLASSIFY_METHOD} or {REGRESS_METHOD}"
                )
            signature = self._signature_for(servable, task.model_spec, task.method_name)
            result = response.results.add()
            self._response_spec(result.model_spec, servable, signature.key)
            if task.method_name == CLASSIFY_METHOD:
                self._classification_result(
                    servable, signature, serialized, result.classification_result
                )
            else:
                self._regression_result(servable, signature, serialized, result.regression_result)
        return response

    # ------------------------------------------------------------ metadata and status
    def get_model_metadata(self, request):
        def run():
            fields = list(request.metadata_field)
            if not fields:
                raise errors.invalid_argument(
                    "GetModelMetadataRequest must specify at least one "
                    "metadata_field (supported: signature_def)"
                )
            unsupported = sorted(set(fields) - {"signature_def"})
            if unsupported:
                raise errors.invalid_argument(
                    f"Metadata field(s) not supported: {unsupported} (supported: signature_def)"
                )
            with self.acquire(request.model_spec) as servable:
                response = get_model_metadata_pb2.GetModelMetadataResponse()
                response.model_spec.name = servable.name
                response.model_spec.version.value = servable.version
                sig_map = get_model_metadata_pb2.SignatureDefMap()
                for key, sig in servable.signatures.items():
                    sig_map.signature_def[key].CopyFrom(sig.proto)
                packed = any_pb2.Any()
                packed.Pack(sig_map)
                response.metadata["signature_def"].CopyFrom(packed)
                return response, servable.version

        return self.observe("get_model_metadata", request.model_spec, run)

    def get_model_status(self, request):
        def run():
            spec = request.model_spec
            if not spec.name:
                raise errors.invalid_argument("model_spec.name is required")
            version = _version_of(spec)
            if spec.version_label:
                with self.manager.acquire(spec.name, None, spec.version_label) as servable:
                    version = servable.version
            response = get_model_status_pb2.GetModelStatusResponse()
            response.model_version_status.extend(self.manager.status(spec.name, version))
            return response, version

        return self.observe("get_model_status", request.model_spec, run)

    def reload_config(self, request):
        """HandleReloadConfigRequest: a ModelServerConfig with a model_config_list replaces the
        served models (ModelManager.reload). Returns ReloadConfigResponse (status OK)."""

        def run():
            config = request.config
            if config.WhichOneof("config") != "model_config_list":
                raise errors.invalid_argument(
                    "ServerModelConfig type not supported by "
                    "HandleReloadConfigRequest. Only ModelConfigList is "
                    "currently supported"
                )
            self.reload(list(config.model_config_list.config))
            response = model_management_pb2.ReloadConfigResponse()
            response.status.error_code = 0
            return response, ""

        return self.observe("reload_config", None, run)

    def reload(self, model_configs):
        """Applies a new model config list: the served models (`ModelManager.reload`) and their
        request logging (`RequestLogger.update`, applied whatever the outcome of the loads).

        Raises:
            ServingError: INVALID_ARGUMENT for a bad config (nothing changed); what
                `ModelManager.reload` raises.
        """
        try:
            check_configs(model_configs)
            check_logging_configs(model_configs)
        except ValueError as e:
            raise errors.invalid_argument(str(e)) from None
        try:
            self.manager.reload(model_configs)
        finally:
            self.request_log.update(model_configs)

    # ------------------------------------------------------------ warmup
    def warmup(self, servable):
        """Replays assets.extra/tf_serving_warmup_requests (PredictionLog TFRecords) before a version
        serves, as TF Serving does; an error fails the load. Returns the number replayed."""
        path = fileio.join(servable.path, *WARMUP_FILE)
        if not fileio.exists(path):
            return 0
        count = 0
        for record in tfrecords.iter_records(path):
            log = prediction_log_pb2.PredictionLog.FromString(record)
            kind = log.WhichOneof("log_type")
            try:
                if kind == "predict_log":
                    self.predict_on(servable, log.predict_log.request)
                elif kind == "classify_log":
                    self.classify_on(servable, log.classify_log.request)
                elif kind == "regress_log":
                    self.regress_on(servable, log.regress_log.request)
                elif kind == "multi_inference_log":
                    self.multi_inference_on(servable, log.multi_inference_log.request)
                else:
                    raise errors.invalid_argument(f"unsupported warmup log type {kind}")
            except errors.ServingError as e:
                raise errors.ServingError(
                    e.code, f"warmup request {count} failed: {e.message}"
                ) from e
            count += 1
            self.metrics.warmup.labels(servable.name, str(servable.version)).inc()
        _LOG.info(
            "replayed %d warmup requests for %s version %d", count, servable.name, servable.version
        )
        return count
