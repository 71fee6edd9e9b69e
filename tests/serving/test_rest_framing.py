"""The REST port's HTTP framing on a real socket to the shared server: HEAD, gzip bodies,
Content-Length that is not ASCII digits, refusals before a 100 Continue, and a JSON error from
whichever layer refuses. Each case is a peer's report turned into its expected value:
- HEAD is GET without content (RFC 9110 section 9.3.2); the keep-alive connection goes on;
- a gzip body is decompressed (tensorflow/serving #1091, PR #1337: auto_uncompress_input), its
  limit applied to what it inflates to, as it streams;
- Content-Length is 1*DIGIT in ASCII (RFC 9110 section 8.6; Werkzeug #2716: "²" is a digit to
  str.isdigit());
- with Expect: 100-continue a refused upload is answered at once, before 100 Continue (RFC 9110
  section 10.1.1), at any declared size.
`FRAMING_CASES` are the raw requests of these cases, seeds of the rest_http fuzz target.
"""

import gzip
import http.client
import json
import socket
import zlib

import pytest

from tests.fuzz.serving_targets import ReplyBytes as _Bytes
from tests.fuzz.serving_targets import raw_request
from tests.fuzz.serving_targets import until_closed as _until_closed
from tests.serving.conftest import MAX_REQUEST_BYTES

PREDICT = "/v1/models/reg:predict"
GOOD = json.dumps({"instances": ["framing"]}).encode()


def _bomb(inflated: int) -> bytes:
    """A gzip stream of `inflated` zero bytes, made a MiB at a time (about 1 KB per MiB)."""
    packer, pieces, block = (
        zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS),
        [],
        bytes(1 << 20),
    )
    for _ in range(inflated >> 20):
        pieces.append(packer.compress(block))
    return b"".join(pieces) + packer.flush()


FRAMING_CASES = [
    raw_request("HEAD", "/v1/models/reg") + raw_request("GET", "/v1/models/reg"),
    raw_request("POST", PREDICT, gzip.compress(GOOD, mtime=0), [("Content-Encoding", "gzip")]),
    raw_request("POST", PREDICT, b"\x1f\x8b not gzip", [("Content-Encoding", "gzip")]),
    raw_request("POST", PREDICT, gzip.compress(GOOD, mtime=0)[:-6], [("Content-Encoding", "gzip")]),
    raw_request("POST", PREDICT, GOOD, [("Content-Encoding", "br")]),
    raw_request("POST", PREDICT, _bomb(4 << 20), [("Content-Encoding", "gzip")]),
    b"POST " + PREDICT.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: \xb2\r\n\r\n" + GOOD,
    b"POST " + PREDICT.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 2\r\n\r\n{",
    b"POST "
    + PREDICT.encode()
    + b" HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
    + f"Content-Length: {MAX_REQUEST_BYTES + 1}\r\n\r\n".encode(),
    b"POST " + PREDICT.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 300000000\r\n\r\n",
    b"POST "
    + PREDICT.encode()
    + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    + b'5\r\n{"a":\r\n0\r\n\r\n',
    b"GET /v1/models/reg HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
]


@pytest.fixture(scope="module")
def server(shared_server):
    return shared_server


def _connect(server):
    return socket.create_connection(("127.0.0.1", server.rest_port), timeout=30)


def _first_answer(sock, request: bytes):
    """Sends `request` and reads until the port closes: (status, headers, parsed JSON body,
    whether the answer was all it sent)."""
    sock.sendall(request)
    stream = _Bytes(_until_closed(sock))
    response = http.client.HTTPResponse(stream, method="POST")
    response.begin()
    body = json.loads(response.read())
    return response.status, response.headers, body, stream.read() == b""


def test_head_is_get_without_content_and_keeps_the_connection(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=30)
    try:
        connection.request("GET", "/v1/models/reg")
        got = connection.getresponse()
        want = got.read()
        connection.request("HEAD", "/v1/models/reg")
        head = connection.getresponse()
        assert (head.status, head.read()) == (200, b"")
        assert head.headers["Content-Length"] == str(len(want))
        assert head.headers["Content-Type"] == "application/json"
        connection.request("GET", "/v1/models/reg")  # the same connection, after the HEAD
        again = connection.getresponse()
        assert (again.status, again.read()) == (200, want)
    finally:
        connection.close()


def _post(server, body: bytes, headers=()):
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=60)
    try:
        connection.request("POST", PREDICT, body, dict(headers))
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_a_gzip_body_is_answered_as_the_plain_one(server):
    plain = _post(server, GOOD)
    assert plain[0] == 200
    assert _post(server, gzip.compress(GOOD, mtime=0), [("Content-Encoding", "gzip")]) == plain
    two_members = gzip.compress(GOOD[:10], mtime=0) + gzip.compress(GOOD[10:], mtime=0)
    assert _post(server, two_members, [("Content-Encoding", "x-gzip")]) == plain


def test_a_small_gzip_of_a_large_body_is_refused_by_what_it_inflates_to(server):
    bomb = _bomb(64 * MAX_REQUEST_BYTES)  # 64 MiB of zeros in about 64 KB
    assert len(bomb) < MAX_REQUEST_BYTES // 8
    assert _post(server, bomb, [("Content-Encoding", "gzip")]) == (
        413,
        {
            "error": f"request body inflates past --max_request_bytes={MAX_REQUEST_BYTES} bytes "
            "(Content-Encoding: gzip)"
        },
    )
    assert _post(server, GOOD)[0] == 200


@pytest.mark.parametrize(
    "body, error",
    [
        (b"\x1f\x8b not gzip", "Content-Encoding gzip: the body is not gzip (Error -3"),
        (
            gzip.compress(GOOD, mtime=0)[:-6],
            "Content-Encoding gzip: the body ends inside its gzip stream",
        ),
    ],
)
def test_a_body_that_is_not_gzip_is_a_400_naming_the_encoding(server, body, error):
    status, answer = _post(server, body, [("Content-Encoding", "gzip")])
    assert status == 400 and answer["error"].startswith(error), answer


def test_an_unsupported_content_encoding_is_415(server):
    assert _post(server, GOOD, [("Content-Encoding", "br")]) == (
        415,
        {"error": "Content-Encoding 'br' is not supported: send the body as gzip or identity"},
    )


@pytest.mark.parametrize(
    "length, error",
    [
        (b"\xb2", "Content-Length must be one number of ASCII digits, got '\u00b2'"),
        (b"\xd9\xa3", "Content-Length must be one number of ASCII digits, got '\u00d9\u00a3'"),
        (b"1, 2", "Content-Length must be one number of ASCII digits, got '1, 2'"),
        (b"-1", "Content-Length must be one number of ASCII digits, got '-1'"),
    ],
)
def test_a_content_length_that_is_not_ascii_digits_is_a_json_400(server, length, error):
    with _connect(server) as sock:
        request = b"POST " + PREDICT.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: " + length
        status, _, body, closed = _first_answer(sock, request + b"\r\n\r\n" + GOOD)
    assert (status, body, closed) == (400, {"error": error}, True)
    assert "Uncaught exception" not in server.log()
    assert _post(server, GOOD)[0] == 200


@pytest.mark.parametrize("declared", [MAX_REQUEST_BYTES + 1, (256 << 20) + 1, 10**12])
def test_an_upload_that_waits_for_100_continue_is_refused_at_once(server, declared):
    """curl sends Expect: 100-continue for every upload over 1 MiB and waits: the 413 comes
    before any body byte, with no 100 Continue before it (past 256 MiB it was a bare 400)."""
    with _connect(server) as sock:
        sock.sendall(
            b"POST "
            + PREDICT.encode()
            + b" HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            + f"Content-Length: {declared}\r\n\r\n".encode()
        )
        reply = _until_closed(sock)
    assert reply.startswith(b"HTTP/1.1 413 "), reply[:100]
    response = http.client.HTTPResponse(_Bytes(reply), method="POST")
    response.begin()
    assert response.headers["Connection"] == "close"
    assert json.loads(response.read()) == {
        "error": f"request body of {declared} bytes exceeds --max_request_bytes={MAX_REQUEST_BYTES}"
    }


def test_an_upload_past_the_drain_cap_is_a_json_413_not_a_bare_400(server):
    declared = (256 << 20) + 1
    with _connect(server) as sock:
        status, _, body, closed = _first_answer(
            sock,
            b"POST "
            + PREDICT.encode()
            + b" HTTP/1.1\r\nHost: x\r\n"
            + f"Content-Length: {declared}\r\n\r\n".encode(),
        )
    assert (status, closed) == (413, True)
    assert body["error"].startswith(f"request body of {declared} bytes exceeds")


@pytest.mark.parametrize(
    "request_bytes, status, error",
    [
        (
            b"POST /v1/models/reg:predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'5\r\n{"a":\r\n0\r\n\r\n',
            411,
            "Content-Length header is required",
        ),
        (
            b"POST /v1/models/reg:predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Length: 2\r\n\r\n{}",
            400,
            "a request may not have both Transfer-Encoding and Content-Length",
        ),
        (
            b"GET /v1/models/reg HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
            400,
            "malformed HTTP request (request line, headers or chunked framing)",
        ),
    ],
)
def test_every_refusal_of_the_framing_is_a_json_error(server, request_bytes, status, error):
    with _connect(server) as sock:
        got = _first_answer(sock, request_bytes)
    assert (got[0], got[2], got[3]) == (status, {"error": error}, True)
