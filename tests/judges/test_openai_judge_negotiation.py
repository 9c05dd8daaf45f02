"""OpenAIJudge finds what its server accepts (issue 16): output format, output-limit parameter, output bound.

Real openai client over real HTTP against :class:`tests.support.openai_server.OpenAICompatServer` on
127.0.0.1, which refuses formats the way real servers do (:data:`tests.support.openai_server.REFUSALS`:
llama-cpp-python's 500, vLLM's and OpenAI's 400, FastAPI's and TGI's 422).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

from ctxutil_otel import DatasetItem
from ctxutil_otel._settings import Settings
from ctxutil_otel.emit._names import (
    ATTR_JUDGE_FORMAT_FALLBACKS,
    ATTR_JUDGE_INPUT_TOKENS,
    ATTR_JUDGE_OUTPUT_FORMAT,
)
from ctxutil_otel.judges import JudgeError, OpenAIJudge
from ctxutil_otel.judges._from_settings import build_judge
from ctxutil_otel.judges._negotiate import output_token_limit, refused_feature
from ctxutil_otel.metric import ContextualUtilization, EvaluationMode
from tests.support.openai_server import (
    REFUSALS,
    RecordedRequest,
    Reply,
    completion,
    error_reply,
    rambling_handler,
    refusing,
    refusing_token_param,
    verdict_handler,
)

from .conftest import API_KEY, MakeJudgeFn, ServeFn
from .pipeline import run_through_worker

QUERY = "What are the benefits of green tea?"
ANSWER = "Green tea is rich in antioxidants, which reduce inflammation."
CHUNKS = [
    "Green tea contains antioxidants called catechins.",
    "The antioxidants in green tea reduce inflammation.",
    "Green tea may boost metabolism.",
    "Tea originated in China thousands of years ago.",
]


def formats(requests: list[RecordedRequest]) -> list[str | None]:
    return [r.output_format for r in requests]


# --- format negotiation ---------------------------------------------------------------------------


@pytest.mark.parametrize("style", sorted(REFUSALS))
async def test_a_refused_json_schema_steps_down_once_without_retrying_the_refusal(
    serve: ServeFn, make_judge: MakeJudgeFn, style: str
) -> None:
    # Before: llama-cpp-python's 500 was retried (4 attempts) and counted http_5xx; TGI's plain-text
    # 422 and vLLM's unwrapped error were not recognised at all.
    server = serve(refusing({"json_schema"}, style))
    judge = make_judge(server, max_retries=3)

    result = await judge.judge(QUERY, ANSWER, CHUNKS)

    assert [v.index for v in result.verdicts] == [0, 1, 2, 3]
    assert formats(server.requests) == ["json_schema", "json_object_schema"]  # the refusal sent once
    assert result.output_format == "json_object_schema" and result.format_fallbacks == 1
    schema = server.requests[1].body["response_format"]["schema"]
    assert schema["$defs"]["Verdict"]["required"] == ["index", "reason", "is_relevant", "is_utilized"]


@pytest.mark.parametrize("style", ["llama_cpp", "fastapi", "tgi"])
async def test_a_server_without_json_mode_is_asked_with_the_prompt_only(
    serve: ServeFn, make_judge: MakeJudgeFn, style: str
) -> None:
    server = serve(refusing({"json_schema", "json_object"}, style))
    judge = make_judge(server)
    result = await judge.judge(QUERY, ANSWER, CHUNKS)
    assert formats(server.requests) == ["json_schema", "json_object_schema", "json_object", None]
    assert result.format_fallbacks == 3 and judge.output_format == "none"
    assert '"verdicts"' in server.requests[-1].messages[0]["content"]  # the shape is in the prompt


async def test_the_working_format_is_remembered_per_endpoint_and_model(
    serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    server = serve(refusing({"json_schema"}, "llama_cpp"))
    first = await make_judge(server).judge(QUERY, ANSWER, CHUNKS)
    again = await make_judge(server).judge(QUERY, ANSWER, CHUNKS)  # a new judge, same endpoint and model
    other = await make_judge(server, model="other-model").judge(QUERY, ANSWER, CHUNKS)

    assert formats(server.requests) == [
        "json_schema",
        "json_object_schema",
        "json_object_schema",  # remembered: no second refusal
        "json_schema",  # another model on the same server negotiates for itself
        "json_object_schema",
    ]
    assert (first.format_fallbacks, again.format_fallbacks, other.format_fallbacks) == (1, 0, 1)


async def test_concurrent_judgements_count_the_step_once(serve: ServeFn, make_judge: MakeJudgeFn) -> None:
    gate = asyncio.Event()
    good = verdict_handler()

    def handler(request: RecordedRequest) -> Reply:
        if request.output_format == "json_schema":
            return REFUSALS["vllm"]("json_schema")
        return good(request)

    server = serve(handler)
    judge = make_judge(server)

    async def one(i: int) -> Any:
        await gate.wait()
        return await judge.judge(QUERY, ANSWER, CHUNKS[i:])

    tasks = [asyncio.ensure_future(one(i)) for i in range(4)]
    gate.set()
    results = await asyncio.gather(*tasks)

    assert sum(r.format_fallbacks for r in results) == 1
    assert all(r.output_format == "json_object_schema" for r in results)
    assert formats(server.requests).count("json_object_schema") == 4


async def test_a_5xx_that_names_no_format_is_still_retried(serve: ServeFn, make_judge: MakeJudgeFn) -> None:
    calls = iter(range(100))

    def handler(request: RecordedRequest) -> Reply:
        if next(calls) == 0:
            return error_reply(503, "model is loading", headers={"retry-after-ms": "10"})
        return verdict_handler()(request)

    server = serve(handler)
    result = await make_judge(server).judge(QUERY, ANSWER, CHUNKS)
    assert formats(server.requests) == ["json_schema", "json_schema"]  # a transient error: same request
    assert result.format_fallbacks == 0


async def test_a_fixed_format_is_sent_as_is_and_its_refusal_fails_without_retries(
    serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    server = serve(refusing({"json_object"}, "llama_cpp"))
    ok = await make_judge(server, response_format="json_schema").judge(QUERY, ANSWER, CHUNKS)
    assert ok.format_fallbacks == 0 and formats(server.requests) == ["json_schema"]

    judge = make_judge(server, response_format="json_object", max_retries=3)
    with pytest.raises(JudgeError) as info:
        await judge.judge(QUERY, ANSWER, CHUNKS)
    assert info.value.error_type == "http_5xx" and "json_object" in str(info.value)
    assert formats(server.requests)[1:] == ["json_object"]  # one attempt: a refusal is not retried
    assert judge.output_format == "json_object"


def test_the_timeout_settings_reach_the_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    # A slow local model needs minutes per reply: both bounds come from the settings, else the judge's own.
    monkeypatch.setenv("CTXUTIL_JUDGE_TIMEOUT_S", "300")
    monkeypatch.setenv("CTXUTIL_JUDGE_DEADLINE_S", "900")
    judge = build_judge(Settings(judge="openai", judge_api_key=API_KEY))
    assert isinstance(judge, OpenAIJudge) and (judge.timeout_s, judge.deadline_s) == (300.0, 900.0)
    monkeypatch.delenv("CTXUTIL_JUDGE_TIMEOUT_S")
    monkeypatch.delenv("CTXUTIL_JUDGE_DEADLINE_S")
    default = build_judge(Settings(judge="openai", judge_api_key=API_KEY))
    assert isinstance(default, OpenAIJudge) and (default.timeout_s, default.deadline_s) == (30.0, 120.0)
    with pytest.raises(ValueError, match="judge_timeout_s"):
        Settings(judge_timeout_s=0)


def test_the_setting_fixes_the_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXUTIL_JUDGE_RESPONSE_FORMAT", "json_object")
    judge = build_judge(Settings(judge="openai", judge_api_key=API_KEY))
    assert isinstance(judge, OpenAIJudge) and judge.output_format == "json_object"
    assert build_judge(Settings(judge="openai", judge_api_key=API_KEY, judge_response_format="auto"))
    with pytest.raises(ValueError, match="judge_response_format"):
        Settings(judge_response_format="xml")
    with pytest.raises(ValueError, match="response_format"):
        OpenAIJudge(api_key=API_KEY, response_format="xml")  # type: ignore[arg-type]


async def test_the_step_is_counted_on_the_emitted_telemetry_even_when_the_evaluation_fails(
    serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    def handler(request: RecordedRequest) -> Reply:
        if request.output_format == "json_schema":
            return REFUSALS["llama_cpp"]("json_schema")
        return Reply(body=completion("not json", prompt_tokens=100, completion_tokens=5))

    server = serve(handler)
    judge = make_judge(server)
    run = await asyncio.to_thread(run_through_worker, judge, [(QUERY, ANSWER, CHUNKS[:1])] * 2)

    attributes = run.attributes()
    assert [a.get("error.type") for a in attributes] == ["malformed_response"] * 2
    assert sorted(a.get(ATTR_JUDGE_FORMAT_FALLBACKS, 0) for a in attributes) == [0, 1]
    # Tokens spent on a failed evaluation are on its telemetry too: 2 calls (call, repair) per evaluation.
    assert [a[ATTR_JUDGE_INPUT_TOKENS] for a in attributes] == [200, 200]
    assert run.tokens == {"input": 400, "output": 20}
    assert run.stats.failed_total == 2


async def test_the_format_used_is_on_the_emitted_telemetry(serve: ServeFn, make_judge: MakeJudgeFn) -> None:
    server = serve(refusing({"json_schema"}, "openai"))
    run = await asyncio.to_thread(run_through_worker, make_judge(server), [(QUERY, ANSWER, CHUNKS)])
    (attributes,) = run.attributes()
    assert attributes[ATTR_JUDGE_OUTPUT_FORMAT] == "json_object_schema"
    assert attributes[ATTR_JUDGE_FORMAT_FALLBACKS] == 1
    assert run.tokens["input"] > 0 and run.stats.evaluated == 1


# --- output bound ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "reasons"), [(EvaluationMode.GRANULAR, True), (EvaluationMode.FAST, False)])
async def test_every_call_carries_an_output_limit_from_chunks_and_mode(
    serve: ServeFn, make_judge: MakeJudgeFn, mode: EvaluationMode, reasons: bool
) -> None:
    server = serve(verdict_handler())
    metric = ContextualUtilization(judge=make_judge(server, max_chunks_per_call=3), mode=mode)
    await metric.execute(DatasetItem(query=QUERY, actual_output=ANSWER, retrieved_content=CHUNKS))
    limits = [r.output_limit for r in server.requests]
    assert limits == [
        ("max_tokens", output_token_limit(3, reasons)),
        ("max_tokens", output_token_limit(1, reasons)),
    ]
    assert output_token_limit(3, True) > output_token_limit(3, False) > output_token_limit(1, False)


async def test_a_refused_max_tokens_switches_to_max_completion_tokens_once(
    serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    server = serve(refusing_token_param("max_tokens"))
    judge = make_judge(server, max_retries=3)
    await judge.judge(QUERY, ANSWER, CHUNKS)
    await judge.judge(QUERY, ANSWER, CHUNKS)
    params = [r.output_limit[0] if r.output_limit else None for r in server.requests]
    assert params == ["max_tokens", "max_completion_tokens", "max_completion_tokens"]
    assert judge.output_token_param == "max_completion_tokens"
    assert formats(server.requests) == ["json_schema"] * 3  # the format was not what was refused


async def test_a_fixed_format_still_negotiates_the_limit_parameter(
    serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    server = serve(refusing_token_param("max_tokens"))
    result = await make_judge(server, response_format="json_object").judge(QUERY, ANSWER, CHUNKS)
    assert [r.output_limit[0] if r.output_limit else None for r in server.requests] == [
        "max_tokens",
        "max_completion_tokens",
    ]
    assert formats(server.requests) == ["json_object"] * 2 and result.format_fallbacks == 0


async def test_a_server_refusing_both_limits_fails_rather_than_run_unbounded(
    serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    server = serve(refusing_token_param("max_tokens", then=refusing_token_param("max_completion_tokens")))
    with pytest.raises(JudgeError) as info:
        await make_judge(server).judge(QUERY, ANSWER, CHUNKS)
    assert info.value.error_type == "http_4xx" and "max_completion_tokens" in str(info.value)
    assert all(r.output_limit is not None for r in server.requests) and len(server.requests) == 2


async def test_a_model_writing_until_the_limit_is_bounded_and_counted_output_truncated(
    serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    # Before: no limit was sent (the model wrote until its context ran out) and the failure was
    # counted malformed_response like any other bad reply.
    server = serve(rambling_handler())
    judge = make_judge(server)
    result = await ContextualUtilization(judge=judge).execute(
        DatasetItem(query=QUERY, actual_output=ANSWER, retrieved_content=CHUNKS)
    )
    assert result.label == "error" and result.error_type == "output_truncated"
    # The cut reply is split (no repair: it would be cut again); the first half is cut too: failed.
    assert [r.output_limit for r in server.requests] == [
        ("max_tokens", output_token_limit(4, True)),
        ("max_tokens", output_token_limit(2, True)),
    ]
    assert result.usage is not None
    assert result.usage.output_tokens == output_token_limit(4, True) + output_token_limit(2, True)


# --- what counts as a refusal ----------------------------------------------------------------------


def _sent(**fields: Any) -> bytes:
    return json.dumps({"model": "m", "messages": [], "max_tokens": 100, **fields}).encode()


SCHEMA = {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}


@pytest.mark.parametrize(
    ("status", "body", "sent", "feature"),
    [
        # Another field's validation error is not a format refusal, though it names 'text'.
        (422, {"detail": [{"loc": ["body", "messages", 0, "content"], "msg": "Input should be 'text'"}]},
         _sent(response_format=SCHEMA), None),
        # A format word where the request had no response_format: nothing to step down from.
        (500, {"error": {"message": "json_schema unsupported"}}, _sent(), None),
        # Rate limits and auth errors are never refusals, whatever they say.
        (429, {"error": {"message": "response_format requests are rate limited"}},
         _sent(response_format=SCHEMA), None),
        (400, {"error": {"message": "bad", "param": "response_format"}},
         _sent(response_format=SCHEMA), "format"),
        (400, {"error": {"message": "Unsupported parameter: 'max_tokens'", "param": "max_tokens"}},
         _sent(response_format=SCHEMA), "token_param"),
        (500, "upstream error", _sent(response_format=SCHEMA), None),
        # OpenAI's context-length error names the response_format schema's tokens but refuses no format
        # (it stepped the format down to prompt-only for the whole process before).
        (400, {"error": {"message": "This model's maximum context length is 128000 tokens. However, your "
                                    "messages resulted in 130000 tokens (including 317 in the "
                                    "response_format schemas.)", "param": "messages",
                         "code": "context_length_exceeded"}}, _sent(response_format=SCHEMA), None),
        # A field named at fault other than response_format: whatever the message says.
        (400, {"error": {"message": "messages too long for response_format json_schema",
                         "param": "messages"}}, _sent(response_format=SCHEMA), None),
        # FastAPI's body-level 422 echoes the whole request in "input": the echo names nothing.
        (422, {"detail": [{"type": "json_invalid", "loc": ["body", 12], "msg": "JSON decode error",
                           "input": {"response_format": {"type": "json_schema"}, "max_tokens": 100}}]},
         _sent(response_format=SCHEMA), None),
        # ... while a 422 locating the error in response_format refuses it.
        (422, {"detail": [{"loc": ["body", "response_format", "type"], "msg": "Input should be 'text'",
                           "input": "json_schema"}]}, _sent(response_format=SCHEMA), "format"),
        # A value error naming the parameter is not a refusal of it (it switched the parameter before).
        (400, {"error": {"message": "input length and `max_tokens` exceed context limit"}}, _sent(), None),
        # A value too large for the model is not a refusal of the parameter (the other would fail alike).
        (400, {"error": {"message": "max_tokens is too large: 100000. This model supports at most 16384 "
                                    "completion tokens", "param": "max_tokens"}}, _sent(), None),
    ],
)  # fmt: skip
def test_what_counts_as_a_refusal(status: int, body: Any, sent: bytes, feature: str | None) -> None:
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    refused = refused_feature(status, raw, sent)
    assert (refused.feature if refused else None) == feature


async def test_the_deadline_bounds_the_call_across_re_sends_after_refusals(
    serve: ServeFn, make_judge: MakeJudgeFn
) -> None:
    # Each re-send after a refusal got a fresh deadline: three slow refusals (0.8 s each) and then an
    # answer finished a call whose deadline was 2 s. Now the third request gets what is left: timeout.
    refuse = refusing({"json_schema", "json_object"}, "llama_cpp")

    def slow(request: RecordedRequest) -> Reply:
        reply = refuse(request)
        return dataclasses.replace(reply, delay_s=0.8) if reply.status >= 400 else reply

    server = serve(slow)
    judge = make_judge(server, deadline_s=2.0)
    with pytest.raises(JudgeError) as info:
        await judge.judge(QUERY, ANSWER, CHUNKS)
    assert info.value.error_type == "timeout"
    assert formats(server.requests)[:2] == ["json_schema", "json_object_schema"]


def test_a_placeholder_key_is_redacted_as_a_word_only() -> None:
    # OPENAI_API_KEY=none (servers needing no key): "got none. None of" stayed readable only in part.
    from ctxutil_otel.judges._negotiate import FeatureRefused
    from ctxutil_otel.judges._retry import translate

    error = translate(FeatureRefused(400, "format", "got none. None of the formats; key=none"), "none")
    assert error is not None and str(error) == "HTTP 400: got [REDACTED]. None of the formats; key=[REDACTED]"
    long_key = "sk-proj-abcdefghijklmnop"
    error = translate(FeatureRefused(400, "format", "bad key SK-PROJ-ABCDEFGH..."), long_key)
    assert error is not None and "ABCDEFGH" not in str(error) and "[REDACTED]" in str(error)


def test_the_settings_offer_the_judges_formats() -> None:
    # _settings.py spells the values out (it imports nothing of the judges): they must stay the same.
    from typing import get_args

    from ctxutil_otel.judges._negotiate import ResponseFormatSetting

    field = Settings.model_fields["judge_response_format"]
    assert get_args(field.annotation) == get_args(ResponseFormatSetting)
    assert field.default == "auto"
