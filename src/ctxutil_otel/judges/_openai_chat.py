"""One chat request of :class:`~ctxutil_otel.judges.OpenAIJudge`: the openai SDK client of each event loop
(with its response hooks: ``Retry-After``, capped error bodies, refusals of a request feature), the
request body, the re-sends the output-format negotiation asks for, one deadline over them all, and the
SDK's errors translated into :class:`~ctxutil_otel.judges.JudgeError` subclasses (the key cut out).
The judgement around it (batches, the repair call, the split into halves) is ``_openai.py``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import TYPE_CHECKING

from .._redact import register_secret
from ._base import JudgeError, JudgeTimeoutError, TokenUsage
from ._completion import ChatReply, chat_body, post_chat, read_reply
from ._negotiate import (
    FeatureRefused,
    Negotiation,
    OutputFormat,
    ResponseFormatSetting,
    negotiation_for,
    output_token_limit,
    refusal_hook,
    response_format_body,
)
from ._retry import (
    JudgeRefusalError,
    RetryAfterTooLong,
    error_body_hook,
    retry_after_hook,
    translate,
    within_deadline,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["ChatClient", "Judgement"]

_log = logging.getLogger("ctxutil_otel.judges.openai")


class Judgement:
    """What one :meth:`OpenAIJudge.judge` call spent and did: tokens, format steps, the format used."""

    def __init__(self) -> None:
        self.total = TokenUsage()
        self.fallbacks = 0
        self.format: OutputFormat | None = None

    def add(self, reply: ChatReply) -> None:
        self.total += reply.usage


class ChatClient:
    """Sends the chat requests of one :class:`OpenAIJudge` (its arguments, validated there). Imports the
    openai SDK and builds the client the first event loop will use (module docstring of ``_openai.py``:
    about 0.3 s of CPU, once per process). The key is kept here and never shown."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str,
        timeout_s: float,
        max_retries: int,
        max_retry_after_s: float,
        response_format: ResponseFormatSetting,
    ) -> None:
        self._model = model
        self._base_url = base_url
        self._api_key = api_key
        # From now on the key is cut out of whatever this process exports or logs, the HTTP stack's
        # DEBUG records included (``ctxutil_otel._redact``).
        register_secret(api_key)
        self._max_retries = max_retries
        self._max_retry_after_s = max_retry_after_s
        # The SDK is imported and the first client built here, where the judge is built (about
        # 300 ms of CPU), not on the first judge call: that runs on the evaluator's worker thread
        # under its CPU budget and holds the GIL against the application's threads. The modules stay
        # loaded (later imports are lookups).
        import httpx2
        import openai  # noqa: F401  (loaded for chat and translate)

        self._http_timeout = httpx2.Timeout(timeout_s, connect=min(timeout_s, 5.0))
        self._clients: dict[asyncio.AbstractEventLoop, AsyncOpenAI] = {}
        # A client not yet bound to a loop (it has no connections): taken by the first loop to judge.
        self._spare: list[AsyncOpenAI] = [self._new_client()]
        if response_format == "auto":
            # Shared by the process's judges of this endpoint (as the SDK resolved it) and model.
            self.negotiation = negotiation_for(str(self._spare[0].base_url), model)
        else:
            self.negotiation = Negotiation(fixed=response_format)

    def _new_client(self) -> AsyncOpenAI:
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        return AsyncOpenAI(
            api_key=self._api_key,
            base_url=self._base_url,
            timeout=self._http_timeout,
            max_retries=self._max_retries,
            http_client=DefaultAsyncHttpxClient(
                event_hooks={
                    # In this order: the error body is read (capped) before a refusal is looked for in it.
                    "response": [retry_after_hook(self._max_retry_after_s), error_body_hook(), refusal_hook()]
                }
            ),
        )

    def _client(self) -> AsyncOpenAI:
        # An httpx client's connections belong to the event loop that opened them: one client per loop.
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            # Clients of closed loops cannot be closed any more; drop them so they are collected.
            for stale in [other for other in self._clients if other.is_closed()]:
                del self._clients[stale]
            try:
                client = self._spare.pop()  # atomic: two loops never share it
            except IndexError:
                client = self._new_client()  # a further loop: about 20 ms of CPU (TLS trust store)
            self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the HTTP connections opened on the running event loop."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    async def chat(
        self,
        messages: list[dict[str, str]],
        reasons: bool,
        n_chunks: int,
        usage: Judgement,
        *,
        temperature: float | None,
        deadline_s: float,
    ) -> tuple[str | None, str | None]:
        """One chat request (SDK retries inside, under ``deadline_s``): ``(content, finish_reason)``.

        A refusal of the format or of the output-limit parameter is not retried: the request is sent
        again with the next format / the other parameter (``auto`` only), else it fails. Sent with
        the client's low-level ``post`` and read as plain JSON (see ``_completion``)."""
        import openai

        client = self._client()
        negotiation = self.negotiation
        # One deadline for the call, re-sends after a refusal included.
        end = time.monotonic() + deadline_s
        while True:
            fmt, param = negotiation.format, negotiation.token_param
            failure: JudgeError | None = None
            body = chat_body(self._model, messages, temperature, response_format_body(fmt, reasons))
            body[param] = output_token_limit(n_chunks, reasons)
            left = end - time.monotonic()
            if left <= 0:
                raise JudgeTimeoutError(f"no answer within the {deadline_s:g} s deadline of the call")
            try:
                raw = await within_deadline(functools.partial(post_chat, client, body), left)
            except FeatureRefused as exc:
                step = negotiation.on_refusal(exc, fmt, param)
                if step != "fail":
                    if step == "stepped":
                        usage.fallbacks += 1  # counted by the judgement that took the step, once
                    _log.info(
                        "judge server refused the request's %s (HTTP %d) for %s; now %s with %s",
                        "response_format " + fmt if exc.feature == "format" else param,
                        exc.status_code,
                        self._model,
                        negotiation.format,
                        negotiation.token_param,
                    )
                    continue
                failure = translate(exc, self._api_key)
            except (openai.OpenAIError, RetryAfterTooLong) as exc:
                failure = translate(exc, self._api_key)
            if failure is not None:
                raise failure  # outside the except block: the SDK error (may quote the key) is not chained
            break
        usage.format = fmt
        reply = read_reply(raw)
        usage.add(reply)
        if reply.refused or reply.finish_reason == "content_filter":
            raise JudgeRefusalError(f"the model refused to judge (finish_reason={reply.finish_reason})")
        return reply.content, reply.finish_reason
