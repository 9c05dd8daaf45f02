"""Fixtures for the worker tests.

Judges here are real :class:`~ctxutil_otel.judges.Judge` implementations with controlled behaviour
(raise, hang, block on a gate, report token usage), not mocks. The shared
:class:`~tests.support.doubles.RecordingEmitter` records what the evaluator hands over, so these tests can
assert on the worker alone; the real emitter is exercised in ``test_with_real_emitter.py``. The
environment is cleaned for every test by tests/conftest.py.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from ctxutil_otel.capture import Interaction
from ctxutil_otel.judges import ChunkVerdict, JudgeError, JudgeResult, TokenUsage
from ctxutil_otel.metric import ContextualUtilization
from ctxutil_otel.worker import Evaluator
from tests.support.accounting import assert_accounted
from tests.support.doubles import RecordingEmitter
from tests.support.gate import Gate, pass_gate


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
    """Blocks each call until released from the test (:class:`~tests.support.gate.Gate`, a real socket, so
    the judge may run in the process worker's child); queries containing ``skip_word`` pass straight
    through. ``entered`` is set when a call is blocked at the gate; ``calls`` counts the calls and
    ``suppressed`` records whether OpenTelemetry instrumentation was suppressed during each. Only the gate's
    address, ``skip_word`` and ``usage`` are pickled."""

    name = "gate"
    model: str | None = "gate-model"

    def __init__(self, skip_word: str | None = None, usage: TokenUsage | None = None) -> None:
        self.gate: Gate | None = Gate()
        self.address = self.gate.address
        self.skip_word = skip_word
        self.usage = usage

    def __getstate__(self) -> dict[str, Any]:
        return {"address": self.address, "skip_word": self.skip_word, "usage": self.usage, "gate": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        wait = self.skip_word is None or self.skip_word not in query
        await pass_gate(self.address, query, wait=wait)
        return _all_verdicts(chunks, self.usage)

    def _test_side(self) -> Gate:
        assert self.gate is not None, "the test side of the gate is in the test's process"
        return self.gate

    @property
    def entered(self) -> threading.Event:
        return self._test_side().entered

    @property
    def calls(self) -> int:
        return self._test_side().calls

    @property
    def suppressed(self) -> list[object]:
        return self._test_side().suppressed

    def release(self) -> None:
        """Open the gate for every current and future call (callable from any thread)."""
        self._test_side().release()


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


@pytest.fixture(params=["thread", "process"])
def worker_mode(request: pytest.FixtureRequest) -> str:
    """The worker's contract holds in both modes: every test building its evaluator with
    :func:`make_evaluator` runs once with the judge on the evaluator's thread and once in a child process."""
    mode: str = request.param
    return mode


@pytest.fixture
def make_evaluator(worker_mode: str) -> Iterator[MakeEvaluator]:
    """Build evaluators with a :class:`RecordingEmitter` (unless one is given), no rate cap (unless set)
    and the ``worker_mode`` (unless ``worker`` is given); at teardown shut each down and check the
    accounting invariant."""
    made: list[Evaluator] = []

    def make(metric: ContextualUtilization | None = None, **kwargs: Any) -> Evaluator:
        kwargs.setdefault("emitter", RecordingEmitter())
        kwargs.setdefault("max_evaluations_per_second", 0)
        kwargs.setdefault("worker", worker_mode)
        evaluator = Evaluator(metric, **kwargs)
        made.append(evaluator)
        return evaluator

    yield make
    for evaluator in made:
        evaluator.shutdown(5000)
        assert_accounted(evaluator.stats())


def run_in_forked_child(body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Fork; run ``body`` in the child and return the dict it returns, sent back through a pipe as JSON.

    The child never returns into pytest (``os._exit``). A failure there (an exception from ``body``, or a
    report that is not JSON) is sent back as its traceback and exits 1; the assertion here on the exit
    status carries it, so a rare failure shows what happened in the child.
    """
    import json
    import sys
    import traceback

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            os.close(read_fd)
            try:
                sent: dict[str, Any] = {"report": body()}
                message = json.dumps(sent)
            except BaseException:  # report, never hang the parent
                sent = {"error": traceback.format_exc()}
                message = json.dumps(sent)
            with os.fdopen(write_fd, "w") as pipe:
                pipe.write(message)
            code = 0 if "report" in sent else 1
        except BaseException:  # the pipe itself failed: stderr is all that is left
            sys.stderr.write(f"child failed: {traceback.format_exc()}\n")
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        raw = pipe.read()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    try:
        answer: dict[str, Any] = json.loads(raw)
    except ValueError:
        answer = {"error": f"no readable report (see stderr): {raw!r}"}
    assert code == 0 and "report" in answer, f"forked child exited {code}: {answer.get('error')}"
    result: dict[str, Any] = answer["report"]
    return result
