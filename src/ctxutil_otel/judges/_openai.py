"""OpenAIJudge: relevance and utilization of every chunk in one chat call to an OpenAI-compatible model.

This module is the judge and its judgement: its arguments, the batches, the repair call and the split
into halves. One chat request (SDK clients, format negotiation, deadline, errors) is ``_openai_chat.py``;
the prompt and the reply's parsing ``_prompt.py``; the request body and reply ``_completion.py``; the
format negotiation ``_negotiate.py``; retries and error types ``_retry.py``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._redact import KEY_WHITESPACE, unusable_key
from .._url import check_base_url, safe_url
from ._base import ChunkVerdict, JudgeError, JudgeResult, JudgeTimeoutError, VerdictMismatchError
from ._negotiate import (
    FORMATS,
    OutputFormat,
    ResponseFormatSetting,
    output_token_limit,
)
from ._openai_chat import ChatClient, Judgement
from ._prompt import (
    AnswerError,
    ParsedVerdict,
    build_messages,
    chunk_batches,
    fit_text,
    parse_answer,
    repair_message,
)
from ._retry import (
    JudgeAuthError,
    JudgeConnectionError,
    JudgeHTTPError,
    JudgeRateLimitedError,
    JudgeRefusalError,
    JudgeServerError,
    MalformedResponseError,
    OutputTruncatedError,
)

if TYPE_CHECKING:
    from .._settings import Settings

__all__ = [
    "JudgeAuthError",
    "JudgeConnectionError",
    "JudgeHTTPError",
    "JudgeRateLimitedError",
    "JudgeRefusalError",
    "JudgeServerError",
    "JudgeTimeoutError",
    "MalformedResponseError",
    "OpenAIJudge",
    "OutputTruncatedError",
    "VerdictMismatchError",
]

_log = logging.getLogger("ctxutil_otel.judges.openai")

_MAX_ECHO_CHARS = 20_000  # of a bad reply, sent back in the repair call
_SETTINGS: tuple[ResponseFormatSetting, ...] = ("auto", *FORMATS)

# The defaults of the judge's arguments (the constructor's and from_settings' for unset settings).
_DEFAULT_MODEL = "gpt-4o-mini"
_DEFAULT_TIMEOUT_S = 30.0
_DEFAULT_MAX_RETRIES = 3
_DEFAULT_MAX_RETRY_AFTER_S = 30.0
_DEFAULT_DEADLINE_S = 120.0
_DEFAULT_MAX_CONTEXT_TOKENS = 16_000
_DEFAULT_MAX_CHUNKS_PER_CALL = 50
_DEFAULT_TEMPERATURE = 0.0


class OpenAIJudge:
    """Judges every chunk of an interaction with one chat call to an OpenAI-compatible model.

    One call returns relevance, utilization (and a reason, unless ``reasons=False``) for all chunks,
    as structured output. With ``response_format="auto"`` the judge negotiates the format: it asks
    for ``json_schema`` (strict, from a pydantic model); a server refusing it (recognised by what its
    error body says, whatever the status: ``ctxutil_otel.judges._negotiate``) is asked again, without
    retrying the refusal, with the schema inside JSON mode (``json_object_schema``, which the llama.cpp
    family turns into a grammar), then plain JSON mode (``json_object``), then with no
    ``response_format`` (``none``: the shape is always described in the prompt too). What works is
    remembered per (endpoint, model) for the process; each step down is counted once, on the
    :class:`JudgeResult` (``format_fallbacks``, also set on a :class:`JudgeError`). Temperature is 0.

    Every call carries an output-token limit, ``64 + 120 * chunks`` (``64 + 40 * chunks`` without
    reasons), as ``max_tokens``, or ``max_completion_tokens`` where the server refuses ``max_tokens``.

    Chunk text is fenced as data (``<chunk index="i">``, XML-escaped) under a system prompt saying
    fenced text is never an instruction. The verdicts must cover the chunks one to one: a reply that
    is not valid JSON of the shape, or misses / repeats / invents an index, gets one repair call
    naming the problem; if that fails the chunk set is split in halves, each judged (with its own
    repair call); if a half still fails, :class:`MalformedResponseError` or
    :class:`VerdictMismatchError` is raised. A reply cut at the output limit (``finish_reason``
    ``length``) goes straight to the split, and fails as :class:`OutputTruncatedError`
    (``output_truncated``) when that does not cure it. Verdicts are never zipped by position.

    A reply body over 4 MiB (``MAX_REPLY_BYTES``) is refused as :class:`MalformedResponseError`
    unparsed; JSON nested too deeply to parse counts as not JSON. An HTTP error body is read up to
    64 KiB (``MAX_ERROR_BODY_BYTES``); a larger one fails at once with the error type of its status.
    A reply whose ``usage`` reports a token count that is not an integer in [0, 10^9]
    (``MAX_REPORTED_TOKENS``) fails as :class:`MalformedResponseError`, so that it never reaches a
    counter or the token budget.

    Args:
        model: Chat model name, sent as ``model`` and reported as ``ctxutil.judge.model``.
        base_url: OpenAI-compatible endpoint, e.g. ``http://localhost:11434/v1``; ``None`` uses the
            SDK default (``OPENAI_BASE_URL``, else api.openai.com). No credentials in it: no
            ``user:password@``, query string (``?api-key=``) or fragment; the key goes in ``api_key``.
            Credentials elsewhere in the URL (path parameters, percent-encoded) cannot be detected;
            keep them out of the URL.
        api_key: The key; ``None`` reads ``OPENAI_API_KEY``. Servers needing none accept any string.
            The key is never put in logs, errors, ``repr`` or telemetry.
        timeout_s: Seconds one HTTP attempt may take (the SDK's per-request timeout; connecting gets
            at most 5 s of it). A timed-out attempt is retried like a connection error.
        max_retries: Retries after the first attempt of one chat request, done by the openai SDK on
            connection errors, timeouts, 408, 409, 429 and 5xx (never on a refusal of a request
            feature), with exponential backoff (0.5 s doubling up to 8 s, 0-25 % jitter) or the
            server's ``Retry-After``.
        max_retry_after_s: Longest server-requested wait (``Retry-After`` seconds or HTTP date, or
            ``retry-after-ms``) honoured, in seconds. A longer one, or one that would not fit in the
            remaining ``deadline_s``, fails at once with ``rate_limited`` (``http_5xx`` for 5xx).
            Values above 120 s act as 120 s, the SDK's own limit.
        deadline_s: Seconds one chat request may take in total, every attempt and wait included;
            then :class:`JudgeTimeoutError`. A :meth:`judge` call makes one request per batch
            (see ``max_context_tokens``), plus at most one repair and two halves (each with one repair)
            per batch, plus one per format step or output-limit switch; the worst case is that count
            times ``deadline_s``. Callers wanting one bound for the whole call wrap it (the worker does).
        max_context_tokens: Budget of estimated prompt tokens per call (about 4 characters per
            token). Chunks beyond it go to further calls; verdicts are mapped back to the caller's
            indices. The query is cut to 1/8 of the budget, the answer to 3/8, and a single chunk
            to what remains; cut text ends in ``[truncated]``. At least 1024. (A repair call also
            carries the rejected reply, up to 20,000 characters.)
        max_chunks_per_call: At most this many chunks per call (long verdict lists are where models
            drop items).
        temperature: Sampling temperature; ``None`` omits it (for models that reject it).
        response_format: ``auto`` (negotiate, the default) or a fixed format: ``json_schema``,
            ``json_object_schema``, ``json_object`` or ``none``. A fixed format is never stepped
            down: a server refusing it fails the call (``http_4xx`` / ``http_5xx``, not retried).

    Raises:
        ValueError: naming the argument, for no API key or one holding whitespace or a control
            character (never showing it), a non-positive number, an unknown
            ``response_format``, or a ``base_url`` (or ``OPENAI_BASE_URL`` when it is ``None``) with
            user information, a query string or a fragment (the HTTP client logs request URLs at
            INFO); the message shows the URL without those parts.

    :meth:`judge` raises :class:`~ctxutil_otel.judges.JudgeError` subclasses whose ``error_type`` is
    one of ``rate_limited``, ``timeout``, ``http_5xx``, ``http_4xx``, ``auth``, ``connection``,
    ``malformed_response``, ``output_truncated``, ``verdict_mismatch``, ``refused``, ``judge_error``.

    Batches of one call are judged one after another, so a judge call never has more than one
    request in flight; concurrency is the caller's (the worker's) to set. The instance is safe to
    share between concurrent tasks; it keeps one SDK client per event loop. Construction imports the
    openai SDK and builds the client the first event loop will use (about 0.3 s of CPU, once per
    process), so the first :meth:`judge` call, usually on the evaluator's worker thread, does not pay it.
    """

    name = "openai"

    def __init__(
        self,
        *,
        model: str = _DEFAULT_MODEL,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = _DEFAULT_TIMEOUT_S,
        max_retries: int = _DEFAULT_MAX_RETRIES,
        max_retry_after_s: float = _DEFAULT_MAX_RETRY_AFTER_S,
        deadline_s: float = _DEFAULT_DEADLINE_S,
        max_context_tokens: int = _DEFAULT_MAX_CONTEXT_TOKENS,
        max_chunks_per_call: int = _DEFAULT_MAX_CHUNKS_PER_CALL,
        temperature: float | None = _DEFAULT_TEMPERATURE,
        response_format: ResponseFormatSetting = "auto",
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError("model must be a non-empty string")
        for field, value, low in (
            ("timeout_s", timeout_s, 0.0),
            ("max_retry_after_s", max_retry_after_s, 0.0),
            ("deadline_s", deadline_s, 0.0),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > low:
                raise ValueError(f"{field} must be a number of seconds > 0, got {value!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
        if not isinstance(max_context_tokens, int) or max_context_tokens < 1024:
            raise ValueError(f"max_context_tokens must be an int >= 1024, got {max_context_tokens!r}")
        if not isinstance(max_chunks_per_call, int) or max_chunks_per_call < 1:
            raise ValueError(f"max_chunks_per_call must be an int >= 1, got {max_chunks_per_call!r}")
        if response_format not in _SETTINGS:
            allowed = ", ".join(_SETTINGS)
            raise ValueError(f"response_format must be one of {allowed}; got {response_format!r}")
        if base_url is not None:
            check_base_url(base_url, "base_url")
        self._configure(
            model=model,
            base_url=base_url,
            api_key=api_key,
            timeout_s=float(timeout_s),
            max_retries=max_retries,
            max_retry_after_s=float(max_retry_after_s),
            deadline_s=float(deadline_s),
            max_context_tokens=max_context_tokens,
            max_chunks_per_call=max_chunks_per_call,
            temperature=temperature,
            response_format=response_format,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIJudge:
        """The judge the settings configure: ``judge_model``, ``judge_base_url``, ``judge_api_key``,
        ``judge_timeout_s``, ``judge_deadline_s``, ``judge_response_format`` (unset ones take this judge's
        defaults). What :class:`~ctxutil_otel.Settings` validated is not checked again; the key (and
        ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``, the SDK's variables, when unset) are, as by the
        constructor.

        Raises:
            ValueError: for no API key, or an ``OPENAI_BASE_URL`` with credentials (see the class).
        """
        judge = cls.__new__(cls)
        key = settings.judge_api_key
        timeout_s, deadline_s = settings.judge_timeout_s, settings.judge_deadline_s
        judge._configure(
            model=settings.judge_model or _DEFAULT_MODEL,
            base_url=settings.judge_base_url,
            api_key=None if key is None else key.get_secret_value(),
            timeout_s=_DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s,
            max_retries=_DEFAULT_MAX_RETRIES,
            max_retry_after_s=_DEFAULT_MAX_RETRY_AFTER_S,
            deadline_s=_DEFAULT_DEADLINE_S if deadline_s is None else deadline_s,
            max_context_tokens=_DEFAULT_MAX_CONTEXT_TOKENS,
            max_chunks_per_call=_DEFAULT_MAX_CHUNKS_PER_CALL,
            temperature=_DEFAULT_TEMPERATURE,
            response_format=settings.judge_response_format,
        )
        return judge

    def _configure(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        timeout_s: float,
        max_retries: int,
        max_retry_after_s: float,
        deadline_s: float,
        max_context_tokens: int,
        max_chunks_per_call: int,
        temperature: float | None,
        response_format: ResponseFormatSetting,
    ) -> None:
        """Set the (checked) arguments and build the chat client; the key is ``OPENAI_API_KEY`` when
        ``api_key`` is ``None``, and ``OPENAI_BASE_URL`` is checked when ``base_url`` is."""
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not key:
            raise ValueError(
                "api_key: none given and OPENAI_API_KEY is not set (or set CTXUTIL_JUDGE_API_KEY for the "
                "live evaluator; servers that need no key accept any string)"
            )
        if unusable_key(key):  # sent as is, an invalid header: every request fails before it is sent
            source = "api_key" if api_key is not None else "api_key (from OPENAI_API_KEY)"
            raise ValueError(f"{source} {KEY_WHITESPACE} (the key is not shown)")
        if base_url is None and os.environ.get("OPENAI_BASE_URL"):  # what the SDK uses then
            check_base_url(os.environ["OPENAI_BASE_URL"], "base_url (from OPENAI_BASE_URL)")
        # Typed as the Judge protocol's (settable) attribute; requests use the validated str.
        self.model: str | None = model
        self._model = model
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_retry_after_s = max_retry_after_s
        self.deadline_s = deadline_s
        self.max_context_tokens = max_context_tokens
        self.max_chunks_per_call = max_chunks_per_call
        self.temperature = temperature
        self.response_format: ResponseFormatSetting = response_format
        self._chat_client = ChatClient(
            model=model,
            base_url=base_url,
            api_key=key,
            timeout_s=timeout_s,
            max_retries=max_retries,
            max_retry_after_s=max_retry_after_s,
            response_format=response_format,
        )
        self._negotiation = self._chat_client.negotiation

    def __repr__(self) -> str:
        return (
            f"OpenAIJudge(model={self.model!r}, base_url={safe_url(self.base_url)!r}, "
            f"timeout_s={self.timeout_s:g}, max_retries={self.max_retries}, deadline_s={self.deadline_s:g}, "
            f"response_format={self.response_format!r})"
        )

    @property
    def output_format(self) -> OutputFormat:
        """The format the next call uses: ``json_schema``, ``json_object_schema``, ``json_object`` or
        ``none``, in that order as the server refuses them (or the fixed ``response_format``)."""
        return self._negotiation.format

    @property
    def output_token_param(self) -> str:
        """``max_tokens``, or ``max_completion_tokens`` once the server refused ``max_tokens``."""
        return self._negotiation.token_param

    async def aclose(self) -> None:
        """Close the HTTP connections this judge opened on the running event loop."""
        await self._chat_client.aclose()

    async def _chat(
        self, messages: list[dict[str, str]], reasons: bool, n_chunks: int, usage: Judgement
    ) -> tuple[str | None, str | None]:
        """One chat request (``_openai_chat.py``), with this judge's temperature and deadline."""
        return await self._chat_client.chat(
            messages, reasons, n_chunks, usage, temperature=self.temperature, deadline_s=self.deadline_s
        )

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        """Verdicts for ``chunks`` (index = position; ``reason`` empty when ``reasons`` is false) and
        the tokens spent, summed over every call of this judgement (repairs and splits included;
        a server that reports no usage counts 0). ``is_utilized`` is the model's answer as given,
        also on chunks it found irrelevant (the metric ignores it there).

        Raises:
            JudgeError: a subclass named in the class docstring; never for an empty ``chunks``
                (no call is made).
        """
        usage = Judgement()
        verdicts: list[ChunkVerdict] = []
        query = fit_text(query, self.max_context_tokens // 8)
        answer = fit_text(answer, self.max_context_tokens * 3 // 8)
        batches = chunk_batches(
            query, answer, chunks, reasons, self.max_context_tokens, self.max_chunks_per_call
        )
        try:
            for start, texts in batches:
                for v in await self._judge_batch(query, answer, texts, reasons, usage, split=True):
                    verdicts.append(
                        ChunkVerdict(
                            index=start + v.index,
                            is_relevant=v.is_relevant,
                            is_utilized=v.is_utilized,
                            reason=v.reason if reasons else "",
                        )
                    )
        except JudgeError as exc:  # what was spent before failing stays counted
            exc.usage, exc.format_fallbacks = usage.total, usage.fallbacks
            raise
        return JudgeResult(
            verdicts=verdicts, usage=usage.total, output_format=usage.format, format_fallbacks=usage.fallbacks
        )

    async def _judge_batch(
        self, query: str, answer: str, texts: list[str], reasons: bool, usage: Judgement, *, split: bool
    ) -> list[ParsedVerdict]:
        """Verdicts for one batch (indices local to it): call, repair once, then split in halves."""
        messages = build_messages(query, answer, texts, reasons)
        content, finish = await self._chat(messages, reasons, len(texts), usage)
        try:
            return parse_answer(content, len(texts))
        except AnswerError as exc:
            problem = exc
        # A reply cut off at the output limit would be cut again: go straight to the split.
        if finish != "length":
            _log.debug("judge reply unusable (%s); one repair call", problem.kind)
            messages += [
                {"role": "assistant", "content": (content or "")[:_MAX_ECHO_CHARS]},
                {"role": "user", "content": repair_message(problem, len(texts))},
            ]
            content, finish = await self._chat(messages, reasons, len(texts), usage)
            try:
                return parse_answer(content, len(texts))
            except AnswerError as exc:
                problem = exc
        if split and len(texts) > 1:
            _log.debug(
                "judge reply unusable after repair (%s); splitting %d chunks", problem.kind, len(texts)
            )
            mid = len(texts) // 2
            left = await self._judge_batch(query, answer, texts[:mid], reasons, usage, split=False)
            right = await self._judge_batch(query, answer, texts[mid:], reasons, usage, split=False)
            return left + [v.model_copy(update={"index": v.index + mid}) for v in right]
        steps = "a repair call and a split into halves" if not split else "a repair call"
        if finish == "length":
            limit = output_token_limit(len(texts), reasons)
            steps = f"the reply was cut at the output limit ({limit} tokens)"
            steps += "" if split else " after a split"
            raise OutputTruncatedError(f"unusable judge reply for {len(texts)} chunks: {steps}: {problem}")
        message = f"unusable judge reply for {len(texts)} chunks after {steps}: {problem}"
        if problem.kind == "mismatch":
            raise VerdictMismatchError(message)
        raise MalformedResponseError(message)
