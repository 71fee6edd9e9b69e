"""REST front end (TensorFlow Serving's REST API, https://www.tensorflow.org/tfx/serving/api_rest).

    GET  /v1/models/{name}[/versions/{v}|/labels/{l}]              model status
    GET  /v1/models/{name}[/versions/{v}|/labels/{l}]/metadata     signature defs
    POST /v1/models/{name}[/versions/{v}|/labels/{l}]:predict      {"instances": [...]} (row) or
                                                                   {"inputs": ...} (columnar)
    POST ...:classify | ...:regress                                {"examples": [...], "context": {}}
    GET  /monitoring/prometheus/metrics                            Prometheus text format

Bytes travel as {"b64": "..."}; string outputs are UTF-8 text unless the output alias ends in
`_bytes` or is not valid UTF-8, then {"b64": ...}. Errors are {"error": "..."} with the HTTP status
TensorFlow Serving maps the gRPC code to (400 INVALID_ARGUMENT / FAILED_PRECONDITION, 404 NOT_FOUND,
429 RESOURCE_EXHAUSTED, 503 UNAVAILABLE, 500 INTERNAL); a body over --max_request_bytes is 413.
"""
import base64
import http.server
import json
import logging
import re
import threading

import grpc
import numpy as np
import tensorflow as tf
from google.protobuf import json_format
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2, get_model_status_pb2,
                                     predict_pb2, regression_pb2)

from serving import errors, tensors
from serving.inference import DEFAULT_SIGNATURE

_LOG = logging.getLogger("serving")
_ROUTE = re.compile(r"^/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>-?\d+)|/labels/(?P<label>[^/:]+))?"
                    r"(?:(?P<metadata>/metadata)|:(?P<verb>predict|classify|regress))?/?$")
METRICS_PATH = "/monitoring/prometheus/metrics"


# ------------------------------------------------------------------ JSON <-> numpy
def _shape(value, alias):
    """Shape of a rectangular nested list; INVALID_ARGUMENT if ragged."""
    if not isinstance(value, list):
        return []
    if not value:
        return [0]
    inner = [_shape(v, alias) for v in value]
    if any(s != inner[0] for s in inner):
        raise errors.invalid_argument(f"input '{alias}' is ragged: all rows must have the same shape")
    return [len(value)] + inner[0]


def _to_bytes(x, alias):
    if isinstance(x, str):
        try:
            return x.encode("utf-8")
        except UnicodeEncodeError as e:
            raise errors.invalid_argument(f"input '{alias}' holds a string that is not valid Unicode "
                                          f"({e.reason}); send raw bytes as {{\"b64\": ...}}") from None
    if isinstance(x, dict) and set(x) == {"b64"} and isinstance(x["b64"], str):
        try:
            return base64.b64decode(x["b64"], validate=True)
        except ValueError as e:
            raise errors.invalid_argument(f"input '{alias}' has invalid base64: {e}") from None
    raise errors.invalid_argument(f"input '{alias}' expects strings (or {{\"b64\": ...}}), got "
                                  f"{type(x).__name__} {json.dumps(x)[:50]}")


def json_to_array(value, spec, alias) -> np.ndarray:
    """A JSON value -> numpy for signature input `spec` (dtype taken from the signature)."""
    shape = _shape(value, alias)
    flat = []

    def walk(v):
        if isinstance(v, list):
            for x in v:
                walk(x)
        else:
            flat.append(v)
    walk(value)
    if spec.dtype == tf.string:
        out = np.empty(len(flat), dtype=object)
        for i, x in enumerate(flat):
            out[i] = _to_bytes(x, alias)
        return out.reshape(shape)
    if any(isinstance(x, (str, dict, bool)) or x is None for x in flat):
        bad = next(x for x in flat if isinstance(x, (str, dict, bool)) or x is None)
        raise errors.invalid_argument(f"input '{alias}' expects dtype {spec.dtype.name} but got "
                                      f"{type(bad).__name__} {json.dumps(bad)[:50]}")
    if spec.dtype.is_integer and any(isinstance(x, float) for x in flat):
        raise errors.invalid_argument(f"input '{alias}' expects dtype {spec.dtype.name} but got a "
                                      "floating point number")
    if spec.dtype == tf.bool:
        return np.array(flat, dtype=bool).reshape(shape)
    wide = np.int64 if spec.dtype.is_integer else np.float64
    try:
        array = np.array(flat, dtype=wide).reshape(shape)
    except OverflowError as e:
        raise errors.invalid_argument(f"input '{alias}': {e}") from None
    if spec.dtype.is_integer:
        return array if spec.dtype == tf.int64 else tensors.cast(alias, array, spec)
    return array.astype(spec.dtype.as_numpy_dtype)


def _json_value(array, alias):
    array = np.asarray(array)
    if array.dtype == object or array.dtype.kind == "S":
        def conv(x):
            if alias.endswith("_bytes"):
                return {"b64": base64.b64encode(x).decode("ascii")}
            try:
                return x.decode("utf-8")
            except UnicodeDecodeError:
                return {"b64": base64.b64encode(x).decode("ascii")}
        return np.vectorize(conv, otypes=[object])(array).tolist() if array.size else array.tolist()
    return array.tolist()


def _feature(value, name):
    values = value if isinstance(value, list) else [value]
    feature = feature_pb2.Feature()
    if all(isinstance(v, (str, dict)) for v in values):
        feature.bytes_list.value.extend(_to_bytes(v, name) for v in values)
    elif all(isinstance(v, (int, bool)) for v in values):
        feature.int64_list.value.extend(int(v) for v in values)
    elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        feature.float_list.value.extend(float(v) for v in values)
    else:
        raise errors.invalid_argument(f"feature '{name}' must hold only strings, only integers or "
                                      "only numbers")
    return feature


def _example(obj, what):
    if not isinstance(obj, dict):
        raise errors.invalid_argument(f"{what} must be a JSON object of features")
    example = example_pb2.Example()
    for name, value in obj.items():
        example.features.feature[name].CopyFrom(_feature(value, name))
    return example


def _no_extra(names, signature):
    extra = sorted(set(names) - set(signature.inputs))
    if extra:
        raise errors.invalid_argument(
            f"input size does not match signature '{signature.key}': Sent extra: {extra}; inputs are "
            f"{sorted(signature.inputs)}")


# ------------------------------------------------------------------ handlers
class RestApi:
    """Turns REST calls into InferenceService calls. Each method returns (http_status, json_obj)."""

    def __init__(self, service, max_request_bytes):
        self.service = service
        self.max_request_bytes = max_request_bytes

    def _spec(self, target, match, signature_name=""):
        target.name = match["name"]
        if match["version"] is not None:
            target.version.value = int(match["version"])
        if match["label"] is not None:
            target.version_label = match["label"]
        if signature_name:
            target.signature_name = signature_name

    def get(self, path):
        match = _ROUTE.match(path)
        if not match or match["verb"]:
            raise errors.not_found(f"Malformed request: GET {path}")
        if match["metadata"]:
            request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
            self._spec(request.model_spec, match)
            response = self.service.get_model_metadata(request)
            sig_map = get_model_metadata_pb2.SignatureDefMap()
            response.metadata["signature_def"].Unpack(sig_map)
            return {"model_spec": json_format.MessageToDict(response.model_spec, preserving_proto_field_name=True,
                                                         always_print_fields_with_no_presence=True),
                    "metadata": {"signature_def": json_format.MessageToDict(
                        sig_map, preserving_proto_field_name=True)}}
        request = get_model_status_pb2.GetModelStatusRequest()
        self._spec(request.model_spec, match)
        response = self.service.get_model_status(request)
        return json_format.MessageToDict(response, preserving_proto_field_name=True,
                                         always_print_fields_with_no_presence=True)

    def post(self, path, body: bytes):
        match = _ROUTE.match(path)
        if not match or not match["verb"]:
            raise errors.not_found(f"Malformed request: POST {path}")
        try:
            obj = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise errors.invalid_argument(f"JSON parse error: {e}") from None
        if not isinstance(obj, dict):
            raise errors.invalid_argument("request body must be a JSON object")
        signature_name = obj.get("signature_name", "")
        if not isinstance(signature_name, str):
            raise errors.invalid_argument("'signature_name' must be a string")
        if match["verb"] == "predict":
            return self._predict(match, obj, signature_name)
        return self._classify_regress(match, obj, signature_name, match["verb"])

    def _predict(self, match, obj, signature_name):
        row = "instances" in obj
        if row == ("inputs" in obj):
            raise errors.invalid_argument("request must contain exactly one of 'instances' (row "
                                          "format) or 'inputs' (columnar format)")
        request = predict_pb2.PredictRequest()
        self._spec(request.model_spec, match, signature_name)
        key = signature_name or DEFAULT_SIGNATURE

        def run():
            with self.service.manager.acquire(match["name"], int(match["version"]) if match["version"] else None,
                                              match["label"]) as servable:
                signature = servable.signature(key)
                arrays = self._row(obj["instances"], signature) if row else self._columnar(obj["inputs"], signature)
                for alias, array in arrays.items():
                    request.inputs[alias].CopyFrom(tf.make_tensor_proto(array))
                return self.service.predict_on(servable, request), servable.version
        response = self.service.observe("predict", request.model_spec, run)
        outputs = {k: tf.make_ndarray(v) for k, v in response.outputs.items()}
        if not row:
            if len(outputs) == 1:
                (alias, value), = outputs.items()
                return {"outputs": _json_value(value, alias)}
            return {"outputs": {k: _json_value(v, k) for k, v in outputs.items()}}
        batch = {np.shape(v)[0] if np.ndim(v) else None for v in outputs.values()}
        if len(batch) != 1 or None in batch:
            raise errors.invalid_argument("row format ('instances') needs every output to have the same "
                                          "batch dimension; use the columnar 'inputs' format")
        n = batch.pop()
        values = {k: _json_value(v, k) for k, v in outputs.items()}
        if len(values) == 1:
            (alias, value), = values.items()
            return {"predictions": value}
        return {"predictions": [{k: v[i] for k, v in values.items()} for i in range(n)]}

    @staticmethod
    def _row(instances, signature):
        if not isinstance(instances, list):
            raise errors.invalid_argument("'instances' must be a list (one entry per example)")
        names = sorted(signature.inputs)
        if not instances:
            return {k: json_to_array([], signature.inputs[k], k) for k in names}
        if all(isinstance(x, dict) and "b64" not in x for x in instances):
            keys = set(instances[0])
            if any(set(x) != keys for x in instances):
                raise errors.invalid_argument("all 'instances' must have the same named inputs")
            _no_extra(keys, signature)
            return {k: json_to_array([x[k] for x in instances], signature.inputs[k], k) for k in keys}
        if len(names) != 1:
            raise errors.invalid_argument(f"signature '{signature.key}' has inputs {names}: each "
                                          "instance must be an object naming them")
        return {names[0]: json_to_array(instances, signature.inputs[names[0]], names[0])}

    @staticmethod
    def _columnar(inputs, signature):
        names = sorted(signature.inputs)
        if isinstance(inputs, dict) and "b64" not in inputs:
            _no_extra(inputs, signature)
            return {k: json_to_array(v, signature.inputs[k], k) for k, v in inputs.items()}
        if len(names) != 1:
            raise errors.invalid_argument(f"signature '{signature.key}' has inputs {names}: 'inputs' "
                                          "must be an object naming them")
        return {names[0]: json_to_array(inputs, signature.inputs[names[0]], names[0])}

    def _classify_regress(self, match, obj, signature_name, verb):
        examples = obj.get("examples")
        if not isinstance(examples, list):
            raise errors.invalid_argument("'examples' must be a list of JSON objects")
        request = (classification_pb2.ClassificationRequest() if verb == "classify"
                   else regression_pb2.RegressionRequest())
        self._spec(request.model_spec, match, signature_name)
        parsed = [_example(x, f"examples[{i}]") for i, x in enumerate(examples)]
        if "context" in obj:
            request.input.example_list_with_context.context.CopyFrom(_example(obj["context"], "context"))
            request.input.example_list_with_context.examples.extend(parsed)
        else:
            request.input.example_list.examples.extend(parsed)
        if verb == "classify":
            response = self.service.classify(request)
            return {"results": [[[c.label, c.score] for c in row.classes]
                                for row in response.result.classifications]}
        response = self.service.regress(request)
        return {"results": [r.value for r in response.result.regressions]}


def make_handler(api: RestApi, metrics):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "keras-bert-serving"
        timeout = 120  # seconds of socket inactivity before a connection is dropped

        def log_message(self, fmt, *args):  # quiet: one debug line per request
            _LOG.debug("rest %s", fmt % args)

        def _drain(self, length, cap=256 << 20):
            # Read (and drop) an oversized body so the client sees the 413 instead of a broken pipe.
            left = min(length, cap)
            while left > 0:
                chunk = self.rfile.read(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)

        def _send(self, status, body, content_type="application/json"):
            if not isinstance(body, bytes):
                body = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, error):
            self._send(error.http_status if isinstance(error, errors.ServingError) else 500,
                       {"error": error.message if isinstance(error, errors.ServingError) else str(error)})

        def do_GET(self):
            try:
                if self.path.split("?")[0] == METRICS_PATH:
                    body, content_type = metrics.exposition()
                    return self._send(200, body, content_type)
                return self._send(200, api.get(self.path.split("?")[0]))
            except errors.ServingError as e:
                return self._error(e)
            except Exception as e:  # noqa: BLE001
                _LOG.exception("REST GET failed")
                return self._error(errors.ServingError(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}"))

        def do_POST(self):
            try:
                length = self.headers.get("Content-Length")
                if length is None:
                    self.close_connection = True
                    return self._send(411, {"error": "Content-Length header is required"})
                length = int(length)
                if length > api.max_request_bytes:
                    self.close_connection = True
                    self._drain(length)
                    return self._send(413, {"error": f"request body of {length} bytes exceeds "
                                                     f"--max_request_bytes={api.max_request_bytes}"})
                body = self.rfile.read(length)
                return self._send(200, api.post(self.path.split("?")[0], body))
            except errors.ServingError as e:
                return self._error(e)
            except Exception as e:  # noqa: BLE001
                _LOG.exception("REST POST failed")
                return self._error(errors.ServingError(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}"))
    return Handler


class RestServer:
    """ThreadingHTTPServer on (host, port) serving the REST API in a daemon thread."""

    def __init__(self, host, port, api, metrics):
        self._httpd = http.server.ThreadingHTTPServer((host, port), make_handler(api, metrics))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="rest", daemon=True)

    @property
    def port(self):
        return self._httpd.server_address[1]

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._httpd.shutdown()
        self._httpd.server_close()
