"""Fixtures for judge tests: a local OpenAI-compatible server and OpenAIJudge instances pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from ctxutil_otel.judges import OpenAIJudge
from tests.support.openai_server import Handler, OpenAICompatServer

API_KEY = "sk-test-5b1f-DO-NOT-LEAK-9c2e"
"""The key every test judge uses; tests assert it reaches the server and nowhere else."""

ServeFn = Callable[..., OpenAICompatServer]
MakeJudgeFn = Callable[..., OpenAIJudge]


@pytest.fixture
def serve() -> Iterator[ServeFn]:
    """Start an :class:`OpenAICompatServer` with a handler; closed at teardown."""
    servers: list[OpenAICompatServer] = []

    def start(handler: Handler | None = None) -> OpenAICompatServer:
        server = OpenAICompatServer(handler).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture
async def make_judge() -> AsyncIterator[MakeJudgeFn]:
    """Build an OpenAIJudge for a server: test key, short timeouts; its connections closed at teardown."""
    judges: list[OpenAIJudge] = []

    def make(server: OpenAICompatServer, **overrides: Any) -> OpenAIJudge:
        kwargs: dict[str, Any] = {
            "model": "judge-model",
            "base_url": server.base_url,
            "api_key": API_KEY,
            "timeout_s": 5.0,
            "max_retries": 2,
            "deadline_s": 15.0,
        }
        kwargs.update(overrides)
        judge = OpenAIJudge(**kwargs)
        judges.append(judge)
        return judge

    yield make
    for judge in judges:
        await judge.aclose()


@pytest.fixture(autouse=True)
def _fresh_negotiations() -> Iterator[None]:
    """Each test starts with no remembered output format: the judge remembers formats per (endpoint,
    model) for the process, and a test server may reuse the port another test's server used."""
    from ctxutil_otel.judges._negotiate import forget_negotiations

    forget_negotiations()
    yield
    forget_negotiations()
