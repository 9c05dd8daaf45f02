"""The judge's chat request (JSON body, capped read) and the parts of the reply it reads.

The judge sends its request with the openai client's low-level ``client.post("/chat/completions",
body=..., cast_to=httpx2.Response)`` (documented by the SDK for undocumented parameters and
endpoints: auth, retries, ``Retry-After`` and the ``APIStatusError`` subclasses are the client's, as
with ``chat.completions.create``), and reads the reply's JSON itself. The typed path spends about
0.9 ms more CPU per request (measured: 1.95 ms against 1.07 ms per judge call on this machine) on
transforming the ``messages`` TypedDicts and building the ``ChatCompletion`` model, and that CPU
runs on the evaluator's thread, which shares the GIL with the application's request threads.

Reply shape read (OpenAI's Chat Completions object): ``choices[0].message.content`` (string or
null), ``choices[0].message.refusal``, ``choices[0].finish_reason``, ``usage.prompt_tokens`` and
``usage.completion_tokens``; everything else is ignored. A token count that is not an integer in
[0, ``MAX_REPORTED_TOKENS``] (10^9; a buggy server sends ``2**64 - 1`` for -1) fails the reply as
``malformed_response``: it never reaches the token counter or the token budget.

The body is requested unread (``stream=True``; the SDK hands back the ``httpx2.Response`` as it is for
``cast_to=httpx2.Response``) and read by :func:`read_body` under :data:`MAX_REPLY_BYTES`, so an
oversized reply is neither held in memory in full nor parsed, echoed or split on the evaluator's thread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._base import MAX_REPORTED_TOKENS, JudgeTimeoutError, TokenUsage
from ._retry import JudgeConnectionError, MalformedResponseError, content_length

if TYPE_CHECKING:
    import httpx2
    from openai import AsyncOpenAI

__all__ = [
    "MAX_REPLY_BYTES",
    "ChatReply",
    "chat_body",
    "post_chat",
    "read_body",
    "read_reply",
]

MAX_REPLY_BYTES = 4 * 1024 * 1024
"""Largest chat completion body the judge reads: 4 MiB (bytes after content decoding). A verdict
reply is a few hundred bytes per chunk (about 10 KB for 50 chunks with reasons); a larger body is a
misbehaving server or model, refused as ``malformed_response``."""


def chat_body(
    model: str, messages: list[dict[str, str]], temperature: float | None, response_format: Any
) -> dict[str, Any]:
    """The JSON body of one chat request; ``temperature`` ``None`` and ``response_format`` ``None``
    are left out (for servers or models that reject them)."""
    body: dict[str, Any] = {"model": model, "messages": messages}
    if temperature is not None:
        body["temperature"] = temperature
    if response_format is not None:
        body["response_format"] = response_format
    return body


@dataclass(frozen=True, slots=True)
class ChatReply:
    """What the judge uses of one chat completion.

    Attributes:
        content: The first choice's message text (``None`` when absent or null).
        finish_reason: ``stop``, ``length``, ``content_filter``, ... (``None`` when absent).
        refused: The message carries a non-empty ``refusal``.
        usage: Tokens the server reported (zeros when it reports none).
    """

    content: str | None
    finish_reason: str | None
    refused: bool
    usage: TokenUsage


async def read_body(response: httpx2.Response, limit: int = MAX_REPLY_BYTES) -> bytes:
    """The body of an unread (streamed) response, at most ``limit`` bytes; the response is closed.

    Raises:
        MalformedResponseError: naming the size and the limit (never the content) when the declared
            ``Content-Length`` exceeds ``limit`` (refused before reading any of the body), or when
            more than ``limit`` bytes arrive (reading stops there: chunked or compressed bodies).
        JudgeTimeoutError: when the body stops arriving for the client's read timeout.
        JudgeConnectionError: when the connection fails while the body is read. (The SDK retries
            failures up to the response headers; the body is read after its retry loop.)
    """
    import httpx2

    try:
        declared = content_length(response)
        if declared is not None and declared > limit:
            raise MalformedResponseError(
                f"the judge server's reply declares {declared} bytes (Content-Length), over the "
                f"{limit}-byte limit (MAX_REPLY_BYTES); not read"
            )
        parts: list[bytes] = []
        size = 0
        async for part in response.aiter_bytes():
            size += len(part)
            if size > limit:
                raise MalformedResponseError(
                    f"the judge server's reply is more than {limit} bytes, the limit (MAX_REPLY_BYTES); "
                    f"stopped reading after {size} bytes"
                )
            parts.append(part)
        return b"".join(parts)
    except httpx2.TimeoutException:
        raise JudgeTimeoutError("the judge server's reply body did not arrive within the timeout") from None
    except httpx2.DecodingError:
        raise MalformedResponseError("the judge server's reply body could not be decoded") from None
    except httpx2.RequestError as exc:
        kind = type(exc).__name__
        raise JudgeConnectionError(f"the connection failed while the reply was read ({kind})") from None
    finally:
        await response.aclose()


async def post_chat(client: AsyncOpenAI, body: dict[str, Any]) -> bytes:
    """POST one chat request (the SDK's auth, retries and status errors) and read its body capped.

    ``stream=True`` with ``cast_to=httpx2.Response``: the SDK returns the response with its body
    unread, so :func:`read_body` can refuse an oversized one before or while reading it."""
    import httpx2

    response = await client.post(
        "/chat/completions", body=body, cast_to=httpx2.Response, stream=True, stream_cls=None
    )
    return await read_body(response)


def read_reply(raw: bytes) -> ChatReply:
    """Read a chat completion's JSON body.

    Raises:
        MalformedResponseError: when the body is not JSON (nested too deeply included), or not an
            object with a ``choices`` list whose entries are objects (a reply with no choices is not
            an error: no content).
    """
    try:
        payload = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        kind = exc.__class__.__name__
        raise MalformedResponseError(f"the judge server's reply is not JSON ({kind})") from None
    except RecursionError:  # json's C decoder recurses once per nesting level
        raise MalformedResponseError("the judge server's reply is not JSON (nested too deeply)") from None
    if not isinstance(payload, Mapping):
        raise MalformedResponseError("the judge server's reply is not a JSON object")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not all(isinstance(c, Mapping) for c in choices):
        raise MalformedResponseError("the judge server's reply has no 'choices' list of objects")
    usage = _usage(payload.get("usage"))
    if not choices:
        return ChatReply(None, None, False, usage)
    choice = choices[0]
    message = choice.get("message")
    message = message if isinstance(message, Mapping) else {}
    content = message.get("content")
    finish = choice.get("finish_reason")
    return ChatReply(
        content=content if isinstance(content, str) else None,
        finish_reason=finish if isinstance(finish, str) else None,
        refused=bool(message.get("refusal")),
        usage=usage,
    )


def _usage(usage: object) -> TokenUsage:
    if not isinstance(usage, Mapping):
        return TokenUsage()
    return TokenUsage(
        input_tokens=_count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
        output_tokens=_count(usage.get("completion_tokens"), "usage.completion_tokens"),
    )


def _count(value: object, field: str) -> int:
    """A reported token count: absent or null is 0; anything else must be an integer (``12.0`` counts as
    12) in [0, :data:`MAX_REPORTED_TOKENS`], or the reply is refused (before any counter or budget sees
    it)."""
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():  # 12.0 from a server that writes numbers so
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REPORTED_TOKENS:
        shown = repr(value)
        shown = shown if len(shown) <= 24 else f"{shown[:20]}... ({len(shown)} characters)"
        raise MalformedResponseError(
            f"the judge server's reply reports {field} = {shown}, not an integer in "
            f"[0, {MAX_REPORTED_TOKENS}] (MAX_REPORTED_TOKENS); its usage is not counted"
        )
    return value
