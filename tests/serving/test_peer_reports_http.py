"""Peer reports against the HTTP layer of the REST port, each turned into its expected value.

Every test talks to the shared server over a raw socket and names the report it comes from
(owner/repo#number) and the RFC 9110 / RFC 9112 rule behind the expected value. A test marked
xfail(strict=True) is a fault of ours that the report shows; its reason says what we answer now.
"""

import email.utils
import http.client
import json
import socket
import time

import pytest

from tests.fuzz.serving_targets import ReplyBytes as _Bytes
from tests.fuzz.serving_targets import raw_request
from tests.fuzz.serving_targets import until_closed as _until_closed
from tests.serving.conftest import MAX_REQUEST_BYTES

PREDICT = "/v1/models/reg:predict"
STATUS = "/v1/models/reg"
GOOD = json.dumps({"instances": ["peer reports"]}).encode()
MAX_HEADER_BYTES = 64 << 10  # RestOptions.max_header_bytes, the server's default
WAIT_S = 30
# How long a connection that should close may stay open after its last response.
CLOSE_WAIT_S = 10


@pytest.fixture(scope="module")
def server(shared_server):
    return shared_server


def _connect(server, timeout=WAIT_S):
    return socket.create_connection(("127.0.0.1", server.rest_port), timeout=timeout)


class _Live:
    """A socket's one buffered file, read response after response (keep-alive, pipelining)."""

    def __init__(self, sock):
        self._file = sock.makefile("rb")

    def makefile(self, *args, **kwargs):
        return self

    def readline(self, *args):
        return self._file.readline(*args)

    def read(self, *args):
        return self._file.read(*args)

    def readinto(self, buffer):
        return self._file.readinto(buffer)

    def close(self):
        pass


def _next(stream, method="GET"):
    """The next response on `stream`: (status, headers, body bytes)."""
    response = http.client.HTTPResponse(stream, method=method)
    response.begin()
    return response.status, response.headers, response.read()


def _answers(server, request: bytes, count: int, methods=None):
    """Sends `request` (possibly several pipelined requests) and parses `count` responses as
    they come: ([(status, headers, body)], whether the port then closed having sent nothing
    else). A connection still open CLOSE_WAIT_S after the last response counts as not closed."""
    methods = methods or ["GET"] * count
    with _connect(server) as sock:
        sock.sendall(request)
        stream = _Live(sock)
        got = [_next(stream, methods[i]) for i in range(count)]
        sock.settimeout(CLOSE_WAIT_S)
        try:
            rest = stream.read()
        except (TimeoutError, socket.timeout):
            return got, False
        except ConnectionResetError:
            rest = b""
    return got, rest == b""


def _json_error(body: bytes):
    """The body as the port's error JSON, {"error": <str>}, or the assertion fails."""
    doc = json.loads(body)
    assert list(doc) == ["error"] and isinstance(doc["error"], str), doc
    return doc["error"]


def _status_body(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=WAIT_S)
    try:
        connection.request("GET", STATUS)
        response = connection.getresponse()
        assert response.status == 200
        return response.read()
    finally:
        connection.close()


# ------------------------------------------------------------------------------------ Host
@pytest.mark.parametrize(
    "host_lines",
    [b"", b"Host: a.example\r\nHost: b.example\r\n", b"Host: http//1.1.1.1:80\r\n"],
    ids=["missing", "twice", "invalid"],
)
def test_a_http11_request_without_one_valid_host_is_a_400(server, host_lines):
    """tornadoweb/tornado#3468 (and #3510 for an invalid value): RFC 9112 section 3.2, a server
    MUST answer 400 to an HTTP/1.1 request that lacks Host, has two Host lines, or an invalid
    Host value. Expected: 400, our JSON error, connection closed."""
    request = b"GET " + STATUS.encode() + b" HTTP/1.1\r\n" + host_lines + b"\r\n"
    [(status, _, body)], closed = _answers(server, request, 1)
    assert (status, closed) == (400, True)
    _json_error(body)


def test_a_http10_request_needs_no_host(server):
    """vert-x3/vertx-web#2640: HTTP/1.0 has no Host requirement, so a request without it is
    served. Expected: 200 with the status body, then the connection closes (HTTP/1.0)."""
    want = _status_body(server)
    [(status, _, body)], closed = _answers(
        server, b"GET " + STATUS.encode() + b" HTTP/1.0\r\n\r\n", 1
    )
    assert (status, body, closed) == (200, want, True)


# ---------------------------------------------------------------------------------- Expect
@pytest.mark.parametrize(
    "expect",
    [
        "100-continue",
        "100-Continue",
        "100-CONTINUE",
    ],
)
def test_expect_100_continue_is_matched_case_insensitively(server, expect):
    """python-hyper/h11#38 (and hyperium/hyper#2709: Java's client sends '100-Continue'):
    RFC 9110 section 10.1.1, the Expect field value is case-insensitive. Expected: an interim
    'HTTP/1.1 100' before any body byte, then the final 200 with predictions once it is sent."""
    with _connect(server, timeout=10) as sock:
        sock.sendall(
            raw_request("POST", PREDICT, headers=[("Expect", expect)]).replace(
                b"Content-Length: 0", f"Content-Length: {len(GOOD)}".encode()
            )
        )
        interim = b""
        while b"\r\n\r\n" not in interim:
            chunk = sock.recv(1 << 16)  # a socket.timeout here: no 100 Continue came
            assert chunk, interim
            interim += chunk
        head, _, rest = interim.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 100 ") and rest == b"", interim
        sock.sendall(GOOD)
        status, _, body = _next(_Live(sock), "POST")
    assert status == 200 and list(json.loads(body)) == ["predictions"]


# ------------------------------------------------------------------------ header sizes
def test_a_header_section_past_the_limit_is_a_431(server):
    """benoitc/gunicorn#2878 (PR #2879): a header section too large is 431 Request Header
    Fields Too Large (RFC 6585 section 5), not a silent close or a 400. Expected: 431, our JSON
    error, connection closed."""
    request = raw_request("GET", STATUS, headers=[("X-Big", "a" * (MAX_HEADER_BYTES + 1024))])
    [(status, _, body)], closed = _answers(server, request, 1)
    assert (status, closed) == (431, True)
    _json_error(body)


def test_a_request_target_past_the_limit_is_a_414(server):
    """tornadoweb/tornado#2632 ('Huge URLs return empty response instead of 414'; also
    benoitc/gunicorn#2487): RFC 9112 section 3, a server that receives a request-target longer
    than it wishes to parse MUST answer 414 URI Too Long. Expected: 414, JSON error, closed."""
    request = raw_request("GET", STATUS + "?x=" + "a" * (MAX_HEADER_BYTES + 1024))
    [(status, _, body)], closed = _answers(server, request, 1)
    assert (status, closed) == (414, True)
    _json_error(body)


def test_a_header_section_just_under_the_limit_is_served(server):
    """benoitc/gunicorn#1704 (a large Authorization header refused whatever the limit): a header
    section under the documented 64 KiB is served. Expected: 200 with the status body."""
    want = _status_body(server)
    request = raw_request(
        "GET", STATUS, headers=[("Authorization", "a" * (MAX_HEADER_BYTES - 512))]
    )
    request = request.replace(b"Host: fuzz\r\n", b"Host: fuzz\r\nConnection: close\r\n")
    [(status, _, body)], closed = _answers(server, request, 1)
    assert (status, body, closed) == (200, want, True)


# ------------------------------------------------------------------------- Date header
@pytest.mark.parametrize("path, want_status", [(STATUS, 200), ("/nothing/here", 404)])
def test_every_2xx_and_4xx_answer_carries_a_date(server, path, want_status):
    """elastic/elasticsearch#157382 (and oven-sh/bun#1028): RFC 9110 section 6.6.1, an origin
    server with a clock MUST send Date in every 2xx, 3xx and 4xx response. Expected: a Date
    header in IMF-fixdate form within a minute of now."""
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=WAIT_S)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
    finally:
        connection.close()
    assert response.status == want_status
    date = response.headers["Date"]
    assert date is not None and date.endswith(" GMT"), date
    assert abs(email.utils.parsedate_to_datetime(date).timestamp() - time.time()) < 60


# ------------------------------------------------------------------- request-target form
def test_an_absolute_form_request_target_is_served_as_its_path(server):
    """drogonframework/drogon#1718 (and zoxy-io/zoxy#233): RFC 9112 section 3.2.2, a server
    MUST accept the absolute-form request-target. Expected: the same 200 and body as the
    origin-form GET."""
    want = _status_body(server)
    target = f"http://127.0.0.1:{server.rest_port}{STATUS}"
    request = raw_request("GET", target).replace(
        b"Host: fuzz\r\n", b"Host: x\r\nConnection: close\r\n"
    )
    [(status, _, body)], closed = _answers(server, request, 1)
    assert (status, body, closed) == (200, want, True)


# -------------------------------------------------------------------- keep-alive, framing
def test_pipelined_requests_are_answered_in_order(server):
    """guzba/mummy#142 (responses sent in completion order) and yhirose/cpp-httplib#1271
    (pipelined requests in one segment dropped): RFC 9112 section 9.3.2, responses MUST come in
    the order of the requests. Expected: a slow predict, a fast status and a 404 sent in one
    write come back as 200 predictions, 200 status, 404, then the close the last one asked."""
    want = _status_body(server)
    request = (
        raw_request("POST", PREDICT, GOOD)
        + raw_request("GET", STATUS)
        + raw_request("GET", "/nothing/here", headers=[("Connection", "close")])
    )
    got, clean = _answers(server, request, 3, ["POST", "GET", "GET"])
    assert [status for status, _, _ in got] == [200, 200, 404]
    assert list(json.loads(got[0][2])) == ["predictions"]
    assert got[1][2] == want
    assert _json_error(got[2][2]) == "Not Found: GET /nothing/here"
    assert got[2][1]["Connection"] == "close" and clean


@pytest.mark.parametrize(
    "first",
    [
        raw_request("POST", "/nothing/here", b'{"left": "unread"}'),
        raw_request("GET", STATUS, b"GETX / HTTP/1.1\r\n\r\n"),
    ],
    ids=["post-to-a-404", "get-with-a-body"],
)
def test_a_body_nobody_reads_is_not_parsed_as_the_next_request(server, first):
    """pallets/werkzeug#2380 and #2397 ('{}POST / HTTP/1.1' 405): a body the handler does not
    use must still be consumed on a keep-alive connection. Expected: the first request's own
    answer, then the status GET answered 200 on the same connection."""
    want = _status_body(server)
    method = first.split(b" ", 1)[0].decode()
    second = raw_request("GET", STATUS, headers=[("Connection", "close")])
    got, clean = _answers(server, first + second, 2, [method, "GET"])
    assert got[0][0] == (404 if method == "POST" else 200)
    assert (got[1][0], got[1][2], clean) == (200, want, True)


def test_get_on_predict_with_a_body_is_a_400_and_the_connection_goes_on(server):
    """tensorflow/serving#1925 ('GET on predict with a large enough body crashes the server',
    evhttp 'illegal connection state 7'): a GET with a body on :predict is TF Serving's 400
    Malformed request, and the server goes on. Expected: that 400, then 200 on the same
    connection."""
    want = _status_body(server)
    request = raw_request("GET", PREDICT, GOOD) + raw_request(
        "GET", STATUS, headers=[("Connection", "close")]
    )
    got, clean = _answers(server, request, 2)
    assert got[0][0] == 400
    assert _json_error(got[0][2]) == f"Malformed request: GET {PREDICT}"
    assert (got[1][0], got[1][2], clean) == (200, want, True)


def test_get_on_predict_with_a_body_past_the_limit_is_a_413(server):
    """tensorflow/serving#1925, its crashing case (the body large): docs/deployment.md says a
    body declared over --max_request_bytes is 413 (RFC 9110 section 15.5.14), whatever the
    method. Expected: 413 naming the limit, connection closed after the body, the server still
    serving."""
    declared = 2 * MAX_REQUEST_BYTES
    request = f"GET {PREDICT} HTTP/1.1\r\nHost: x\r\nContent-Length: {declared}\r\n\r\n"
    # The answer comes at the header; the connection closes once the body sent is read past.
    [(status, _, body)], closed = _answers(server, request.encode() + b" " * declared, 1)
    assert (status, closed) == (413, True)
    assert _json_error(body) == (
        f"request body of {declared} bytes exceeds --max_request_bytes={MAX_REQUEST_BYTES}"
    )
    _status_body(server)


def test_a_refused_body_sent_whole_is_read_so_the_client_sees_the_413(server):
    """pallets/werkzeug#1313 (the dev server closes before reading the body: curl error 55):
    a refused upload the client sends whole, without waiting, is read past before the close.
    Expected: the 413 JSON answer, not a reset."""
    body = b" " * (MAX_REQUEST_BYTES + 1)
    with _connect(server) as sock:
        sock.sendall(raw_request("POST", PREDICT, body))
        reply = _until_closed(sock)
    status, headers, answer = _next(_Bytes(reply), "POST")
    assert (status, headers["Connection"]) == (413, "close")
    assert _json_error(answer) == (
        f"request body of {len(body)} bytes exceeds --max_request_bytes={MAX_REQUEST_BYTES}"
    )


def test_an_http11_connection_is_kept_alive_by_default(server):
    """triton-inference-server/server#669 ('the server seems to close the keep-alive'): RFC 9112
    section 9.3, HTTP/1.1 connections persist unless 'close' is sent. Expected: three requests
    answered on one socket, none with Connection: close."""
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=WAIT_S)
    try:
        answers, sockets = [], set()
        for method, path, body in [
            ("GET", STATUS, None),
            ("POST", PREDICT, GOOD),
            ("GET", STATUS, None),
        ]:
            connection.request(method, path, body)
            sockets.add(id(connection.sock))
            response = connection.getresponse()
            response.read()
            answers.append((response.status, response.headers["Connection"]))
    finally:
        connection.close()
    assert answers == [(200, None)] * 3 and len(sockets) == 1


def test_connection_close_is_honoured_and_echoed(server):
    """tutikka/DroidPlay#15 and RFC 9112 section 9.6: a server that receives 'close' MUST close
    after the response and SHOULD send 'close' in it. Expected: 200 with Connection: close,
    then the close."""
    [(status, headers, _)], closed = _answers(
        server, raw_request("GET", STATUS, headers=[("Connection", "close")]), 1
    )
    assert (status, headers["Connection"], closed) == (200, "close", True)


def test_http10_closes_unless_keep_alive_is_asked(server):
    """envoyproxy/envoy#7123 and hyperium/hyper#596: an HTTP/1.0 request without keep-alive is
    answered and the connection closed; with 'Connection: keep-alive' the answer says
    'Keep-Alive' and the connection serves the next request. Expected: both."""
    want = _status_body(server)
    [(status, _, body)], closed = _answers(server, b"GET /v1/models/reg HTTP/1.0\r\n\r\n", 1)
    assert (status, body, closed) == (200, want, True)
    keep = b"GET /v1/models/reg HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
    got, clean = _answers(server, keep + b"GET /v1/models/reg HTTP/1.0\r\n\r\n", 2)
    assert [(s, h["Connection"], b) for s, h, b in got] == [
        (200, "Keep-Alive", want),
        (200, None, want),
    ]
    assert clean


# ------------------------------------------------------------------ smuggling primitives
@pytest.mark.parametrize(
    "request_bytes",
    [
        # ureq#96 / stephenberry/glaze#2661: whitespace between the field name and the colon
        b"POST /v1/models/reg:predict HTTP/1.1\r\nHost: x\r\nContent-Length : 2\r\n\r\n{}",
        # benoitc/gunicorn#3091: \xa0 after the field name, stripped by gunicorn
        b"POST /v1/models/reg:predict HTTP/1.1\r\nHost: x\r\nContent-Length\xa0: 2\r\n\r\n{}",
        # benoitc/gunicorn#3364: control characters around 'chunked'
        b"POST /v1/models/reg:predict HTTP/1.1\r\nHost: x\r\n"
        b"Transfer-Encoding: \x0bchunked\x0b\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        # h2o/picohttpparser#39 / python-hyper/h11#59: obs-fold (RFC 9112 5.2 allows a 400)
        b"GET /v1/models/reg HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n",
        # benoitc/gunicorn#2176 (CL.TE desync) on a GET: both framing headers
        b"GET /v1/models/reg HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ],
    ids=["space-before-colon", "nbsp-in-name", "vt-around-chunked", "obs-fold", "get-cl-te"],
)
def test_a_smuggling_primitive_is_a_json_400_and_closes(server, request_bytes):
    """The reports named beside each case: RFC 9112 sections 5.1, 5.2 and 6.1 — a server MUST
    reject whitespace before the colon with 400, MAY reject obs-fold with 400, and MUST close
    after a request with both Content-Length and Transfer-Encoding. Expected: 400, JSON error,
    the connection closed, and nothing served."""
    [(status, _, body)], closed = _answers(server, request_bytes, 1)
    assert (status, closed) == (400, True)
    both = b"Content-Length" in request_bytes and b"Transfer-Encoding" in request_bytes
    assert _json_error(body) == (
        "a request may not have both Transfer-Encoding and Content-Length"
        if both
        else "malformed HTTP request (request line, headers or chunked framing)"
    )


def test_a_transfer_encoding_not_ending_in_chunked_is_a_400(server):
    """golang/go#30710 and uNetworking/uWebSockets.js#1305 (unknown transfer codings): RFC 9112
    section 6.3, a request whose Transfer-Encoding does not end in chunked MUST be answered 400
    and the connection closed. Expected: 400, JSON error, closed."""
    request = (
        b"POST /v1/models/reg:predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n{}"
    )
    [(status, _, body)], closed = _answers(server, request, 1)
    assert (status, closed) == (400, True)
    _json_error(body)


@pytest.mark.parametrize("coding", ["chunked", "CHUNKED", "gzip, chunked"])
def test_a_chunked_post_is_the_documented_411_whatever_the_case(server, coding):
    """uNetworking/uWebSockets.js#1305: RFC 9112 section 7, transfer-coding names are
    case-insensitive, so 'CHUNKED' is the same request as 'chunked'. Ours refuses a chunked POST
    (RFC 9112 section 6.3 lets a server answer 411). Expected: the same 411 for each spelling."""
    request = (
        b"POST /v1/models/reg:predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
        + coding.encode()
        + b"\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    )
    [(status, _, body)], closed = _answers(server, request, 1)
    assert (status, closed) == (411, True)
    assert _json_error(body) == "Content-Length header is required"


# -------------------------------------------------------------------------- slow clients
def test_idle_connections_do_not_hold_the_request_threads(server):
    """tensorflow/serving#1576 (--rest_api_num_threads=1 freezes the REST API): connections
    that have sent part of a request take no thread. Expected: with more half-sent requests open
    than --rest_api_num_threads (16), a new request is answered 200."""
    want = _status_body(server)
    held = []
    try:
        for _ in range(24):
            sock = _connect(server)
            sock.sendall(b"GET /v1/models/reg HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            held.append(sock)
        assert _status_body(server) == want
    finally:
        for sock in held:
            sock.close()
