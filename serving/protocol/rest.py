"""REST front end (TensorFlow Serving's REST API, https://www.tensorflow.org/tfx/serving/api_rest).

    GET  /v1/models/{name}[/versions/{v}|/labels/{l}]              model status
    GET  /v1/models/{name}[/versions/{v}|/labels/{l}]/metadata     signature defs
    POST /v1/models/{name}[/versions/{v}|/labels/{l}]:predict      {"instances": [...]} (row) or
                                                                   {"inputs": ...} (columnar)
    POST ...:classify | ...:regress                                {"examples": [...], "context": {}}
    GET  /monitoring/prometheus/metrics                            Prometheus text format

Paths, JSON decoding and encoding follow TF Serving's http_rest_api_handler.cc and
util/json_tensor.cc (serving/wire/json_tensor.py, serving/wire/json_writer.py): a /v1/ path that
matches no API is INVALID_ARGUMENT "Malformed request" (400). Errors are {"error": "..."} with the
HTTP status TensorFlow Serving maps the gRPC code to (400 INVALID_ARGUMENT / FAILED_PRECONDITION,
404 NOT_FOUND, 429 RESOURCE_EXHAUSTED, 501 UNIMPLEMENTED, 503 UNAVAILABLE, 500 INTERNAL); a body
over --max_request_bytes is 413, before or after gzip (`Content-Encoding: gzip` bodies are
decompressed as they arrive, as TF Serving's are), and a request Tornado cannot parse is a JSON
400 too. HEAD is answered as GET, without content. Status and metadata print every field TF Serving's JSON printer
prints, default-valued ones included.

The HTTP server is Tornado's (`RestServer`): one asyncio loop holds every connection, so an idle
or slow one costs a socket and no thread; the model calls run on a bounded pool of
`RestOptions.num_threads` threads; connections past `max_connections` are answered 503 and
closed; a request's header must arrive within `idle_timeout_s` of the connection's last response
(or of its start) and its body within `body_timeout_s`, both as whole deadlines, so a client that
trickles a byte at a time cannot hold a connection (Python's `http.server`, used before, held a
thread per connection and no deadline).
"""

import asyncio
import concurrent.futures
import dataclasses
import email.utils
import http
import json
import logging
import re
import socket
import threading
import time
import urllib.parse
import zlib

import tornado.httpserver
import tornado.iostream
import tornado.netutil
from google.protobuf import json_format
from tornado import httputil
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    predict_pb2,
    regression_pb2,
)

from serving.dispatch.inference import DEFAULT_SIGNATURE
from serving.wire import errors, json_tensor, json_writer, tensors

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
            return self._predict(match, doc, signature_name, json_tensor.holds_no_booleans(body))
        return self._classify_regress(match, doc, signature_name, verb)

    def _predict(self, match, doc, signature_name, plain_numbers=False):
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
                    plain_numbers,
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


@dataclasses.dataclass(frozen=True)
class RestOptions:
    """The REST port's bounds (the server's --rest_api_* flags).

    num_threads: threads answering requests (model calls, JSON conversion); more requests wait.
    max_connections: open connections held at once; more are answered 503 and closed.
    idle_timeout_s: a request's header must be whole within this many seconds of the connection
        opening or of its last response (a keep-alive connection idle longer is closed).
    body_timeout_s: a request's body must be whole within this many seconds of its header.
    max_header_bytes: the most bytes of a request line and headers.
    backlog: the listen queue of connections not yet accepted.
    """

    num_threads: int = 16
    max_connections: int = 2000
    idle_timeout_s: float = 60.0
    body_timeout_s: float = 60.0
    max_header_bytes: int = 64 << 10
    backlog: int = 1024


# A refused body of a well-framed request is read (and dropped) up to this many bytes, when the
# client did not ask to wait (Expect: 100-continue), so that it sees the answer instead of a
# connection reset; past it, and for a request whose framing is refused, the answer goes out at
# once, before any body byte, and the connection is closed (RFC 9110 section 10.1.1).
DRAIN_CAP_BYTES = 256 << 20
_JSON = "application/json"
# RFC 9110 section 8.6: Content-Length = 1*DIGIT, ASCII digits only (str.isdigit() takes "²").
_CONTENT_LENGTH = re.compile(r"[0-9]+")
# Content-Encoding values of a request body the port decompresses (TF Serving decompresses gzip:
# its http_server auto_uncompress_input defaults to true).
_GZIP = ("gzip", "x-gzip")


def _json_body(value) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


class _Responder:
    """What the REST port answers, apart from the HTTP transport: (status, body bytes, content
    type) for a method, a path and a body. Errors are JSON: a ServingError with its own HTTP
    status, anything else logged with its traceback and answered 500 (INTERNAL). HEAD is
    answered as GET (RFC 9110 section 9.3.2); the transport sends its headers alone."""

    def __init__(self, api: RestApi, metrics):
        self.api, self.metrics = api, metrics

    def answer(self, method, path, body):
        try:
            return self._answer("GET" if method == "HEAD" else method, path, body)
        except errors.ServingError as e:
            return e.http_status, _json_body({"error": e.message}), _JSON
        except Exception as e:
            _LOG.exception("REST %s failed", method)
            return 500, _json_body({"error": f"{type(e).__name__}: {e}"}), _JSON

    def _answer(self, method, path, body):
        if method == "GET" and path == METRICS_PATH:
            text, content_type = self.metrics.exposition()
            return 200, _json_body(text), content_type
        if not _is_api_path(path):
            return 404, _json_body({"error": f"Not Found: {method} {path}"}), _JSON
        if method == "GET":
            return 200, _json_body(self.api.get(path)), _JSON
        if method == "POST":
            return 200, _json_body(self.api.post(path, body)), _JSON
        raise errors.invalid_argument(f"Malformed request: {method} {path}")


class _Refusal(Exception):
    """A request refused at its header: `status`, `message`, and whether its framing is sound
    enough to read the body past (`framed`)."""

    def __init__(self, status: int, message: str, framed: bool = True):
        super().__init__(message)
        self.status, self.message, self.framed = status, message, framed


# RFC 9110 section 7.2 / RFC 3986: Host = uri-host [ ":" port ], a name, an IPv4 address or an
# IP literal in brackets.
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+;=%-]+)(:[0-9]*)?")


def _one_host(start_line, headers) -> bool:
    """Whether the request names its host as RFC 9112 section 3.2 asks: exactly one valid Host
    header on HTTP/1.1 (HTTP/1.0 needs none)."""
    if start_line.version != "HTTP/1.1":
        return True
    hosts = headers.get_list("Host")
    return len(hosts) == 1 and bool(_HOST.fullmatch(hosts[0].strip()))


def _target_path(target: str) -> str:
    """The path of a request target: origin form ("/v1/models/m?x") or absolute form
    ("http://host:8501/v1/models/m", which a server must accept: RFC 9112 section 3.2.2)."""
    if target[:7].lower() == "http://" or target[:8].lower() == "https://":
        return urllib.parse.urlsplit(target).path or "/"
    return target.split("?")[0]


def _declared_length(headers) -> int:
    """The body's length as the header declares it (Tornado's rule for a list of equal values,
    "5, 5", kept), refusing what is not ASCII digits.

    Raises:
        _Refusal: 411 without Content-Length (a chunked body included), 400 for a value that is
            not one number of ASCII digits or beside Transfer-Encoding.
    """
    length = headers.get("Content-Length")
    if length is not None and "Transfer-Encoding" in headers:
        raise _Refusal(
            400, "a request may not have both Transfer-Encoding and Content-Length", framed=False
        )
    codings = ",".join(headers.get_list("Transfer-Encoding")).split(",")
    if "Transfer-Encoding" in headers and codings[-1].strip().lower() != "chunked":
        raise _Refusal(  # RFC 9112 section 6.3: its length cannot be known
            400, "a Transfer-Encoding that does not end in chunked has no length", framed=False
        )
    if length is None:
        raise _Refusal(411, "Content-Length header is required", framed=False)
    pieces = set(re.split(r",[ \t]*", length.strip()))
    if len(pieces) != 1 or not _CONTENT_LENGTH.fullmatch(next(iter(pieces))):
        raise _Refusal(
            400, f"Content-Length must be one number of ASCII digits, got {length!r}", framed=False
        )
    return int(pieces.pop())


class _Inflater:
    """A gzip body decompressed as it arrives, never to more than `limit` bytes: the limit
    applies to what the body inflates to, so a small gzip of a huge body is refused after
    `limit` bytes of output, not inflated whole. Several gzip members follow one another."""

    def __init__(self, limit: int):
        self.limit, self.size = limit, 0
        self._gzip = zlib.decompressobj(16 + zlib.MAX_WBITS)

    def feed(self, data: bytes) -> bytes:
        """The bytes `data` inflates to. Raises _Refusal: 413 past the limit, 400 not gzip."""
        out = []
        try:
            while data:
                room = self.limit - self.size
                piece = self._gzip.decompress(data, room + 1)
                self.size += len(piece)
                if self.size > self.limit:
                    raise _Refusal(
                        413,
                        f"request body inflates past --max_request_bytes={self.limit} bytes "
                        "(Content-Encoding: gzip)",
                    )
                out.append(piece)
                data = self._gzip.unconsumed_tail
                if self._gzip.eof:  # the next member, if any
                    data = self._gzip.unused_data + data
                    if data:
                        self._gzip = zlib.decompressobj(16 + zlib.MAX_WBITS)
        except zlib.error as e:
            raise _Refusal(400, f"Content-Encoding gzip: the body is not gzip ({e})") from None
        return b"".join(out)

    def finish(self) -> None:
        """Raises _Refusal 400 when the body ended inside a gzip member."""
        if not self._gzip.eof:
            raise _Refusal(400, "Content-Encoding gzip: the body ends inside its gzip stream")


class _Exchange(httputil.HTTPMessageDelegate):
    """One request on a connection: its header, its body, then the answer from the thread pool.

    A request refused at its header (`_declared_length`, an unsupported Content-Encoding, a body
    declared past --max_request_bytes, no valid Host) is answered at once, before any 100
    Continue and any body byte. When the client waits for that answer (Expect: 100-continue),
    when its framing cannot be trusted, or when the body is past DRAIN_CAP_BYTES, the connection
    closes right after; otherwise the body the client goes on sending is read and dropped before
    the close, so the answer is not lost to a reset. Every refusal is JSON {"error": ...} and
    closes the connection."""

    def __init__(self, port, connection):
        self.port, self.connection = port, connection
        self.chunks, self.refusal, self.inflater, self.answered = [], None, None, None

    def headers_received(self, start_line, headers):
        self.method, self.path = start_line.method, _target_path(start_line.path)
        if headers.get("Expect", "").strip().lower() == "100-continue":
            headers["Expect"] = "100-continue"  # Tornado matches it case-sensitively
        has_body = "Content-Length" in headers or "Transfer-Encoding" in headers
        if self.method != "POST" and not has_body and _one_host(start_line, headers):
            return
        length = 0
        try:
            if not _one_host(start_line, headers):
                raise _Refusal(
                    400, "an HTTP/1.1 request needs exactly one valid Host header", framed=False
                )
            length = _declared_length(headers)
            coding = headers.get("Content-Encoding", "").strip().lower()
            if coding in _GZIP:
                self.inflater = _Inflater(self.port.max_request_bytes)
            elif coding not in ("", "identity"):
                raise _Refusal(
                    415,
                    f"Content-Encoding {headers['Content-Encoding']!r} is not supported: send "
                    "the body as gzip or identity",
                )
            if length > self.port.max_request_bytes:
                raise _Refusal(
                    413,
                    f"request body of {length} bytes exceeds "
                    f"--max_request_bytes={self.port.max_request_bytes}",
                )
        except _Refusal as refusal:
            self.refusal = refusal
            waits = "100-continue" in headers.get("Expect", "").lower()
            if waits or not refusal.framed or length > DRAIN_CAP_BYTES:
                # Tornado reads the body by these headers after this returns: without them it
                # reads none (and raises nothing of its own on a length it cannot parse).
                for name in ("Content-Length", "Transfer-Encoding"):
                    if name in headers:
                        del headers[name]
                self._write(refusal.status, _json_body({"error": refusal.message}), _JSON, True)
            else:  # answered now, the body read and dropped, then the connection closed
                self.connection.set_max_body_size(length)
                self.answered = self.connection.stream.write(
                    _plain_answer(refusal.status, refusal.message)
                )

    def data_received(self, chunk):
        if self.refusal is not None:
            return
        if self.inflater is not None:
            try:
                chunk = self.inflater.feed(chunk)
            except _Refusal as refusal:
                self.refusal, self.chunks = refusal, []
                return
        self.chunks.append(chunk)

    def finish(self):
        if self.answered is not None:  # a refusal sent at the header: its body is read now
            self.answered.add_done_callback(lambda _: self.connection.stream.close())
            return
        if self.refusal is None and self.inflater is not None:
            try:
                self.inflater.finish()
            except _Refusal as refusal:
                self.refusal = refusal
        asyncio.ensure_future(self._respond())

    def on_connection_close(self):
        self.chunks = []

    async def _respond(self):
        refusal = self.refusal
        if refusal is not None:
            status, body, content_type = refusal.status, {"error": refusal.message}, _JSON
            body = _json_body(body)
        else:
            status, body, content_type = await asyncio.get_running_loop().run_in_executor(
                self.port.pool,
                self.port.responder.answer,
                self.method,
                self.path,
                b"".join(self.chunks),
            )
        self.chunks = []
        self._write(status, body, content_type, close=refusal is not None)

    def _write(self, status, body, content_type, close):
        """The answer: headers, then the body unless the request is HEAD (whose answer has the
        GET answer's headers, Content-Length included, and no content)."""
        headers = httputil.HTTPHeaders(
            {
                "Content-Type": content_type,
                "Content-Length": str(len(body)),
                "Date": email.utils.formatdate(usegmt=True),
                "Server": "keras-bert-serving",
            }
        )
        if close:
            headers["Connection"] = "close"
        reason = http.HTTPStatus(status).phrase
        try:
            written = self.connection.write_headers(
                httputil.ResponseStartLine("HTTP/1.1", status, reason),
                headers,
                None if self.method == "HEAD" else body,
            )
            self.connection.finish()
        except Exception as e:  # the client went away while the answer was computed
            _LOG.debug("rest response not sent: %s", e)
            return
        if close:
            written.add_done_callback(lambda _: self.connection.stream.close())


# What Tornado itself writes for a request it cannot parse (a malformed request line or header,
# bad chunked framing), before any of ours sees it; the port answers that as JSON too.
_BARE_400 = b"HTTP/1.1 400 Bad Request\r\n\r\n"
_MALFORMED = "malformed HTTP request (request line, headers or chunked framing)"


def _plain_answer(status: int, error: str) -> bytes:
    """A whole JSON error answer that closes, as bytes, for the layers below `_Exchange`."""
    body = _json_body({"error": error})
    return (
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\nContent-Type: {_JSON}\r\n"
        f"Date: {email.utils.formatdate(usegmt=True)}\r\nConnection: close\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def _answer_unread_headers(stream, max_header_bytes: int) -> None:
    """Makes `stream` answer a request line or header section past `max_header_bytes` (414 or
    431, RFC 9112 section 3 / RFC 6585) before Tornado closes it: Tornado only closes."""
    close = stream.close

    def close_answering(exc_info=False):
        error = exc_info[1] if isinstance(exc_info, tuple) else exc_info
        if isinstance(error, tornado.iostream.UnsatisfiableReadError) and not stream.closed():
            read = bytes(getattr(stream, "_read_buffer", b"")[:max_header_bytes])
            status, what = (431, "header section") if b"\n" in read else (414, "request line")
            answer = _plain_answer(status, f"{what} longer than {max_header_bytes} bytes")
            try:
                stream.socket.send(answer)
            except (OSError, ValueError):  # gone, or a TLS socket mid-handshake
                pass
        close(exc_info)

    stream.close = close_answering


# A refused connection is kept open this long, at most LINGER_MAX of them at a time, so its
# client can read the 503 (past that, refused connections are closed at once).
LINGER_S = 1.0
LINGER_MAX = 256
_REFUSED_BODY = _json_body({"error": "too many open connections (--rest_api_max_connections)"})
_REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
    + f"Content-Length: {len(_REFUSED_BODY)}\r\n\r\n".encode()
    + _REFUSED_BODY
)


class _HTTPServer(tornado.httpserver.HTTPServer, httputil.HTTPServerConnectionDelegate):
    """Tornado's HTTP/1.1 server with a bound on open connections; each request goes to an
    `_Exchange`."""

    def initialize(self, port, **kwargs):
        super().initialize(self, **kwargs)
        self.port, self._lingering = port, 0

    def handle_stream(self, stream, address):
        if len(self._connections) >= self.port.options.max_connections:
            self.port.refused += 1
            if hasattr(stream, "wait_for_handshake") or self._lingering >= LINGER_MAX:
                stream.close()  # TLS: no handshake is spent on a connection that is refused
            else:
                asyncio.ensure_future(self._refuse(stream))
            return
        write = stream.write

        def json_errors(data, *args, **kwargs):
            if data == _BARE_400:
                data = _plain_answer(400, _MALFORMED)
            return write(data, *args, **kwargs)

        stream.write = json_errors
        _answer_unread_headers(stream, self.port.options.max_header_bytes)
        super().handle_stream(stream, address)

    async def _refuse(self, stream):
        """Answers 503, then reads (and drops) what the client still sends for up to LINGER_S
        before closing: closing with unread bytes resets the connection, and the client would
        lose the answer."""
        self._lingering += 1
        try:
            await stream.write(_REFUSED)
            stream.socket.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + LINGER_S
            while time.monotonic() < deadline:
                await asyncio.wait_for(
                    stream.read_bytes(1 << 16, partial=True), deadline - time.monotonic()
                )
        except Exception:  # the client closed (the usual end), reset, or the linger ran out
            pass
        finally:
            self._lingering -= 1
            stream.close()

    def start_request(self, server_conn, request_conn):
        return _Exchange(self.port, request_conn)


def raise_open_files_limit(connections: int):
    """Raises this process's soft limit on open files (often 1,024) towards its hard limit so
    that `connections` sockets fit beside the model files; logs when it cannot."""
    import resource  # Unix only; the server runs on Linux

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = connections + 256
    if soft == resource.RLIM_INFINITY or soft >= want:
        return
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    if new < want:
        _LOG.warning(
            "open files limited to %d (hard limit): fewer than --rest_api_max_connections=%d "
            "connections may be held",
            new,
            connections,
        )


class RestServer:
    """The REST API on (host, port), served by Tornado on an asyncio loop of its own thread.

    With `ssl_context` (`serving.ssl_config.rest_ssl_context`, from --ssl_config_file; our
    extension, TF Serving's REST port is plain HTTP) it speaks HTTPS only; handshakes run on the
    loop, within the header deadline, so a slow or refused client never holds up another.
    The port is bound in the constructor (errors then, and `port` known); `start` serves.
    """

    def __init__(self, host, port, api, metrics, ssl_context=None, options=RestOptions()):
        self.options, self.max_request_bytes = options, api.max_request_bytes
        # Tornado logs each malformed or timed-out connection at INFO: a client's problem.
        logging.getLogger("tornado.general").setLevel(logging.WARNING)
        self.responder = _Responder(api, metrics)
        self.refused = 0
        self._ssl_context = ssl_context
        self._sockets = tornado.netutil.bind_sockets(
            port, address=host, family=socket.AF_UNSPEC, backlog=options.backlog
        )
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=options.num_threads, thread_name_prefix="rest"
        )
        self._loop = self._stopping = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="rest", daemon=True)

    @property
    def port(self):
        return self._sockets[0].getsockname()[1]

    def start(self):
        self._thread.start()
        self._ready.wait()
        return self

    def _serve(self):
        asyncio.run(self._main())

    async def _main(self):
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        server = _HTTPServer(
            port=self,
            ssl_options=self._ssl_context,
            idle_connection_timeout=self.options.idle_timeout_s,
            body_timeout=self.options.body_timeout_s,
            max_header_size=self.options.max_header_bytes,
            max_body_size=self.max_request_bytes,
        )
        server.add_sockets(self._sockets)
        self._ready.set()
        await self._stopping.wait()
        server.stop()
        try:
            await asyncio.wait_for(server.close_all_connections(), 5)
        except asyncio.TimeoutError:
            pass

    def stop(self):
        if self._loop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join(timeout=10)
        else:
            for sock in self._sockets:
                sock.close()
        self.pool.shutdown(wait=False, cancel_futures=True)
