"""A user's object that raises ``KeyboardInterrupt``, ``SystemExit`` or ``CancelledError`` while the worker
reads it (a chunk converted, a chunk's metadata emitted) fails that one evaluation; the worker goes on.

Before, the exception left the evaluation's task and stopped the worker's loop for good: every later
interaction stayed queued, unscored, counted ``dropped``/``shutdown`` only at shutdown, and the log held the
error's message (the user's text). Real parts: the real Evaluator (lexical judge, thread and process
workers) and the real Emitter on SDK providers with in-memory exporters; ``caplog`` for the Python log.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable, Iterator, Mapping

import pytest

from ctxutil_otel import ContextualUtilization, Evaluator
from ctxutil_otel.judges import ChunkVerdict, JudgeResult
from tests.support.telemetry import Telemetry
from tests.support.telemetry import telemetry as telemetry  # the fixture

MARKER = "Patient Jane Roe zq8y"
QUESTION = "What are the benefits of green tea?"
TEXT = "Green tea contains antioxidants called catechins."
ANSWER = "Green tea contains antioxidants called catechins."


class _Raising(Mapping[str, object]):
    """A chunk mapping whose every read raises ``error`` (read converting it)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __getitem__(self, key: str) -> object:
        raise self.error

    def __iter__(self) -> Iterator[str]:
        return iter([])

    def __len__(self) -> int:
        return 0


class _LazyMetadata(dict[str, object]):
    """Chunk metadata (a dict, copied as one) whose own ``get`` raises ``error``: read by the emitter."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(source="handbook.pdf")
        self.error = error

    def get(self, key: str, default: object = None) -> object:
        raise self.error

    def __getitem__(self, key: str) -> object:
        raise self.error


class _Document:
    """A Document-like chunk whose ``page_content`` raises ``error`` (a lazy loader's)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    @property
    def page_content(self) -> str:
        raise self.error


# (a fresh bad chunk, whether the evaluation is still scored: only its metadata left out)
_BAD: list[tuple[Callable[[], object], bool]] = [
    (lambda: {"text": TEXT, "metadata": _LazyMetadata(SystemExit(MARKER))}, True),  # read emitting
    (lambda: {"text": TEXT, "metadata": _LazyMetadata(KeyboardInterrupt(MARKER))}, True),
    (lambda: _Raising(KeyboardInterrupt(MARKER)), False),  # the chunk itself, read converting
    (lambda: _Raising(SystemExit(MARKER)), False),
    (lambda: _Document(SystemExit(MARKER)), False),
    (lambda: _Raising(asyncio.CancelledError(MARKER)), False),
]


@pytest.mark.parametrize("worker", ["thread", "process"])
def test_a_user_object_raising_a_base_exception_fails_one_evaluation_and_the_worker_goes_on(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, worker: str
) -> None:
    evaluator = telemetry.evaluator(chunk_metadata_keys=("source",), worker=worker)
    with caplog.at_level(logging.DEBUG):
        for bad, _ in _BAD:
            evaluator.record_interaction(query=QUESTION, retrieved_content=[bad()], actual_output=ANSWER)
            evaluator.record_interaction(query=QUESTION, retrieved_content=[TEXT], actual_output=ANSWER)
        assert evaluator.force_flush(60_000)  # before: the worker was dead, nothing more finished
    stats = evaluator.stats()
    scored = len(_BAD) + sum(1 for _, still in _BAD if still)
    assert stats.evaluated == scored, stats
    assert stats.failed == {"invalid_input": len(_BAD) - sum(1 for _, still in _BAD if still)}, stats
    assert stats.dropped == {}, stats
    assert len(telemetry.logs()) == len(_BAD) * 2  # one result event per interaction, the failed ones too
    records = [r.getMessage() for r in caplog.records]
    records += ["".join(traceback.format_exception(*r.exc_info)) for r in caplog.records if r.exc_info]
    assert not [text for text in records if "zq8y" in text]
    evaluator.shutdown(5_000)


class _JudgeThatExits:
    """A user's judge raising ``SystemExit`` and then a ``CancelledError`` nobody asked for, then judging
    every chunk relevant and used (the metric catches a judge's ``Exception``, not these)."""

    name = "exits"
    model = None

    def __init__(self) -> None:
        self.calls = 0

    async def judge(self, query: str, answer: str, chunks: list[str], *, reasons: bool = True) -> JudgeResult:
        self.calls += 1
        if self.calls == 1:
            raise SystemExit(MARKER)
        if self.calls == 2:
            raise asyncio.CancelledError(MARKER)
        return JudgeResult(
            verdicts=[ChunkVerdict(index=i, is_relevant=True, is_utilized=True) for i in range(len(chunks))]
        )


def test_a_judge_raising_system_exit_fails_that_evaluation_and_the_worker_goes_on(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    evaluator = Evaluator(
        ContextualUtilization(judge=_JudgeThatExits()),
        emitter=telemetry.emitter(),
        sample_rate=1.0,
        max_evaluations_per_second=0,
        max_concurrency=1,
    )
    with caplog.at_level(logging.DEBUG):
        for _ in range(4):
            evaluator.record_interaction(query=QUESTION, retrieved_content=[TEXT], actual_output=ANSWER)
        assert evaluator.force_flush(30_000)  # before: the worker's loop had stopped, nothing finished
    stats = evaluator.stats()
    # SystemExit: the judge's failure, its class in the explanation (it ran in wait_for's task, where it
    # stopped the event loop); a CancelledError nobody asked for: the engine's, logged by class and place.
    assert (stats.evaluated, stats.failed, stats.dropped) == (2, {"_OTHER": 1, "internal_error": 1}, {}), (
        stats
    )
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("CancelledError at " in text for text in errors)
    assert not [r for r in caplog.records if "zq8y" in r.getMessage() or r.exc_info]
    evaluator.shutdown(5_000)
