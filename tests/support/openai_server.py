"""A small OpenAI-compatible chat-completions server on 127.0.0.1 for tests and benchmarks.

It is a real HTTP server (stdlib ``ThreadingHTTPServer`` in a background thread, port 0), so the
real ``openai`` client talks to it over real HTTP. Every request is recorded; every reply comes
from a *handler*, a callable ``(RecordedRequest) -> Reply`` chosen by the test.

Typical uses::

    # a judge server answering valid verdicts for every chunk, after 200 ms (benchmarks)
    with OpenAICompatServer(verdict_handler(delay_s=0.2)) as server:
        judge = OpenAIJudge(model="judge-model", base_url=server.base_url, api_key="test-key")
        ...
        server.requests[0].body["messages"]      # what the judge sent

    # a scripted conversation: a 429 with Retry-After, then valid verdicts
    handler = script(error_reply(429, "slow down", headers={"Retry-After": "1"}), then=verdict_handler())
    with OpenAICompatServer(handler) as server: ...

    # a server that never answers (until it is closed)
    with OpenAICompatServer(lambda request: Reply(hang=True)) as server: ...

    # llama-cpp-python: refuses json_schema with a 500 naming the accepted types, serves the rest
    with OpenAICompatServer(refusing({"json_schema"}, "llama_cpp", then=verdict_handler())) as server: ...

``verdict_handler`` reads the query, answer and chunks out of the judge's prompt (the
``<query>``, ``<answer>`` and ``<chunk index="i">`` elements, XML-escaped text) and answers one
verdict per chunk from ``decide(query, answer, chunk) -> (is_relevant, is_utilized)``; the default
rule is word overlap, a deterministic stand-in (not a quality judge). Usage is reported as
``len(prompt) // 4`` input and ``len(reply) // 4`` output tokens, and recorded on the request.

Throughput: the server costs well under a millisecond of CPU per request (one thread per
connection, listen backlog 512, Nagle off); the openai client costs a few milliseconds per request.
In one process on 2 cores, 500 concurrent judge calls against ``verdict_handler(delay_s=0.2)`` take
a few seconds, mostly client-side CPU; run the server in another process to measure the client alone.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from html import unescape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = [
    "REFUSALS",
    "Decide",
    "Handler",
    "JudgePrompt",
    "OpenAICompatServer",
    "RecordedRequest",
    "Reply",
    "completion",
    "error_reply",
    "iter_chunks",
    "parse_judge_prompt",
    "rambling_handler",
    "refusing",
    "refusing_token_param",
    "script",
    "verdict_handler",
    "verdicts_reply",
    "word_overlap",
]


@dataclass(frozen=True)
class Reply:
    """What the server answers to one request.

    Attributes:
        status: HTTP status code.
        body: A JSON-serialisable object (sent as JSON), ``str``/``bytes`` (sent as is), or ``None``.
        headers: Extra response headers (e.g. ``{"Retry-After": "1"}``).
        delay_s: Seconds to wait before answering (interrupted when the server closes).
        hang: Never answer; the connection is dropped when the server closes.
    """

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    hang: bool = False


@dataclass
class RecordedRequest:
    """One request as the server received it.

    ``received_at`` is ``time.monotonic()`` and ``received_wall`` is ``time.time()`` when the
    request's headers had arrived; ``headers`` has lower-case names; ``body`` is the decoded JSON
    (or the raw text when not JSON); ``reply`` is what the handler answered.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float
    received_wall: float
    reply: Reply | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        return list(messages)

    @property
    def response_format(self) -> str | None:
        """``json_schema``, ``json_object``, ... or ``None`` when the request had none."""
        fmt = self.body.get("response_format") if isinstance(self.body, dict) else None
        return fmt.get("type") if isinstance(fmt, dict) else None

    @property
    def output_format(self) -> str | None:
        """The judge's name for the request's format: ``json_schema``, ``json_object_schema`` (JSON
        mode with a ``schema``, the llama.cpp family's), ``json_object``, or ``None``."""
        fmt = self.body.get("response_format") if isinstance(self.body, dict) else None
        if isinstance(fmt, dict) and fmt.get("type") == "json_object" and "schema" in fmt:
            return "json_object_schema"
        return self.response_format

    @property
    def output_limit(self) -> tuple[str, int] | None:
        """``(parameter, tokens)`` of the request's output limit (``max_tokens`` or
        ``max_completion_tokens``), or ``None`` when it has none."""
        for name in ("max_tokens", "max_completion_tokens"):
            value = self.body.get(name) if isinstance(self.body, dict) else None
            if isinstance(value, int):
                return name, value
        return None


Handler = Callable[[RecordedRequest], Reply]
Decide = Callable[[str, str, str], tuple[bool, bool]]


def completion(
    content: str | None,
    *,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    finish_reason: str = "stop",
    refusal: str | None = None,
    model: str = "judge-model",
) -> dict[str, Any]:
    """A ``chat.completion`` response body with one choice and the given usage."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def verdicts_reply(verdicts: list[dict[str, Any]], **kwargs: Any) -> Reply:
    """A 200 reply whose content is ``{"verdicts": verdicts}``; ``kwargs`` go to :func:`completion`."""
    return Reply(body=completion(json.dumps({"verdicts": verdicts}), **kwargs))


def error_reply(
    status: int, message: str, *, headers: Mapping[str, str] | None = None, param: str | None = None
) -> Reply:
    """An OpenAI-style error reply: ``{"error": {"message", "type", "param", "code"}}``."""
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}
    return Reply(status=status, body=body, headers=dict(headers or {}))


def _llama_cpp_refusal(fmt: str) -> Reply:
    # llama-cpp-python's server (0.3.36): its request model allows response_format.type 'text' |
    # 'json_object'; its route error handler (llama_cpp/server/errors.py) catches FastAPI's validation
    # error like any exception and answers 500 {"error": {message: str(exc), type, param, code}}.
    message = (
        "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be "
        f"'text' or 'json_object'\", 'input': '{fmt}', 'ctx': {{'expected': \"'text' or 'json_object'\"}}}}]"
    )
    error = {"message": message, "type": "internal_server_error", "param": None, "code": None}
    return Reply(status=500, body={"error": error})


def _vllm_refusal(fmt: str) -> Reply:
    # vLLM: a top-level error object (no "error" wrapper), status 400.
    body = {
        "object": "error",
        "message": f"response_format type {fmt} is not supported by this server",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    return Reply(status=400, body=body)


def _openai_refusal(fmt: str) -> Reply:
    return error_reply(
        400,
        f"Invalid parameter: 'response_format' of type '{fmt}' is not supported with this model.",
        param="response_format",
    )


def _fastapi_refusal(fmt: str) -> Reply:
    # A FastAPI/pydantic server validating the request: 422 with a "detail" list.
    detail = [
        {
            "type": "literal_error",
            "loc": ["body", "response_format", "type"],
            "msg": "Input should be 'text' or 'json_object'",
            "input": fmt,
        }
    ]
    return Reply(status=422, body={"detail": detail})


def _tgi_refusal(fmt: str) -> Reply:
    # TGI (axum): 422 with a plain-text deserialisation error.
    text = (
        "Failed to deserialize the JSON body into the target type: response_format: unknown variant "
        f"`{fmt}`, expected one of `json`, `regex`, `json_object` at line 1 column 2048"
    )
    return Reply(status=422, body=text)


REFUSALS: dict[str, Callable[[str], Reply]] = {
    "llama_cpp": _llama_cpp_refusal,
    "vllm": _vllm_refusal,
    "openai": _openai_refusal,
    "fastapi": _fastapi_refusal,
    "tgi": _tgi_refusal,
}
"""How servers refuse a ``response_format`` type, by server: ``REFUSALS[style](type) -> Reply``."""


def refusing(formats: Iterable[str | None], style: str, *, then: Handler | None = None) -> Handler:
    """A handler refusing requests whose :attr:`RecordedRequest.output_format` is in ``formats`` the
    way the ``style`` server does (:data:`REFUSALS`), and passing the others to ``then`` (default
    :func:`verdict_handler`). ``json_object_schema`` counts as ``json_object`` to a server that
    refuses the latter (a server without JSON mode has no schema-constrained one either)."""
    refused = set(formats)
    if "json_object" in refused:
        refused.add("json_object_schema")
    good = then or verdict_handler()
    refuse = REFUSALS[style]

    def handler(request: RecordedRequest) -> Reply:
        fmt = request.output_format
        if fmt in refused:
            return refuse(request.response_format or "text")
        return good(request)

    return handler


def refusing_token_param(param: str, *, then: Handler | None = None) -> Handler:
    """A handler refusing requests carrying ``param`` (``max_tokens`` or ``max_completion_tokens``)
    with OpenAI's 400 for reasoning models, passing the others to ``then``."""
    good = then or verdict_handler()
    other = "max_completion_tokens" if param == "max_tokens" else "max_tokens"

    def handler(request: RecordedRequest) -> Reply:
        if isinstance(request.body, dict) and param in request.body:
            return error_reply(
                400,
                f"Unsupported parameter: '{param}' is not supported with this model. Use '{other}' instead.",
                param=param,
            )
        return good(request)

    return handler


def rambling_handler(*, unbounded_tokens: int = 100_000) -> Handler:
    """A small model in JSON mode that never closes its object: it writes until the request's output
    limit (``finish_reason`` ``length``, that many completion tokens), or ``unbounded_tokens`` when the
    request has none. One token is 4 characters of content."""

    def handler(request: RecordedRequest) -> Reply:
        limit = request.output_limit
        tokens = limit[1] if limit else unbounded_tokens
        content = ('{"verdicts": [{"index": 0, "reason": "' + "the the " * tokens)[: tokens * 4]
        return Reply(
            body=completion(content, prompt_tokens=100, completion_tokens=tokens, finish_reason="length")
        )

    return handler


def script(*steps: Reply | Handler, then: Handler | None = None) -> Handler:
    """A handler answering ``steps`` in order (a :class:`Reply`, or a handler for that request),
    then delegating to ``then``; without ``then``, extra requests get a 500 "script exhausted"
    (so a test notices a judge that called more often than scripted)."""
    queue: deque[Reply | Handler] = deque(steps)
    lock = threading.Lock()

    def handler(request: RecordedRequest) -> Reply:
        with lock:
            step = queue.popleft() if queue else None
        if step is None:
            return then(request) if then is not None else error_reply(500, "test script exhausted")
        return step if isinstance(step, Reply) else step(request)

    return handler


@dataclass(frozen=True)
class JudgePrompt:
    """What a judge request asks: the query, answer and chunks (unescaped) and whether reasons are wanted."""

    query: str
    answer: str
    chunks: list[str]
    reasons: bool


_ELEMENT = {name: re.compile(rf"<{name}>\n(.*?)\n</{name}>", re.S) for name in ("query", "answer")}
_CHUNK = re.compile(r'<chunk index="(\d+)">\n(.*?)\n</chunk>', re.S)


def parse_judge_prompt(body: Any) -> JudgePrompt:
    """Read query, answer and chunks out of the (first) user message of a judge request.

    ``reasons`` is true when the json_schema verdict items have a ``reason`` property or, without a
    schema, when the system prompt's answer shape names ``"reason"``.
    """
    messages = body.get("messages", []) if isinstance(body, dict) else []
    user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
    system = next((m.get("content", "") for m in messages if m.get("role") == "system"), "")
    fields = {}
    for name, pattern in _ELEMENT.items():
        match = pattern.search(user)
        fields[name] = unescape(match.group(1)) if match else ""
    chunks = [unescape(text) for _, text in _CHUNK.findall(user)]
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        reasons = '"reason"' in json.dumps(fmt["json_schema"]["schema"])
    else:
        reasons = '"reason"' in system
    return JudgePrompt(query=fields["query"], answer=fields["answer"], chunks=chunks, reasons=reasons)


_WORD = re.compile(r"[a-z0-9]{4,}")


def word_overlap(query: str, answer: str, chunk: str) -> tuple[bool, bool]:
    """Default ``decide``: relevant if the chunk shares a word (4+ letters) with the query, utilized
    if it shares at least two with the answer."""
    words = set(_WORD.findall(chunk.lower()))
    relevant = bool(words & set(_WORD.findall(query.lower())))
    utilized = len(words & set(_WORD.findall(answer.lower()))) >= 2
    return relevant, utilized


def verdict_handler(
    delay_s: float = 0.0, decide: Decide = word_overlap, *, reason: str = "test verdict"
) -> Handler:
    """A handler answering a valid verdict for every chunk of every judge request, after ``delay_s``
    seconds; the reply follows the schema or prompt of the request (with or without reasons)."""

    def handler(request: RecordedRequest) -> Reply:
        prompt = parse_judge_prompt(request.body)
        verdicts: list[dict[str, Any]] = []
        for i, chunk in enumerate(prompt.chunks):
            relevant, utilized = decide(prompt.query, prompt.answer, chunk)
            verdict: dict[str, Any] = {"index": i, "is_relevant": relevant, "is_utilized": utilized}
            if prompt.reasons:
                verdict["reason"] = reason
            verdicts.append(verdict)
        content = json.dumps({"verdicts": verdicts})
        prompt_chars = sum(len(str(m.get("content") or "")) for m in request.messages)
        body = completion(content, prompt_tokens=prompt_chars // 4, completion_tokens=len(content) // 4)
        return Reply(body=body, delay_s=delay_s)

    return handler


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms Nagle/delayed-ACK stall
    server: _Server

    def do_POST(self) -> None:
        received_at, received_wall = time.monotonic(), time.time()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        request = RecordedRequest(
            method="POST",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            received_at=received_at,
            received_wall=received_wall,
        )
        owner = self.server.owner
        try:
            reply = owner.handler(request)
        except Exception as exc:  # a broken test handler must be visible, not hang the client
            reply = error_reply(500, f"test handler raised {exc!r}")
        request.reply = reply
        owner._record(request)
        if reply.hang:
            owner._closing.wait()
            self.close_connection = True
            return
        if reply.delay_s > 0 and owner._closing.wait(reply.delay_s):
            self.close_connection = True
            return
        self._send(reply)

    def do_GET(self) -> None:
        self._send(error_reply(404, f"no route {self.path}"))

    def _send(self, reply: Reply) -> None:
        if reply.body is None:
            payload = b""
        elif isinstance(reply.body, bytes):
            payload = reply.body
        elif isinstance(reply.body, str):
            payload = reply.body.encode()
        else:
            payload = json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout): nothing to do
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # listen backlog: benchmarks open many connections at once (default 5)
    owner: OpenAICompatServer


class OpenAICompatServer:
    """An OpenAI-compatible HTTP server on ``127.0.0.1`` (port chosen by the OS), as a context manager.

    Args:
        handler: ``(RecordedRequest) -> Reply`` for every request (see :func:`verdict_handler`,
            :func:`script`); defaults to :func:`verdict_handler` with no delay.

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1`` (give it to the client as ``base_url``).
        requests: Every request received so far, in arrival order (a copy).
    """

    def __init__(self, handler: Handler | None = None) -> None:
        self.handler: Handler = handler or verdict_handler()
        self._requests: list[RecordedRequest] = []
        self._arrived = threading.Condition()
        self._closing = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._arrived:
            return list(self._requests)

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of :attr:`requests`."""
        return [r.body for r in self.requests]

    def _record(self, request: RecordedRequest) -> None:
        with self._arrived:
            self._requests.append(request)
            self._arrived.notify_all()

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> bool:
        """Block until at least ``n`` requests arrived (or ``timeout`` seconds passed); True if they did."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self._requests) >= n, timeout)

    def start(self) -> OpenAICompatServer:
        httpd = _Server(("127.0.0.1", 0), _RequestHandler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="openai-compat-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Release hung/delayed replies, stop serving and close the listening socket."""
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> OpenAICompatServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def iter_chunks(requests: Iterable[RecordedRequest]) -> list[str]:
    """All chunk texts the server was asked about, in request order (for split/remap assertions)."""
    return [chunk for r in requests for chunk in parse_judge_prompt(r.body).chunks]
