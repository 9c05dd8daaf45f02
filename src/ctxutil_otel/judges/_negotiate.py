"""What the judge's server accepts: the output format, the output-limit parameter, and the output bound.

OpenAI-compatible servers differ in what they accept and in how they refuse what they do not:

================================  ======================================================================
server                            ``response_format`` ``json_schema`` refused with
================================  ======================================================================
OpenAI, Azure OpenAI              accepted (strict structured outputs)
vLLM, Ollama, LM Studio           accepted (recent versions); older ones 400 naming ``response_format``
llama-cpp-python's server         **500**, body ``Input should be 'text' or 'json_object'``
TGI                               422, ``unknown variant `json_schema`, expected one of ...``
================================  ======================================================================

So a refusal is recognised by what the server *says*, not by its status: any 4xx/5xx (other than 401,
403, 408, 409 and 429, which mean something else) whose error body names ``response_format`` or the
format type the request asked for (``json_schema``, ``json_object``) refuses the format; one naming
the output-limit parameter the request carried (``max_tokens`` / ``max_completion_tokens``) refuses
that parameter. :func:`refusal_hook` reads that
in an httpx response hook, before the openai SDK's retry loop sees the answer, and raises
:class:`FeatureRefused` out of it: a refusal is never retried (retrying it was issue 16's 40 of 40
``http_5xx``).

The judge then steps down the ladder :data:`FORMATS` (``json_schema`` -> ``json_object_schema``,
the llama.cpp family's JSON mode constrained by a schema, ``{"type": "json_object", "schema": ...}``
-> ``json_object`` -> ``none``, the answer shape described in the prompt only), and switches the
output-limit parameter between :data:`TOKEN_PARAMS`. What works is remembered per (endpoint,
model) in :class:`Negotiation`, shared by every judge of the process for that pair.

``max_tokens`` is sent first: every server listed accepts it, and OpenAI refuses it explicitly (400,
``param: max_tokens``) only for reasoning models, which want ``max_completion_tokens``; a server
that does not know ``max_completion_tokens`` may ignore it silently, and then nothing bounds the reply.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, get_args

from .._fork import ForkSafeLock, reinit_after_fork
from ._prompt import SCHEMA_NAME, response_schema

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "FORMATS",
    "TOKEN_PARAMS",
    "FeatureRefused",
    "Negotiation",
    "OutputFormat",
    "RefusalStep",
    "ResponseFormatSetting",
    "TokenParam",
    "forget_negotiations",
    "negotiation_for",
    "output_token_limit",
    "refusal_hook",
    "refused_feature",
    "response_format_body",
    "server_message",
]

OutputFormat = Literal["json_schema", "json_object_schema", "json_object", "none"]
ResponseFormatSetting = Literal["auto", "json_schema", "json_object_schema", "json_object", "none"]
TokenParam = Literal["max_tokens", "max_completion_tokens"]
RefusalStep = Literal["stepped", "resend", "fail"]

FORMATS: tuple[OutputFormat, ...] = get_args(OutputFormat)
"""The output formats, best first: the order the judge steps down in."""
TOKEN_PARAMS: tuple[TokenParam, ...] = get_args(TokenParam)
"""The output-limit parameters, in the order tried."""

_NOT_A_REFUSAL = frozenset({401, 403, 408, 409, 429})  # auth, retryable: they mean something else
_FORMAT_WORDS = ("response_format", "response format")
# "max_tokens is too large: 100000. This model supports at most 16384 completion tokens" (OpenAI):
# the other parameter would be refused the same way.
_VALUE_WORDS = (
    "too large", "at most", "must be less", "must be <=", "exceed",
    "context length", "context limit", "context window", "maximum context",
)  # fmt: skip
_MAX_REGISTRY = 64  # (endpoint, model) pairs remembered; the oldest is forgotten beyond it

# Output bound: a verdict without a reason is about 20 tokens ({"index": 12, "is_relevant": false,
# "is_utilized": false}), a reason ("one short sentence") about 30 more; the limit leaves twice that.
_BASE_TOKENS = 64
_PER_CHUNK_TOKENS = {False: 40, True: 120}


def output_token_limit(n_chunks: int, reasons: bool) -> int:
    """Output tokens one call for ``n_chunks`` chunks may generate: ``64 + n * 120`` with reasons,
    ``64 + n * 40`` without (about twice what a well-formed answer takes)."""
    return _BASE_TOKENS + max(1, n_chunks) * _PER_CHUNK_TOKENS[reasons]


def response_format_body(fmt: OutputFormat, reasons: bool) -> dict[str, Any] | None:
    """The request's ``response_format`` for ``fmt`` (``None`` for ``none``: the prompt alone)."""
    if fmt == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": SCHEMA_NAME, "schema": response_schema(reasons), "strict": True},
        }
    if fmt == "json_object_schema":  # the llama.cpp family: JSON mode constrained by a grammar
        return {"type": "json_object", "schema": response_schema(reasons)}
    if fmt == "json_object":
        return {"type": "json_object"}
    return None


class FeatureRefused(Exception):
    """An HTTP error answer naming a request feature the server does not take (see the module
    docstring). Raised by :func:`refusal_hook` out of the SDK's request loop (not an SDK error: never
    retried). ``detail`` is the server's short message (up to 200 characters, not yet redacted)."""

    def __init__(self, status_code: int, feature: Literal["format", "token_param"], detail: str) -> None:
        super().__init__(f"HTTP {status_code} refusing the request's {feature}")
        self.status_code = status_code
        self.feature = feature
        self.detail = detail


def server_message(payload: object) -> str:
    """The server's own short error message in a decoded error body (up to 200 characters), or ``""``.

    Reads OpenAI's ``{"error": {"message": ...}}``, a bare ``{"error": "..."}`` and FastAPI's
    ``{"detail": [{"msg": ...}]}`` / ``{"detail": "..."}`` (llama-cpp-python, TGI)."""
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:200]
        if isinstance(error, str):
            return error[:200]
        detail = payload.get("detail")
        if isinstance(detail, list) and detail and isinstance(detail[0], dict):  # FastAPI's 422
            return str(detail[0].get("msg", ""))[:200]
        if isinstance(detail, str):
            return detail[:200]
    return ""


def _short_message(payload: object, text: str) -> str:
    return server_message(payload) or text[:200]


def _said(payload: object, text: str) -> tuple[str, object, bool]:
    """What an error body says, without what it echoes of the request: ``(words, param, structured)``.

    OpenAI's ``{"error": {"message", "param", "code"}}`` gives its message and ``param``; FastAPI's 422
    ``{"detail": [{"loc", "msg", "input"}]}`` (llama-cpp-python, TGI) its messages and locations, not its
    ``input`` (which may echo the whole request body); anything else its whole text. ``structured`` is
    True when the server named the field at fault (``param`` or ``loc``): then only that counts."""
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict):
            param = error.get("param")
            if error.get("code") == "context_length_exceeded":  # names response_format's tokens, refuses none
                return "", None, True
            return str(error.get("message", "")).lower(), param, isinstance(param, str) and bool(param)
        detail = payload.get("detail")
        if isinstance(detail, list) and detail and all(isinstance(d, dict) for d in detail):
            locs = [".".join(str(part) for part in d.get("loc") or ()) for d in detail]
            words = " ".join(f"{loc} {d.get('msg', '')}" for loc, d in zip(locs, detail, strict=True))
            return words.lower(), ",".join(locs), all(locs)
    return text.lower(), None, False


def refused_feature(status: int, body: bytes, request: bytes) -> FeatureRefused | None:
    """The refusal an HTTP error answer states, or ``None``.

    ``body`` is the error body, ``request`` the JSON request body: a refusal must name something
    the request carried (a ``response_format``, or its output-limit parameter). Where the server names
    the field at fault (OpenAI's ``param``, FastAPI's ``loc``), only that field counts: an error about
    ``messages`` that mentions the ``response_format`` schema's tokens (OpenAI's context-length error)
    is not a refusal of the format.
    """
    if status < 400 or status in _NOT_A_REFUSAL:
        return None
    try:
        sent = json.loads(request)
    except ValueError:
        return None
    if not isinstance(sent, dict):
        return None
    text = body.decode("utf-8", "replace")
    try:
        payload: object = json.loads(text)
    except ValueError:
        payload = None
    said, param, structured = _said(payload, text)
    named = str(param) if structured else said
    fmt = sent.get("response_format")
    if isinstance(fmt, dict):
        # The body names the parameter, or the type the request asked for.
        words = (*_FORMAT_WORDS, str(fmt.get("type", "response_format")).lower())
        if any(word in named for word in words):
            return FeatureRefused(status, "format", _short_message(payload, text))
    if any(word in said for word in _VALUE_WORDS):  # the value is refused, not the parameter
        return None
    for name in TOKEN_PARAMS:
        if name in sent and name in named:
            return FeatureRefused(status, "token_param", _short_message(payload, text))
    return None


def refusal_hook() -> Callable[[httpx2.Response], Awaitable[None]]:
    """An httpx ``response`` hook raising :class:`FeatureRefused` for an answer refusing a feature
    of the request. It runs after :func:`~ctxutil_otel.judges._retry.error_body_hook` has read the
    body (under its size cap), before the SDK looks at the status."""

    async def hook(response: httpx2.Response) -> None:
        status = response.status_code
        if status < 400 or status in _NOT_A_REFUSAL or not response.is_stream_consumed:
            return
        refused = refused_feature(status, response.content, response.request.content)
        if refused is not None:
            raise refused

    return hook


class Negotiation:
    """What one (endpoint, model) accepts, as found so far: shared by the judges that talk to it.

    ``format`` starts at ``json_schema`` (or at the fixed format) and only steps down;
    ``token_param`` starts at ``max_tokens``. Thread-safe: a step is taken once however many
    judgements met the same refusal, and only the judgement that took it counts it.

    Args:
        fixed: A format the user fixed (``response_format`` other than ``auto``): it is never stepped
            down from, and its refusal fails the call. ``None`` negotiates from ``json_schema``.
    """

    def __init__(self, fixed: OutputFormat | None = None) -> None:
        self._lock = threading.Lock()
        reinit_after_fork(self._new_lock)
        self.fixed = fixed is not None
        self.format: OutputFormat = fixed if fixed is not None else FORMATS[0]
        self.token_param: TokenParam = TOKEN_PARAMS[0]
        self.token_params_refused: set[TokenParam] = set()

    def _new_lock(self) -> None:
        self._lock = threading.Lock()

    def on_refusal(self, refused: FeatureRefused, fmt: OutputFormat, param: TokenParam) -> RefusalStep:
        """What to do about ``refused``, met by a request sent with ``fmt`` and ``param``.

        Returns ``"stepped"`` when this call stepped the format down (count it: once per step however
        many judgements met the refusal), ``"resend"`` when the request should be sent again without
        counting (another judgement stepped meanwhile, or the output-limit parameter was switched), and
        ``"fail"`` when nothing is left to try (a fixed format, the last format, both parameters)."""
        if refused.feature == "format":
            if self.fixed:
                return "fail"
            if self._step_format(fmt):
                return "stepped"
            return "resend" if self.format != fmt else "fail"
        return "resend" if self._switch_token_param(param) else "fail"

    def _step_format(self, refused: OutputFormat) -> bool:
        with self._lock:
            if self.format != refused or refused == FORMATS[-1]:
                return False
            self.format = FORMATS[FORMATS.index(refused) + 1]
            return True

    def _switch_token_param(self, refused: TokenParam) -> bool:
        with self._lock:
            self.token_params_refused.add(refused)
            left = [p for p in TOKEN_PARAMS if p not in self.token_params_refused]
            if not left:
                return False
            if self.token_param == refused:
                self.token_param = left[0]
            return True


_registry: OrderedDict[tuple[str, str], Negotiation] = OrderedDict()
_registry_lock = ForkSafeLock()  # a forked child gets a new one


def forget_negotiations() -> None:
    """Forget every remembered format (a test whose server reuses a port another server used needs it)."""
    with _registry_lock:
        _registry.clear()


def negotiation_for(endpoint: str, model: str) -> Negotiation:
    """The shared :class:`Negotiation` of ``(endpoint, model)`` (bounded: the 64 most recent pairs)."""
    key = (endpoint.rstrip("/"), model)
    with _registry_lock:
        found = _registry.get(key)
        if found is None:
            found = _registry[key] = Negotiation()
            while len(_registry) > _MAX_REGISTRY:
                _registry.popitem(last=False)
        else:
            _registry.move_to_end(key)
        return found
