"""Transport policy of the OpenAI judge: what the SDK's retries lack, and SDK errors as JudgeErrors.

The openai SDK already retries connection errors, timeouts, 408/409/429 and 5xx answers with
exponential backoff (0.5 s doubling, at most 8 s, minus 0-25 % jitter) and honours ``Retry-After``
(seconds, ``retry-after-ms``, or an HTTP date; up to 120 s, beyond that it does not retry). We keep
that machinery and add only:

* a **size cap on HTTP error bodies** (:data:`MAX_ERROR_BODY_BYTES`): on its last attempt the SDK
  reads a 4xx/5xx body in full before raising its status error, so a server answering an error with
  an endless body would be read without end (:func:`error_body_hook`, an httpx response hook);
* a **lower cap on server-requested waits** (``max_retry_after_s``) that also refuses a wait longer
  than what is left of the request's deadline: the judge fails fast with ``rate_limited`` (or
  ``http_5xx``) instead of sleeping into a timeout (:func:`retry_after_hook`, an httpx response hook);
* a **deadline** over one chat request including every attempt and wait (:func:`within_deadline`);
* **translation** of SDK exceptions into :class:`~ctxutil_otel.judges.JudgeError` subclasses with a
  low-cardinality ``error_type``, with the API key redacted from every message (:func:`translate`).
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, ClassVar, TypeVar

from .._redact import redact, redact_key
from ._base import JudgeError, JudgeTimeoutError
from ._negotiate import FeatureRefused, server_message

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "MAX_ERROR_BODY_BYTES",
    "JudgeAuthError",
    "JudgeConnectionError",
    "JudgeHTTPError",
    "JudgeRateLimitedError",
    "JudgeRefusalError",
    "JudgeServerError",
    "MalformedResponseError",
    "OutputTruncatedError",
    "RetryAfterTooLong",
    "content_length",
    "error_body_hook",
    "http_error_class",
    "parse_retry_after",
    "retry_after_hook",
    "translate",
    "within_deadline",
]

T = TypeVar("T")
_RETRYABLE = frozenset({408, 409, 429})

MAX_ERROR_BODY_BYTES = 64 * 1024
"""Largest HTTP error (4xx/5xx) body the judge reads: 64 KiB as received, and 64 KiB once decoded
(a compressed body is decoded in one piece from at most 64 KiB received: at most about 64 MiB in
memory for a while, deflate's ratio being at most 1032:1). OpenAI-style error bodies are a few
hundred bytes and proxy error pages a few KB; only the body's short ``error.message`` is used (in
the error message, 200 characters at most)."""


class JudgeHTTPError(JudgeError):
    """The server answered with an HTTP error that retries did not cure (4xx other than 401/403/429)."""

    error_type: ClassVar[str] = "http_4xx"

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class JudgeServerError(JudgeHTTPError):
    """The server kept answering 5xx until the attempts ran out."""

    error_type: ClassVar[str] = "http_5xx"


class JudgeRateLimitedError(JudgeHTTPError):
    """429 until the attempts ran out, or a ``Retry-After`` longer than the judge will wait."""

    error_type: ClassVar[str] = "rate_limited"


class JudgeAuthError(JudgeHTTPError):
    """401 or 403: the API key is missing, wrong, or lacks access to the model."""

    error_type: ClassVar[str] = "auth"


class JudgeConnectionError(JudgeError):
    """The server could not be reached (refused, reset, DNS, TLS) on any attempt."""

    error_type: ClassVar[str] = "connection"


class MalformedResponseError(JudgeError):
    """The model's reply was not JSON of the answer shape, even after a repair call and a split."""

    error_type: ClassVar[str] = "malformed_response"


class OutputTruncatedError(MalformedResponseError):
    """The model's reply was cut at the output-token limit (``finish_reason=length``) and stayed
    unusable after a split into halves."""

    error_type: ClassVar[str] = "output_truncated"


class JudgeRefusalError(JudgeError):
    """The model refused to answer (``message.refusal``) or its reply was filtered."""

    error_type: ClassVar[str] = "refused"


def http_error_class(status: int) -> type[JudgeHTTPError]:
    """The :class:`JudgeHTTPError` subclass for an HTTP error status: 401/403 ``auth``, 429
    ``rate_limited``, 5xx ``http_5xx``, any other ``http_4xx``."""
    if status in (401, 403):
        return JudgeAuthError
    if status == 429:
        return JudgeRateLimitedError
    if status >= 500:
        return JudgeServerError
    return JudgeHTTPError


class RetryAfterTooLong(Exception):
    """Raised by :func:`retry_after_hook` out of the SDK's request loop (not an SDK error, so the
    SDK neither retries nor wraps it)."""

    def __init__(self, status_code: int, retry_after: float, limit: float) -> None:
        super().__init__(f"Retry-After {retry_after:.1f} s exceeds the {limit:.1f} s the judge will wait")
        self.status_code = status_code
        self.retry_after = retry_after
        self.limit = limit


_deadline: ContextVar[float | None] = ContextVar("ctxutil_openai_judge_deadline", default=None)


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asks to wait: ``retry-after-ms``, else ``Retry-After`` as seconds or as an
    HTTP date (RFC 9110 section 10.2.3); ``None`` when absent or unparseable. ``now`` is Unix time."""
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        return seconds if math.isfinite(seconds) else math.inf
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        when = email.utils.mktime_tz(parsed)
    except (TypeError, ValueError, OverflowError):
        return None
    return float(when) - (time.time() if now is None else now)


def retry_after_hook(max_retry_after_s: float) -> Callable[[httpx2.Response], Awaitable[None]]:
    """An httpx ``response`` event hook refusing server-requested waits the judge will not make.

    On a retryable answer (408, 409, 429, 5xx) whose ``Retry-After`` exceeds ``max_retry_after_s``
    seconds, or what is left of the current request's deadline, it raises :class:`RetryAfterTooLong`.
    """

    async def hook(response: httpx2.Response) -> None:
        status = response.status_code
        if status not in _RETRYABLE and status < 500:
            return
        wait = parse_retry_after(response.headers)
        if wait is None:
            return
        limit = max_retry_after_s
        deadline = _deadline.get()
        if deadline is not None:
            limit = min(limit, deadline - time.monotonic())
        if wait > limit:
            raise RetryAfterTooLong(status, wait, max(0.0, limit))

    return hook


def content_length(response: httpx2.Response) -> int | None:
    """The response's declared ``Content-Length`` in bytes; ``None`` when absent, not a number or negative."""
    try:
        value = int(response.headers.get("content-length", ""))
    except ValueError:
        return None
    return value if value >= 0 else None


class _ErrorBodyTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


@functools.cache
def _capped_stream_class() -> Callable[[httpx2.AsyncByteStream, int], httpx2.AsyncByteStream]:
    # Defined on first use: httpx2 is imported with the openai SDK, not with this module.
    import httpx2

    class CappedStream(httpx2.AsyncByteStream):
        """A response's byte stream that raises :class:`_ErrorBodyTooLarge` once more than ``limit``
        bytes came from ``inner``: reading stops there (the response is then closed by httpx)."""

        def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
            self._inner = inner
            self._limit = limit

        async def __aiter__(self) -> AsyncIterator[bytes]:
            size = 0
            async for part in self._inner:
                size += len(part)
                if size > self._limit:
                    raise _ErrorBodyTooLarge(size)
                yield part

        async def aclose(self) -> None:
            await self._inner.aclose()

    return CappedStream


def error_body_hook(limit: int = MAX_ERROR_BODY_BYTES) -> Callable[[httpx2.Response], Awaitable[None]]:
    """An httpx ``response`` event hook reading an HTTP error (status >= 400) body under ``limit`` bytes.

    httpx runs response hooks before the SDK looks at the status, so every 4xx/5xx body is read
    here, capped, on every attempt; the SDK's own read (``aread()`` before it raises its status
    error) then returns what was read here. A body within the limit is left to the SDK as usual (its
    retries of 408/409/429/5xx and its status errors are unchanged). A failure reading it is the
    SDK's to retry (a timeout or connection error while reading), except an undecodable body.

    Raises:
        JudgeHTTPError: the subclass for the status (:func:`http_error_class`: ``auth``,
            ``rate_limited``, ``http_5xx``, ``http_4xx``), naming the status, the size and the limit
            (never the body), when the declared ``Content-Length`` exceeds ``limit`` (nothing is
            read), when more than ``limit`` bytes arrive or decode from them (reading stops there),
            or when the body cannot be decoded (``Content-Encoding``). Raised out of the SDK's
            request loop, so such an answer is not retried.
    """

    async def hook(response: httpx2.Response) -> None:
        import httpx2

        status = response.status_code
        if status < 400 or response.is_stream_consumed:
            return
        cls = http_error_class(status)
        declared = content_length(response)
        if declared is not None and declared > limit:
            raise cls(
                f"HTTP {status}: the error body declares {declared} bytes (Content-Length), over the "
                f"{limit}-byte limit (MAX_ERROR_BODY_BYTES); not read",
                status,
            )
        stream = response.stream
        if isinstance(stream, httpx2.AsyncByteStream):
            response.stream = _capped_stream_class()(stream, limit)
        problem = None
        try:
            content = await response.aread()
        except _ErrorBodyTooLarge as exc:
            problem = f"more than {limit} bytes, the limit (MAX_ERROR_BODY_BYTES); stopped after {exc.size}"
        except httpx2.DecodingError:
            problem = "not decodable (Content-Encoding)"
        else:
            if len(content) > limit:
                problem = (
                    f"{len(content)} bytes once decoded, over the {limit}-byte limit (MAX_ERROR_BODY_BYTES)"
                )
        if problem is not None:  # raised outside the except blocks: nothing of the body is chained
            raise cls(f"HTTP {status}: the error body is {problem}", status)

    return hook


async def within_deadline(make: Callable[[], Awaitable[T]], seconds: float) -> T:
    """Await ``make()`` for at most ``seconds``; the deadline is visible to :func:`retry_after_hook`.

    Raises:
        JudgeTimeoutError: when the deadline passes (the request is cancelled).
    """

    async def run() -> T:
        token = _deadline.set(time.monotonic() + seconds)
        try:
            return await make()
        finally:
            _deadline.reset(token)

    try:
        return await asyncio.wait_for(run(), timeout=seconds)
    except asyncio.TimeoutError:
        pass
    raise JudgeTimeoutError(f"no answer within the {seconds:g} s deadline of one chat request")


def _redact(text: str, secret: str | None) -> str:
    """``text`` with the key cut out: the one redaction of ``ctxutil_otel._redact`` (the key, any run of 8
    or more of its leading or trailing characters in any case; a placeholder under 8 characters as a whole
    word), plus key lookalikes and every other registered secret."""
    return redact(redact_key(text, secret))


def translate(exc: BaseException, secret: str | None) -> JudgeError | None:
    """The :class:`JudgeError` for an SDK (or hook) exception, or ``None`` if it is not one we map.

    Messages carry the status code and the server's short error message with ``secret`` (the API
    key) replaced by ``[REDACTED]``; never request content. Raise the result outside the ``except``
    block so the SDK exception (whose text may hold the key) is not chained as ``__context__``.
    """
    import openai

    if isinstance(exc, RetryAfterTooLong):
        return http_error_class(exc.status_code)(f"HTTP {exc.status_code}: {exc}", exc.status_code)
    if isinstance(exc, FeatureRefused):  # a refusal the judge could not step down from
        detail = _redact(exc.detail, secret)[:200]
        message = f"HTTP {exc.status_code}" + (f": {detail}" if detail else "")
        return http_error_class(exc.status_code)(message, exc.status_code)
    if isinstance(exc, openai.APITimeoutError):
        return JudgeTimeoutError("the judge's HTTP request timed out on every attempt")
    if isinstance(exc, openai.APIConnectionError):
        return JudgeConnectionError("could not connect to the judge's server on any attempt")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = _redact(server_message(exc.body), secret)[:200]
        message = f"HTTP {status}" + (f": {detail}" if detail else "")
        return http_error_class(status)(message, status)
    if isinstance(exc, openai.OpenAIError):
        return JudgeError(_redact(f"{type(exc).__name__}: {exc}", secret)[:300])
    return None
