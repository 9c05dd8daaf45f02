"""OpenAIJudge reads an HTTP error (4xx/5xx) body under MAX_ERROR_BODY_BYTES, on every attempt.

The openai SDK reads an error body in full before it raises its status error; these tests show the
judge's response hook stops that read at the cap, keeps the error type of the status, and leaves
normal-sized error bodies (and their retries) alone. Real openai client, real HTTP on 127.0.0.1:
the shared :class:`tests.support.openai_server.OpenAICompatServer` where a truthful
``Content-Length`` will do, and :class:`_EndlessServer` (a raw socket) for an endless chunked body,
which the shared server cannot send (it always sends a ``Content-Length`` and the whole body).
"""

from __future__ import annotations

import gzip
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from ctxutil_otel.judges import JudgeError
from ctxutil_otel.judges._retry import MAX_ERROR_BODY_BYTES
from tests.support.openai_server import Reply, error_reply, script, verdict_handler

from .conftest import API_KEY, MakeJudgeFn, ServeFn

QUERY = "What are the benefits of green tea?"
ANSWER = "Green tea is rich in antioxidants, which reduce inflammation."
CHUNKS = ["Green tea contains antioxidants called catechins.", "Tea originated in China."]
MARKER = "ERROR-BODY-MARKER"
ERROR_TYPES = {400: "http_4xx", 401: "auth", 429: "rate_limited", 500: "http_5xx"}


class _EndlessServer:
    """Answers every request with ``status`` and a chunked body of up to ``total`` bytes, sent in
    64 KiB pieces until the client hangs up. ``sent`` counts body bytes handed to the socket;
    ``hung_up`` is set when sending failed because the client closed the connection; ``done`` when
    a request has been handled."""

    def __init__(self, status: int, total: int = 128 * 2**20) -> None:
        self.status = status
        self.total = total
        self.sent = 0
        self.requests = 0
        self.hung_up = False
        self.done = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, body = data.split(b"\r\n\r\n", 1)
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests += 1
                conn.sendall(
                    f"HTTP/1.1 {self.status} Error\r\nContent-Type: application/json\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n".encode()
                )
                piece = (MARKER + "x" * (65536 - len(MARKER))).encode()
                framed = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
                while self.sent < self.total:
                    conn.sendall(framed)
                    self.sent += len(piece)
                conn.sendall(b"0\r\n\r\n")
            except OSError:  # BrokenPipe / ConnectionReset: the client stopped reading and hung up
                self.hung_up = True
            finally:
                self.done.set()

    def close(self) -> None:
        self._sock.close()


StartEndless = Callable[[int], _EndlessServer]


@pytest.fixture
def endless() -> Iterator[StartEndless]:
    """Start an :class:`_EndlessServer` answering a status; closed at teardown."""
    servers: list[_EndlessServer] = []

    def start(status: int) -> _EndlessServer:
        server = _EndlessServer(status)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("status", [400, 500])
async def test_endless_chunked_error_body_is_read_only_up_to_the_cap(
    status: int, endless: StartEndless, make_judge: MakeJudgeFn
) -> None:
    server = endless(status)
    judge = make_judge(server, max_retries=2)

    with pytest.raises(JudgeError) as info:
        await judge.judge(QUERY, ANSWER, CHUNKS)

    assert server.done.wait(10)  # the server's handler finished: it stopped sending
    assert server.hung_up and server.sent < server.total  # because the judge hung up early
    assert info.value.error_type == ERROR_TYPES[status]
    message = str(info.value)
    assert f"HTTP {status}" in message and str(MAX_ERROR_BODY_BYTES) in message
    assert MARKER not in message and API_KEY not in message
    assert server.requests == 1  # an oversized error body fails at once, also for a 5xx


@pytest.mark.parametrize("status", sorted(ERROR_TYPES))
async def test_declared_error_body_over_the_cap_is_refused_unread(
    status: int, serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    body = MARKER + "x" * MAX_ERROR_BODY_BYTES
    server = serve(lambda request: Reply(status=status, body=body))
    judge = make_judge(server, max_retries=2)

    with pytest.raises(JudgeError) as info:
        await judge.judge(QUERY, ANSWER, CHUNKS)

    assert info.value.error_type == ERROR_TYPES[status]
    message = str(info.value)
    assert "Content-Length" in message and str(len(body)) in message and str(MAX_ERROR_BODY_BYTES) in message
    assert MARKER not in message
    assert len(server.requests) == 1


async def test_compressed_error_body_over_the_cap_once_decoded_is_refused(
    serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    decoded = (MARKER + " " * 2**20).encode()  # 1 MiB that gzip packs into about 1 KiB
    packed = gzip.compress(decoded)
    assert len(packed) < MAX_ERROR_BODY_BYTES
    server = serve(lambda request: Reply(status=400, body=packed, headers={"Content-Encoding": "gzip"}))

    with pytest.raises(JudgeError) as info:
        await make_judge(server).judge(QUERY, ANSWER, CHUNKS)

    assert info.value.error_type == "http_4xx"
    assert f"{len(decoded)} bytes once decoded" in str(info.value) and MARKER not in str(info.value)


async def test_undecodable_error_body_is_a_typed_http_error(serve: ServeFn, make_judge: MakeJudgeFn) -> None:
    server = serve(lambda request: Reply(status=400, body=b"not gzip", headers={"Content-Encoding": "gzip"}))

    with pytest.raises(JudgeError) as info:
        await make_judge(server).judge(QUERY, ANSWER, CHUNKS)

    assert info.value.error_type == "http_4xx" and "not decodable" in str(info.value)


async def test_error_body_within_the_cap_is_retried_and_its_message_reported(
    serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    message = "overloaded " + "m" * (MAX_ERROR_BODY_BYTES - 200)  # the JSON error body stays under the cap
    server = serve(
        script(error_reply(500, message), error_reply(400, message), then=verdict_handler()),
    )
    judge = make_judge(server, max_retries=1)

    with pytest.raises(JudgeError) as info:  # 500 retried once, then the 400 is final
        await judge.judge(QUERY, ANSWER, CHUNKS)
    result = await judge.judge(QUERY, ANSWER, CHUNKS)

    assert info.value.error_type == "http_4xx"
    assert str(info.value).startswith("HTTP 400: overloaded mmm")  # the body reached the SDK's error
    assert [v.index for v in result.verdicts] == [0, 1]
    assert len(server.requests) == 3
