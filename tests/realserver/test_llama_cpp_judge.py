"""OpenAIJudge against a real OpenAI-compatible server and a real model (issue 16).

llama-cpp-python's server with Gemma 3 270M (see conftest.py), on 127.0.0.1, through the metric and the
worker: format negotiation from the server's real refusal, schema-constrained output, the output bound,
token usage on the emitted telemetry, a timeout, and the server killed mid-request. A 270M model is too
small to judge well: these tests assert what the judge does with the server, not verdict quality.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from ctxutil_otel import DatasetItem
from ctxutil_otel.judges import JudgeError, OpenAIJudge
from ctxutil_otel.judges._negotiate import output_token_limit, refused_feature
from ctxutil_otel.metric import ContextualUtilization, EvaluationMode
from tests.judges.pipeline import run_through_worker

from .conftest import MODEL_ALIAS, LlamaServer, Proxy

pytestmark = [pytest.mark.realserver, pytest.mark.timeout(900)]

QUERY = "What are the benefits of green tea?"
ANSWER = "Green tea is rich in antioxidants, which reduce inflammation."
CHUNKS = [
    "Green tea contains antioxidants called catechins.",
    "The antioxidants in green tea reduce inflammation.",
    "Tea originated in China thousands of years ago.",
]
ITEMS = [
    (QUERY, ANSWER, CHUNKS),
    (
        "Who wrote Pride and Prejudice?",
        "Jane Austen wrote Pride and Prejudice, published in 1813.",
        ["Pride and Prejudice is an 1813 novel by Jane Austen.", "The Eiffel Tower is in Paris."],
    ),
]

MakeJudge = Callable[..., OpenAIJudge]


@pytest.fixture
async def make_judge() -> AsyncIterator[MakeJudge]:
    judges: list[OpenAIJudge] = []

    def make(base_url: str, **overrides: Any) -> OpenAIJudge:
        kwargs: dict[str, Any] = {
            "model": MODEL_ALIAS,
            "base_url": base_url,
            "api_key": "no-key-needed",
            "timeout_s": 300.0,
            "deadline_s": 600.0,
            "max_retries": 3,
            "max_context_tokens": 2048,
        }
        kwargs.update(overrides)
        judge = OpenAIJudge(**kwargs)
        judges.append(judge)
        return judge

    yield make
    for judge in judges:
        await judge.aclose()


def _post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


async def test_the_servers_refusal_of_json_schema_is_recognised(llama_server: LlamaServer) -> None:
    body = {
        "model": MODEL_ALIAS,
        "messages": [{"role": "user", "content": "Say hi."}],
        "max_tokens": 4,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "x", "schema": {"type": "object"}},
        },
    }
    status, answer = await asyncio.to_thread(_post, f"{llama_server.base_url}/chat/completions", body)
    refused = refused_feature(status, answer, json.dumps(body).encode())
    assert status >= 400, answer[:300]
    assert refused is not None and refused.feature == "format", (status, answer[:300])


async def test_negotiation_reaches_the_schema_constrained_format_without_retrying_the_refusal(
    llama_server: LlamaServer, make_judge: MakeJudge
) -> None:
    before = len(llama_server.chat_requests())
    # What works is remembered per endpoint and model for the process: "localhost" is an endpoint no
    # other test used, so this judge negotiates from the start whatever ran before.
    judge = make_judge(llama_server.base_url.replace("127.0.0.1", "localhost"))
    result = await ContextualUtilization(judge=judge).execute(
        DatasetItem(query=QUERY, actual_output=ANSWER, retrieved_content=CHUNKS)
    )
    statuses = llama_server.chat_requests()[before:]

    assert judge.output_format == "json_object_schema"
    assert result.judge_format_fallbacks == 1
    assert [s for s in statuses if s >= 400] == [statuses[0]], statuses  # one refusal, not retried
    assert all(s == 200 for s in statuses[1:]), statuses
    # Constrained by the schema's grammar, the reply parses: scored or not applicable, not malformed.
    assert result.label != "error" or result.error_type in ("verdict_mismatch", "output_truncated"), result
    assert result.judge_output_format == "json_object_schema"


@pytest.mark.parametrize("mode", [EvaluationMode.GRANULAR, EvaluationMode.FAST])
async def test_no_call_generates_past_its_bound(
    llama_server: LlamaServer, make_judge: MakeJudge, mode: EvaluationMode
) -> None:
    # Plain JSON mode, the worst case for a small model: it may write until the limit.
    judge = make_judge(llama_server.base_url, response_format="json_object")
    metric = ContextualUtilization(judge=judge, mode=mode)
    reasons = mode is EvaluationMode.GRANULAR
    for query, answer, chunks in ITEMS:
        before = len(llama_server.chat_requests())
        result = await metric.execute(
            DatasetItem(query=query, actual_output=answer, retrieved_content=chunks)
        )
        calls = len(llama_server.chat_requests()) - before
        assert result.usage is not None and result.usage.output_tokens > 0, result
        # Each call is bounded by the limit for at most all the chunks.
        assert result.usage.output_tokens <= calls * output_token_limit(len(chunks), reasons), (calls, result)


async def test_token_usage_reaches_the_emitted_telemetry_through_the_worker(
    llama_server: LlamaServer, make_judge: MakeJudge
) -> None:
    judge = make_judge(llama_server.base_url)
    run = await asyncio.to_thread(
        run_through_worker, judge, ITEMS, timeout_ms=600_000, evaluation_timeout_s=600, max_concurrency=1
    )

    attributes = run.attributes()
    assert len(attributes) == len(ITEMS)
    assert run.stats.evaluated + run.stats.not_applicable + run.stats.failed_total == len(ITEMS)
    assert all(a["ctxutil.judge.usage.input_tokens"] > 0 for a in attributes), attributes
    assert run.tokens["input"] == sum(a["ctxutil.judge.usage.input_tokens"] for a in attributes)
    assert run.tokens["output"] == sum(a["ctxutil.judge.usage.output_tokens"] for a in attributes) > 0
    assert {a["ctxutil.judge.output_format"] for a in attributes if "ctxutil.judge.output_format" in a} == {
        "json_object_schema"
    }


async def test_a_deadline_shorter_than_the_model_is_a_timeout(
    llama_server: LlamaServer, make_judge: MakeJudge
) -> None:
    judge = make_judge(llama_server.base_url, deadline_s=0.05, response_format="json_object_schema")
    result = await ContextualUtilization(judge=judge).execute(
        DatasetItem(query=QUERY, actual_output=ANSWER, retrieved_content=CHUNKS)
    )
    assert result.label == "error" and result.error_type == "timeout"


async def test_a_server_killed_mid_request_is_a_connection_error(
    own_llama_server: LlamaServer, make_judge: MakeJudge
) -> None:
    proxy = Proxy(own_llama_server.port)
    try:
        judge = make_judge(proxy.base_url, max_retries=2, response_format="json_object_schema")
        task = asyncio.ensure_future(judge.judge(QUERY, ANSWER, CHUNKS * 4))
        assert await asyncio.to_thread(proxy.forwarded.wait, 60)  # the request reached the server
        own_llama_server.stop()  # SIGKILL while it works on the request
        with pytest.raises(JudgeError) as info:
            await task
    finally:
        proxy.close()
    assert info.value.error_type == "connection"
