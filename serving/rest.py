"""REST front end (TensorFlow Serving's REST API, https://www.tensorflow.org/tfx/serving/api_rest).

    GET  /v1/models/{name}[/versions/{v}|/labels/{l}]              model status
    GET  /v1/models/{name}[/versions/{v}|/labels/{l}]/metadata     signature defs
    POST /v1/models/{name}[/versions/{v}|/labels/{l}]:predict      {"instances": [...]} (row) or
                                                                   {"inputs": ...} (columnar)
    POST ...:classify | ...:regress                                {"examples": [...], "context": {}}
    GET  /monitoring/prometheus/metrics                            Prometheus text format

Paths, JSON decoding and encoding follow TF Serving's http_rest_api_handler.cc and
util/json_tensor.cc (serving/json_tensor.py, serving/json_writer.py): a /v1/ path that matches no
API is INVALID_ARGUMENT "Malformed request" (400). Errors are {"error": "..."} with the HTTP status
TensorFlow Serving maps the gRPC code to (400 INVALID_ARGUMENT / FAILED_PRECONDITION, 404 NOT_FOUND,
429 RESOURCE_EXHAUSTED, 501 UNIMPLEMENTED, 503 UNAVAILABLE, 500 INTERNAL); a body over
--max_request_bytes is 413. Status and metadata print every field TF Serving's JSON printer prints,
default-valued ones included.
"""

import http.server
import json
import logging
import re
import ssl
import sys
import threading

import grpc
from google.protobuf import json_format
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    predict_pb2,
    regression_pb2,
)

from serving import errors, json_tensor, json_writer, tensors
from serving.inference import DEFAULT_SIGNATURE

_LOG = logging.getLogger("serving")
# http_rest_api_handler.cc: prediction_api_regex_ and modelstatus_api_regex_ (case-insensitive).
_PREDICT_ROUTE = re.compile(
    r"/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>\d+)|/labels/(?P<label>[^/:]+))?"
    r":(?P<verb>classify|regress|predict)",
    re.IGNORECASE,
)
_STATUS_ROUTE = re.compile(
    r"/v1/models(?:/(?P<name>[^/:]+))?(?:/versions/(?P<version>\d+)|/labels/(?P<label>[^/:]+))?"
    r"(?P<metadata>/metadata)?",
    re.IGNORECASE,
)
METRICS_PATH = "/monitoring/prometheus/metrics"
_PRINT = dict(preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


# ------------------------------------------------------------------ handlers
def _version(match):
    """The path's version as int64; INVALID_ARGUMENT when it does not fit (SimpleAtoi)."""
    text = match["version"]
    if text is None:
        return None
    if int(text) >= 2**63:
        raise errors.invalid_argument(f"Failed to convert version: {text} to numeric.")
    return int(text)


class RestApi:
    """Turns REST calls into InferenceService calls. `get`/`post` return JSON text (or a dict)."""

    def __init__(self, service, max_request_bytes):
        self.service = service
        self.max_request_bytes = max_request_bytes

    @staticmethod
    def _spec(target, match, signature_name=""):
        target.name = match["name"]
        version = _version(match)
        if version is not None:
            target.version.value = version
        if match["label"] is not None:
            target.version_label = match["label"]
        if signature_name:
            target.signature_name = signature_name

    def get(self, path):
        match = _STATUS_ROUTE.fullmatch(path)
        if not match:
            raise errors.invalid_argument(f"Malformed request: GET {path}")
        if not match["name"]:
            raise errors.invalid_argument("Missing model name in request.")
        if match["metadata"]:
            request = get_model_metadata_pb2.GetModelMetadataRequest(
                metadata_field=["signature_def"]
            )
            self._spec(request.model_spec, match)
            response = self.service.get_model_metadata(request)
            sig_map = get_model_metadata_pb2.SignatureDefMap()
            response.metadata["signature_def"].Unpack(sig_map)
            return {
                "model_spec": json_format.MessageToDict(response.model_spec, **_PRINT),
                "metadata": {"signature_def": json_format.MessageToDict(sig_map, **_PRINT)},
            }
        request = get_model_status_pb2.GetModelStatusRequest()
        self._spec(request.model_spec, match)
        return json_format.MessageToDict(self.service.get_model_status(request), **_PRINT)

    def post(self, path, body: bytes) -> str:
        match = _PREDICT_ROUTE.fullmatch(path)
        if not match:
            raise errors.invalid_argument(f"Malformed request: POST {path}")
        _version(match)
        doc = json_tensor.parse_json(body)
        signature_name = json_tensor.signature_name(doc)
        verb = match["verb"].lower()
        if verb == "predict":
            return self._predict(match, doc, signature_name)
        return self._classify_regress(match, doc, signature_name, verb)

    def _predict(self, match, doc, signature_name):
        request = predict_pb2.PredictRequest()
        self._spec(request.model_spec, match, signature_name)
        key, row = signature_name or DEFAULT_SIGNATURE, [False]

        def run():
            with self.service.acquire(request.model_spec) as servable:
                signature = servable.signature(key)
                dtypes = {alias: spec.dtype for alias, spec in signature.inputs.items()}
                arrays, fmt = json_tensor.predict_inputs(
                    doc,
                    dtypes,
                    lambda alias, shape: tensors.check_shape(
                        signature, alias, shape, self.service.limits
                    ),
                )
                row[0] = fmt == json_tensor.ROW
                for alias, array in arrays.items():
                    request.inputs[alias].CopyFrom(tensors.to_proto(array))
                response = self.service.predict_on(servable, request)
                return self.service.logged("predict_log", servable, request, response)

        response = self.service.observe("predict", request.model_spec, run, "REST")
        outputs = {k: tensors.to_numpy(v, k) for k, v in response.outputs.items()}
        return json_writer.predict_json(outputs, row[0])

    def _classify_regress(self, match, doc, signature_name, verb):
        request = (
            classification_pb2.ClassificationRequest()
            if verb == "classify"
            else regression_pb2.RegressionRequest()
        )
        self._spec(request.model_spec, match, signature_name)
        json_tensor.fill_examples(
            doc,
            request.input,
            verb,
            lambda count: tensors.check_batch_size(count, self.service.limits),
        )
        if verb == "classify":
            return json_writer.classification_json(self.service.classify(request, "REST").result)
        return json_writer.regression_json(self.service.regress(request, "REST").result)


def _is_api_path(path):
    """TF Serving routes `(?i)/v1/.*` to its REST handler; anything else is 404 from the HTTP server."""
    return path[:4].lower() == "/v1/"


def make_handler(api: RestApi, metrics):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "keras-bert-serving"
        timeout = 120  # seconds of socket inactivity before a connection is dropped

        def setup(self):
            super().setup()  # applies `timeout` to the socket, the handshake included
            if isinstance(self.connection, ssl.SSLSocket):
                self.connection.do_handshake()

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
            if isinstance(body, str):
                body = body.encode("utf-8")
            elif not isinstance(body, bytes):
                body = json.dumps(body, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, error):
            self._send(
                error.http_status if isinstance(error, errors.ServingError) else 500,
                {"error": error.message if isinstance(error, errors.ServingError) else str(error)},
            )

        def _answered(self, verb, handle):
            """Runs `handle()`, which sends the response, and answers its errors as JSON: a
            ServingError with its own HTTP status, anything else logged with its traceback and
            answered 500 (INTERNAL), the same for GET and POST."""
            try:
                return handle()
            except errors.ServingError as e:
                return self._error(e)
            except Exception as e:
                _LOG.exception("REST %s failed", verb)
                return self._error(
                    errors.ServingError(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
                )

        def do_GET(self):
            return self._answered("GET", self._get)

        def _get(self):
            path = self.path.split("?")[0]
            if path == METRICS_PATH:
                body, content_type = metrics.exposition()
                return self._send(200, body, content_type)
            if not _is_api_path(path):
                return self._send(404, {"error": f"Not Found: GET {path}"})
            return self._send(200, api.get(path))

        def do_POST(self):
            return self._answered("POST", self._post)

        def _post(self):
            length = self.headers.get("Content-Length")
            if length is None:
                self.close_connection = True
                return self._send(411, {"error": "Content-Length header is required"})
            length = int(length)
            if length > api.max_request_bytes:
                self.close_connection = True
                self._drain(length)
                return self._send(
                    413,
                    {
                        "error": f"request body of {length} bytes exceeds "
                        f"--max_request_bytes={api.max_request_bytes}"
                    },
                )
            body, path = self.rfile.read(length), self.path.split("?")[0]
            if not _is_api_path(path):
                return self._send(404, {"error": f"Not Found: POST {path}"})
            return self._send(200, api.post(path, body))

    return Handler


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A refused TLS handshake (no or untrusted client certificate, a plain-HTTP caller) or a
        # client that went away is the client's problem: one debug line, not a traceback.
        error = sys.exc_info()[1]
        if isinstance(error, (ssl.SSLError, ConnectionError, TimeoutError)):
            _LOG.debug("rest connection from %s dropped: %s", client_address, error)
            return
        super().handle_error(request, client_address)


class RestServer:
    """ThreadingHTTPServer on (host, port) serving the REST API in a daemon thread.

    With `ssl_context` (`serving.ssl_config.rest_ssl_context`, from --ssl_config_file; our
    extension, TF Serving's REST port is plain HTTP) it speaks HTTPS only. The TLS handshake runs
    in the connection's own thread (`Handler.setup`), under the handler's socket timeout, so a
    slow or refused client never holds up the accept loop.
    """

    def __init__(self, host, port, api, metrics, ssl_context=None):
        handler = make_handler(api, metrics)
        self._httpd = _HTTPServer((host, port), handler)
        if ssl_context is not None:
            self._httpd.socket = ssl_context.wrap_socket(
                self._httpd.socket, server_side=True, do_handshake_on_connect=False
            )
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
