"""OpenAIJudge against hostile or mistaken input: deeply nested JSON.

Server-facing tests use the real openai client over real HTTP against
:class:`tests.support.openai_server.OpenAICompatServer` on 127.0.0.1.
"""

from __future__ import annotations

import pytest

from ctxutil_otel import DatasetItem
from ctxutil_otel.judges import JudgeError
from ctxutil_otel.judges._completion import read_reply
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
