"""OpenAIJudge against hostile or mistaken input: deeply nested JSON, oversized replies, secrets in base_url.

Server-facing tests use the real openai client over real HTTP against
:class:`tests.support.openai_server.OpenAICompatServer` on 127.0.0.1. Two tests of the size cap build an
``httpx2.Response`` over a hand-made byte stream instead: the test server always sends a truthful
``Content-Length``, so it cannot send a body without one (chunked) or declare a size it never sends.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import httpx2
import pytest

from ctxutil_otel import DatasetItem
from ctxutil_otel.judges import JudgeError, OpenAIJudge
from ctxutil_otel.judges._completion import MAX_REPLY_BYTES, read_body, read_reply
from ctxutil_otel.judges._openai import MalformedResponseError
from ctxutil_otel.judges._prompt import AnswerError, parse_answer
from ctxutil_otel.metric import ContextualUtilization
from tests.support.openai_server import Reply, completion, script, verdict_handler

from .conftest import MakeJudgeFn, ServeFn

QUERY = "What are the benefits of green tea?"
ANSWER = "Green tea is rich in antioxidants, which reduce inflammation."
CHUNKS = ["Green tea contains antioxidants called catechins.", "Tea originated in China."]
DEEP = "[" * 200_000
"""Nested far deeper than the interpreter's recursion limit: ``json.loads`` raises RecursionError."""


def item() -> DatasetItem:
    return DatasetItem(query=QUERY, actual_output=ANSWER, retrieved_content=CHUNKS)


# --- deeply nested JSON ---------------------------------------------------------------------------


def test_deeply_nested_body_is_malformed_not_a_recursion_error() -> None:
    with pytest.raises(MalformedResponseError, match="nested too deeply"):
        read_reply(DEEP.encode())


def test_deeply_nested_answer_is_an_unusable_answer() -> None:
    with pytest.raises(AnswerError, match="nested too deeply") as info:
        parse_answer(DEEP, 2)
    assert info.value.kind == "malformed"


async def test_deeply_nested_reply_body_counts_as_malformed_response(
    serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    server = serve(lambda request: Reply(body=DEEP.encode()))
    judge = make_judge(server)

    with pytest.raises(JudgeError) as info:
        await judge.judge(QUERY, ANSWER, CHUNKS)
    result = await ContextualUtilization(judge=judge).execute(item())

    assert info.value.error_type == "malformed_response"
    assert "nested too deeply" in str(info.value)
    assert result.label == "error" and result.error_type == "malformed_response"
    assert len(server.requests) == 2  # one per judge call: a broken envelope gets no repair call


async def test_deeply_nested_content_goes_through_the_repair_call(
    serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    server = serve(script(Reply(body=completion(DEEP)), then=verdict_handler()))

    result = await make_judge(server).judge(QUERY, ANSWER, CHUNKS)

    assert [v.index for v in result.verdicts] == [0, 1]
    assert len(server.requests) == 2
    repair = server.requests[1]
    assert [m["role"] for m in repair.messages] == ["system", "user", "assistant", "user"]
    assert repair.messages[2]["content"] == DEEP[:20_000]  # the echo of the bad reply is capped
    assert "nested too deeply" in repair.messages[3]["content"]


# --- reply size cap -------------------------------------------------------------------------------


async def test_reply_over_the_size_cap_is_malformed_without_content_or_repair(
    serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    marker = "SECRET-CONTENT-MARKER"
    content = marker + "x" * MAX_REPLY_BYTES
    server = serve(lambda request: Reply(body=completion(content)))
    judge = make_judge(server)

    with pytest.raises(JudgeError) as info:
        await judge.judge(QUERY, ANSWER, CHUNKS)
    result = await ContextualUtilization(judge=judge).execute(item())

    assert info.value.error_type == "malformed_response"
    message = str(info.value)
    assert str(MAX_REPLY_BYTES) in message and "Content-Length" in message  # refused on the declared size
    sent = server.requests[0].reply
    assert sent is not None
    assert str(len(json.dumps(sent.body).encode())) in message  # the size the server declared
    assert marker not in message and marker not in result.model_dump_json()
    assert result.error_type == "malformed_response"
    assert len(server.requests) == 2  # no repair call: the envelope is refused, not the verdicts


async def test_reply_just_under_the_size_cap_is_read(serve: ServeFn, make_judge: MakeJudgeFn) -> None:
    server = serve(verdict_handler(reason="r" * (MAX_REPLY_BYTES // 4)))  # two verdicts: about half the cap
    result = await make_judge(server).judge(QUERY, ANSWER, CHUNKS)
    assert [v.reason for v in result.verdicts] == ["r" * (MAX_REPLY_BYTES // 4)] * 2


class _Stream(httpx2.AsyncByteStream):
    """A response body arriving in parts; records how many parts were taken (stand-in for a server
    the test server cannot be: chunked, or declaring a size it does not send)."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts
        self.taken = 0
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            self.taken += 1
            yield part

    async def aclose(self) -> None:
        self.closed = True


async def test_declared_content_length_over_the_cap_is_refused_before_reading() -> None:
    stream = _Stream([b"{}"])
    response = httpx2.Response(200, headers={"content-length": str(64 * 2**20)}, stream=stream)

    with pytest.raises(MalformedResponseError) as info:
        await read_body(response)

    assert str(64 * 2**20) in str(info.value) and str(MAX_REPLY_BYTES) in str(info.value)
    assert stream.taken == 0 and stream.closed


async def test_body_without_content_length_stops_once_over_the_cap() -> None:
    part = b"x" * 2**20
    stream = _Stream([part] * 64)  # 64 MiB, chunked: no Content-Length
    response = httpx2.Response(200, stream=stream)

    with pytest.raises(MalformedResponseError, match=f"more than {MAX_REPLY_BYTES} bytes"):
        await read_body(response)

    assert stream.taken == MAX_REPLY_BYTES // len(part) + 1 and stream.closed


class _BrokenStream(_Stream):
    def __init__(self, error: Exception) -> None:
        super().__init__([b'{"choices": '])
        self.error = error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.parts[0]
        raise self.error


@pytest.mark.parametrize(
    ("error", "error_type"),
    [(httpx2.ReadTimeout("read timed out"), "timeout"), (httpx2.ReadError("reset"), "connection")],
)
async def test_a_body_cut_off_while_read_is_a_typed_judge_error(error: Exception, error_type: str) -> None:
    stream = _BrokenStream(error)
    with pytest.raises(JudgeError) as info:
        await read_body(httpx2.Response(200, stream=stream))
    assert info.value.error_type == error_type and stream.closed


async def test_read_body_returns_a_body_within_the_cap() -> None:
    stream = _Stream([b'{"choices": ', b"[]}"])
    response = httpx2.Response(200, stream=stream)
    assert await read_body(response) == b'{"choices": []}'


# --- credentials in base_url ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "secrets", "shown", "why"),
    [
        (
            "https://alice:pa55w0rd@example.invalid/v1",
            ["alice", "pa55w0rd"],
            "https://example.invalid/v1",
            "user",
        ),
        ("https://tok3n@example.invalid:8443/v1", ["tok3n"], "https://example.invalid:8443/v1", "user"),
        ("https://example.invalid/v1?api-key=k3y", ["k3y", "api-key"], "https://example.invalid/v1", "query"),
        ("https://example.invalid/v1?", [], "https://example.invalid/v1", "query"),
        ("https://example.invalid/v1#fr4g", ["fr4g"], "https://example.invalid/v1", "fragment"),
        # An unescaped '#' in a password: the URL parser sees "user:12" as host and port.
        ("https://alice:9911#pw@example.invalid/v1", ["alice", "9911", "pw@"], None, "fragment"),
        ("https://alice:s/cr3t@example.invalid/v1", ["alice", "s/cr3t", "cr3t"], None, "user"),
    ],
)
def test_base_url_with_credentials_is_rejected_without_echoing_them(
    url: str, secrets: list[str], shown: str | None, why: str
) -> None:
    with pytest.raises(ValueError) as info:
        OpenAIJudge(base_url=url, api_key="k")

    message = str(info.value)
    assert message.startswith("base_url")
    assert why in message and "api_key" in message  # why, and where the key goes instead
    for secret in secrets:
        assert secret not in message
    if shown is not None:
        assert shown in message


def test_base_url_from_openai_base_url_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "https://example.invalid/v1?api-key=k3y")
    with pytest.raises(ValueError, match="OPENAI_BASE_URL") as info:
        OpenAIJudge(api_key="k")
    assert "k3y" not in str(info.value)


async def test_accepted_base_url_is_what_the_http_client_logs(
    serve: ServeFn, make_judge: MakeJudgeFn, caplog: pytest.LogCaptureFixture
) -> None:
    # httpx2 logs every request's full URL at INFO: why base_url may not carry credentials.
    caplog.set_level(logging.INFO, logger="httpx2")
    server = serve(verdict_handler())
    await make_judge(server).judge(QUERY, ANSWER, CHUNKS)
    assert f"{server.base_url}/chat/completions" in caplog.text
