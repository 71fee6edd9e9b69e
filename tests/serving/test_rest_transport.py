"""The REST port's transport on real sockets: keep-alive, the bound on open connections, the
header and body deadlines (whole deadlines, so a client trickling a byte at a time is cut off),
and threads that do not grow with the connections held."""

import http.client
import json
import pathlib
import socket
import time

import pytest

MAX_CONNECTIONS = 20
IDLE_TIMEOUT_S = 1.5
BODY_TIMEOUT_S = 1.5
NUM_THREADS = 2
# A deadline plus this much is when the server must have closed the connection (the test waits
# on the socket for it, so a busy machine only makes the test slower, never wrong).
CLOSE_WAIT_S = 20
GOOD = json.dumps({"instances": [{"text": "still serving", "text_b": ""}]})


def _serve(model_base, log_dir, idle_s, body_s):
    from tests.serving.conftest import ServerProcess

    process = ServerProcess(
        [
            f"--model_base_path={model_base / 'clf'}",
            "--model_name=clf",
            "--file_system_poll_wait_seconds=0",
            f"--rest_api_max_connections={MAX_CONNECTIONS}",
            f"--rest_api_idle_timeout_seconds={idle_s}",
            f"--rest_api_body_timeout_seconds={body_s}",
            f"--rest_api_num_threads={NUM_THREADS}",
        ],
        log_dir / "server.log",
    )
    try:
        yield process.wait_serving()
    finally:
        process.stop()


@pytest.fixture(scope="module")
def server(model_base, tmp_path_factory):
    yield from _serve(
        model_base, tmp_path_factory.mktemp("transport"), IDLE_TIMEOUT_S, BODY_TIMEOUT_S
    )


@pytest.fixture(scope="module")
def patient_server(model_base, tmp_path_factory):
    """The same bound with deadlines no busy machine reaches: a held connection stays held for
    as long as the test needs it, so the count at the bound is exact."""
    patient_s = CLOSE_WAIT_S * 3
    yield from _serve(model_base, tmp_path_factory.mktemp("patient"), patient_s, patient_s)


def _predict(connection):
    connection.request("POST", "/v1/models/clf:predict", GOOD)
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def _fresh_predict(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=30)
    try:
        return _predict(connection)
    finally:
        connection.close()


def _connect(server):
    return socket.create_connection(("127.0.0.1", server.rest_port), timeout=CLOSE_WAIT_S)


def _closed_after(sock, trickle=b"", every_s=0.25):
    """Seconds until the server closes `sock` (recv gives b"" or a reset), sending one byte of
    `trickle` every `every_s` meanwhile; None if it is still open after CLOSE_WAIT_S."""
    start = time.monotonic()
    sock.settimeout(every_s)
    for byte in [trickle[i : i + 1] for i in range(len(trickle))] + [b""] * 10**6:
        if time.monotonic() - start > CLOSE_WAIT_S:
            return None
        try:
            if byte:
                sock.sendall(byte)
            data = sock.recv(4096)
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - start
        if data == b"":
            return time.monotonic() - start
    return None


def _threads(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def test_keep_alive_answers_several_requests_on_one_connection(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=30)
    try:
        answers = [_predict(connection) for _ in range(3)]
        local = connection.sock.getsockname()
        assert _predict(connection)[0] == 200
        assert connection.sock.getsockname() == local  # the same connection throughout
    finally:
        connection.close()
    assert [status for status, _ in answers] == [200, 200, 200]
    assert answers[0][1] == answers[2][1]


def test_a_header_trickled_a_byte_at_a_time_is_cut_off_at_the_deadline(server):
    header = b"POST /v1/models/clf:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n" * 50
    with _connect(server) as sock:
        closed = _closed_after(sock, header)
    assert closed is not None and closed >= IDLE_TIMEOUT_S - 0.1, closed
    assert _fresh_predict(server)[0] == 200


def test_a_silent_connection_is_closed_at_the_idle_deadline(server):
    with _connect(server) as sock:
        closed = _closed_after(sock)
    assert closed is not None and closed >= IDLE_TIMEOUT_S - 0.1, closed


def test_a_body_trickled_a_byte_at_a_time_is_cut_off_at_the_deadline(server):
    with _connect(server) as sock:
        sock.sendall(
            b"POST /v1/models/clf:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
        )
        closed = _closed_after(sock, b"{" * 99)
    assert closed is not None and closed >= BODY_TIMEOUT_S - 0.1, closed
    assert _fresh_predict(server)[0] == 200


def test_connections_past_the_bound_get_503_and_the_held_ones_keep_their_place(patient_server):
    server = patient_server
    held = [_connect(server) for _ in range(MAX_CONNECTIONS)]
    try:
        # The server accepts in arrival order, so the extra connection is counted after every
        # held one; with deadlines past the test's length none of them is closed meanwhile.
        with _connect(server) as extra:
            extra.sendall(b"GET /v1/models/clf HTTP/1.1\r\nHost: x\r\n\r\n")
            extra.settimeout(CLOSE_WAIT_S)
            answer = b""
            while chunk := extra.recv(4096):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 Service Unavailable"), answer
        assert json.loads(body) == {
            "error": "too many open connections (--rest_api_max_connections)"
        }
        # A held connection is served.
        held[0].sendall(
            b"POST /v1/models/clf:predict HTTP/1.1\r\nHost: x\r\nContent-Length: "
            + str(len(GOOD)).encode()
            + b"\r\n\r\n"
            + GOOD.encode()
        )
        held[0].settimeout(CLOSE_WAIT_S)
        assert held[0].recv(4096).startswith(b"HTTP/1.1 200 OK")
    finally:
        for sock in held:
            sock.close()
    deadline = time.monotonic() + CLOSE_WAIT_S
    while time.monotonic() < deadline:  # the server sees the closes, then has room again
        try:
            if _fresh_predict(server)[0] == 200:
                break
        except (ConnectionError, http.client.HTTPException):
            time.sleep(0.1)
    else:
        raise AssertionError("no room after the held connections closed")


def test_threads_do_not_grow_with_the_connections_held(server):
    before = _threads(server.proc.pid)
    # Half the bound: room is left for the request below while the server may still be seeing
    # earlier tests' connections close.
    held = [_connect(server) for _ in range(MAX_CONNECTIONS // 2)]
    try:
        for sock in held[:5]:
            sock.sendall(b"POST /v1/models/clf:predict HTTP/1.1\r\nHost: x\r\n")  # half a header
        time.sleep(0.3)
        during = _threads(server.proc.pid)
        assert (
            _predict(http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=30))[0]
            == 200
        )
    finally:
        for sock in held:
            sock.close()
    # The REST pool has at most NUM_THREADS threads, started as requests come; no thread per
    # connection.
    assert during - before <= NUM_THREADS, (before, during)
