"""Fixtures for the worker tests.

Judges here are real :class:`~ctxutil_otel.judges.Judge` implementations with controlled behaviour
(raise, hang, block on a gate, report token usage), not mocks. The shared
:class:`~tests.support.doubles.RecordingEmitter` records what the evaluator hands over, so these tests can
assert on the worker alone; the real emitter is exercised in ``test_with_real_emitter.py``. The
environment is cleaned for every test by tests/conftest.py.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, get_value

from ctxutil_otel.capture import Interaction
from ctxutil_otel.judges import ChunkVerdict, JudgeError, JudgeResult, TokenUsage
from ctxutil_otel.metric import ContextualUtilization
from ctxutil_otel.worker import Evaluator
from tests.support.accounting import assert_accounted
from tests.support.doubles import RecordingEmitter


def _all_verdicts(chunks: Sequence[str], usage: TokenUsage | None = None) -> JudgeResult:
    """Every chunk relevant and used."""
    verdicts = [ChunkVerdict(index=i, is_relevant=True, is_utilized=True) for i in range(len(chunks))]
    return JudgeResult(verdicts=verdicts, usage=usage)


class BoomError(JudgeError):
    error_type = "boom"


class RaisingJudge:
    """Raises on every call: a :class:`JudgeError` subclass, or any exception given."""

    name = "raising"
    model: str | None = None

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        raise self.exc


class GateJudge:
    """Blocks each call until released from the test thread; queries containing ``skip_word`` pass
    straight through. ``entered`` is set when a call is blocked at the gate. Also records whether
    OpenTelemetry instrumentation was suppressed during the call."""

    name = "gate"
    model: str | None = "gate-model"

    def __init__(self, skip_word: str | None = None, usage: TokenUsage | None = None) -> None:
        self.entered = threading.Event()
        self.skip_word = skip_word
        self.usage = usage
        self.calls = 0
        self.suppressed: list[object] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._gate: asyncio.Event | None = None
        self._released = False

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        self.calls += 1
        self.suppressed.append(get_value(_SUPPRESS_INSTRUMENTATION_KEY))
        if self.skip_word is None or self.skip_word not in query:
            if self._gate is None:
                self._loop = asyncio.get_running_loop()
                self._gate = asyncio.Event()
                if self._released:
                    self._gate.set()
            self.entered.set()
            await self._gate.wait()
        return _all_verdicts(chunks, self.usage)

    def release(self) -> None:
        """Open the gate for every current and future call (callable from any thread)."""
        self._released = True
        if self._loop is not None and self._gate is not None:
            self._loop.call_soon_threadsafe(self._gate.set)


class UsageJudge:
    """Answers at once, all chunks relevant and used, reporting ``tokens`` input tokens."""

    name = "usage"
    model: str | None = "usage-model"

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        return _all_verdicts(chunks, TokenUsage(input_tokens=self.tokens))


def interaction(
    trace_id: int | None = None,
    *,
    query: str | None = "what is python",
    answer: str | None = "Python is a high-level programming language created by Guido van Rossum.",
    documents: Sequence[object] = (
        "Python is a high-level programming language.",
        "Guido van Rossum created Python.",
        "Ice cream is a frozen dessert.",
    ),
    id: str | None = None,
) -> Interaction:
    return Interaction(
        query=query,
        answer=answer,
        documents=documents,
        trace_id=random.getrandbits(128) if trace_id is None else trace_id,
        id=id,
    )


MakeEvaluator = Callable[..., Evaluator]


@pytest.fixture
def make_evaluator() -> Iterator[MakeEvaluator]:
    """Build evaluators with a :class:`RecordingEmitter` (unless one is given) and no rate cap
    (unless set); at teardown shut each down and check the accounting invariant."""
    made: list[Evaluator] = []

    def make(metric: ContextualUtilization | None = None, **kwargs: Any) -> Evaluator:
        kwargs.setdefault("emitter", RecordingEmitter())
        kwargs.setdefault("max_evaluations_per_second", 0)
        evaluator = Evaluator(metric, **kwargs)
        made.append(evaluator)
        return evaluator

    yield make
    for evaluator in made:
        evaluator.shutdown(5000)
        assert_accounted(evaluator.stats())


def run_in_forked_child(body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Fork; run ``body`` in the child and return the dict it returns, sent back through a pipe as JSON.

    The child never returns into pytest (``os._exit``); a failure there is written to stderr and the
    child exits 1, which fails the caller's assertion on the exit status.
    """
    import json
    import sys

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            os.close(read_fd)
            report = body()
            with os.fdopen(write_fd, "w") as pipe:
                json.dump(report, pipe)
            code = 0
        except BaseException as exc:  # report, never hang the parent
            sys.stderr.write(f"child failed: {exc!r}\n")
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        raw = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    result: dict[str, Any] = json.loads(raw)
    return result
