"""``Evaluator.record_interaction`` never lets a user's text out with content capture off, whatever the shape
of its arguments (docs/telemetry.md: an explanation names the field and index, never the text;
docs/no-framework.md: each problem is logged naming the argument, never its text).

A marker string is sent through each input in each invalid shape that reaches a message (a chunk keyed by
its text, an argument whose reading raises with the text in its error, a wrong type holding the text), and
must appear in no span attribute or event, no log event, no metric point attribute and no Python log record
(message or traceback). Real parts: the real Evaluator (lexical judge, thread and process workers) and the
real Emitter on SDK providers with in-memory exporters; ``caplog`` for the Python log.
"""

from __future__ import annotations

import logging
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from ctxutil_otel import Evaluator
from tests.support.telemetry import Telemetry
from tests.support.telemetry import telemetry as telemetry  # the fixture

MARKER = "Patient John Doe DOB 1980-02-03 zq7x"
QUESTION = "What are the benefits of green tea?"
CHUNKS = ["Green tea contains antioxidants called catechins."]
ANSWER = "Green tea contains antioxidants called catechins."


class _RaisingMapping(Mapping[str, object]):
    """A mapping whose every read raises with the marker in the error's message."""

    def __getitem__(self, key: str) -> object:
        raise RuntimeError(MARKER)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError(MARKER)

    def __len__(self) -> int:
        raise RuntimeError(MARKER)

    def get(self, key: str, default: object = None) -> object:
        raise RuntimeError(MARKER)


class _RaisingClass:
    """An object whose ``__class__`` raises (as a lazy proxy's may): ``isinstance`` on it raises."""

    @property  # type: ignore[misc]  # a property over __class__ is the point
    def __class__(self) -> type:
        raise RuntimeError(MARKER)


class _RequestId:
    """A lazily resolved id whose ``__index__`` raises with the user's text (a web framework's)."""

    def __index__(self) -> int:
        raise ValueError(MARKER)


class _IdText(str):
    """A ``str`` subclass whose own ``__str__`` raises."""

    def __str__(self) -> str:
        raise RuntimeError(MARKER)


class _RaisingUUID(uuid.UUID):
    def __str__(self) -> str:
        raise RuntimeError(MARKER)


class _ChunkWhoseIdRaises(Mapping[str, object]):
    """A chunk mapping with its text, whose ``id`` and ``metadata`` (read by the emitter) raise."""

    def __getitem__(self, key: str) -> object:
        if key == "text":
            return CHUNKS[0]
        raise RuntimeError(MARKER)

    def __iter__(self) -> Iterator[str]:
        return iter(["text", "id", "metadata"])

    def __len__(self) -> int:
        return 3


class _Document:
    """A Document-like chunk whose ``id`` property raises."""

    page_content = CHUNKS[0]

    @property
    def id(self) -> str:
        raise RuntimeError(MARKER)


class _IdInt(int):
    def __str__(self) -> str:
        raise RuntimeError(MARKER)

    def __repr__(self) -> str:
        raise RuntimeError(MARKER)


def _chunks_raising(error: Exception) -> Callable[[], Iterator[object]]:
    def chunks() -> Iterator[object]:
        yield CHUNKS[0]
        raise error

    return chunks


_ARGUMENTS = (
    "query",
    "retrieved_content",
    "actual_output",
    "model",
    "provider",
    "retriever_name",
    "name",
    "metadata",
    "span_context",
    "interaction_id",
)
# (argument, a fresh value holding the marker): every invalid shape of every input that reaches a message.
_SHAPES: list[tuple[str, Callable[[], object]]] = [
    ("retrieved_content", lambda: [{MARKER: 0.91}]),  # a chunk keyed by its text (a {text: score} hit)
    ("retrieved_content", lambda: [{"text": 3, MARKER: MARKER}]),  # a text key that is no string
    ("retrieved_content", lambda: [{"id": MARKER, "score": 0.5}]),  # no text key, the text as a value
    ("retrieved_content", lambda: [CHUNKS[0], MARKER.encode()]),  # bytes
    ("retrieved_content", lambda: [CHUNKS[0], _RaisingMapping()]),  # a chunk whose reading raises
    ("retrieved_content", lambda: [_ChunkWhoseIdRaises()]),  # evaluated: its id read by the emitter
    ("retrieved_content", lambda: [_Document()]),
    ("retrieved_content", lambda: [{"text": CHUNKS[0], "id": _IdText("doc-1")}]),
    ("retrieved_content", lambda: [{"text": CHUNKS[0], "id": _IdInt(7), "metadata": {"source": _IdInt(3)}}]),
    ("retrieved_content", lambda: MARKER),  # one string
    ("retrieved_content", lambda: {MARKER: CHUNKS[0]}),  # one mapping
    ("retrieved_content", _chunks_raising(ValueError(MARKER))),  # a generator that raises
    ("retrieved_content", _chunks_raising(RuntimeError(MARKER))),
    ("query", lambda: MARKER.encode()),
    ("query", lambda: {MARKER: 1}),
    ("actual_output", lambda: MARKER.encode()),
    ("actual_output", lambda: [MARKER]),
    ("model", lambda: MARKER.encode()),
    ("provider", lambda: [MARKER]),
    ("retriever_name", lambda: {MARKER: 1}),
    ("name", lambda: (MARKER,)),
    ("metadata", lambda: MARKER),
    ("metadata", lambda: [(MARKER, MARKER)]),
    ("metadata", _RaisingMapping),
    ("metadata", lambda: {"tier": [MARKER]}),  # a metric_dimensions value of a type giving no dimension
    ("metadata", lambda: {"tier": MARKER.encode()}),
    ("metadata", lambda: {"tier": _IdText("paid")}),  # a selection rule's str() of it raises
    ("span_context", lambda: MARKER),
    ("interaction_id", lambda: MARKER.encode()),
    ("interaction_id", lambda: float(len(MARKER))),
    ("interaction_id", _RequestId),  # an id whose reading raises
    ("interaction_id", lambda: _IdText("request-1")),
    ("interaction_id", lambda: _RaisingUUID(int=7)),
    *((argument, _RaisingClass) for argument in _ARGUMENTS),  # isinstance on it raises
]


def _evaluator(telemetry: Telemetry, worker: str) -> Evaluator:
    return telemetry.evaluator(
        metric_dimensions=("tier",),
        chunk_metadata_keys=("source",),
        selection_rules=[{"metadata": {"tier": "paid"}, "sample_rate": 1.0}],
        worker=worker,
    )


def _everything(telemetry: Telemetry, caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every text that left the evaluator: span attributes and events, log events, metric point attributes,
    and Python log records with their tracebacks."""
    out: list[str] = []
    for span in telemetry.spans():
        out.append(f"{span.name} {dict(span.attributes or {})}")
        out.extend(f"{e.name} {dict(e.attributes or {})}" for e in span.events)
    for log in telemetry.logs(evaluation=None):
        out.append(f"{log.log_record.body} {dict(log.log_record.attributes or {})}")
    for metric in telemetry.metrics().values():
        out.extend(f"{metric.name} {dict(p.attributes or {})}" for p in metric.data.data_points)
    for record in caplog.records:
        out.append(record.getMessage())
        if record.exc_info:
            out.append("".join(traceback.format_exception(*record.exc_info)))
        if record.exc_text:
            out.append(record.exc_text)
    return out


@pytest.mark.parametrize("worker", ["thread", "process"])
def test_a_marker_in_any_invalid_input_leaves_in_no_telemetry_and_no_log(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, worker: str
) -> None:
    # retrieved_content=[{"Patient John Doe, DOB ...": 0.91}] (a chunk keyed by its text) had its keys
    # quoted in the invalid_input explanation: the user's text went out on the result span, the
    # gen_ai.evaluation.result event and the WARNING log, with content capture off.
    evaluator = _evaluator(telemetry, worker)
    arguments: dict[str, Any] = {"query": QUESTION, "retrieved_content": CHUNKS, "actual_output": ANSWER}
    with caplog.at_level(logging.DEBUG):
        for argument, value in _SHAPES:
            evaluator.record_interaction(**{**arguments, argument: value()})
        assert evaluator.force_flush(60_000)
    stats = evaluator.stats()
    assert stats.captured == len(_SHAPES), stats
    everything = _everything(telemetry, caplog)
    assert any("retrieved_content[0]" in text for text in everything)  # the explanations were emitted
    leaks = [text for text in everything if MARKER in text or "zq7x" in text]
    assert not leaks, leaks
    evaluator.shutdown(5_000)
