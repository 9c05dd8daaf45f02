"""The judge's chat request body and the parts of the reply it reads, as plain JSON.

The judge sends its request with the openai client's low-level ``client.post("/chat/completions",
body=..., cast_to=httpx2.Response)`` (documented by the SDK for undocumented parameters and
endpoints: auth, retries, ``Retry-After`` and the ``APIStatusError`` subclasses are the client's, as
with ``chat.completions.create``), and reads the reply's JSON itself. The typed path spends about
0.9 ms more CPU per request (measured: 1.95 ms against 1.07 ms per judge call on this machine) on
transforming the ``messages`` TypedDicts and building the ``ChatCompletion`` model, and that CPU
runs on the evaluator's thread, which shares the GIL with the application's request threads.

Reply shape read (OpenAI's Chat Completions object): ``choices[0].message.content`` (string or
null), ``choices[0].message.refusal``, ``choices[0].finish_reason``, ``usage.prompt_tokens`` and
``usage.completion_tokens``; everything else is ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._base import TokenUsage
from ._retry import MalformedResponseError

__all__ = ["ChatReply", "chat_body", "read_reply"]


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
        input_tokens=_count(usage.get("prompt_tokens")), output_tokens=_count(usage.get("completion_tokens"))
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
