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
