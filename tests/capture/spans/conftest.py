"""Fixtures for the span-processor tests: the real OpenTelemetry SDK, the real Evaluator and metric.

Real parts: ``TracerProvider`` with an ``InMemorySpanExporter``, the real
:class:`~ctxutil_otel.worker.Evaluator` running :class:`~ctxutil_otel.ContextualUtilization` with the
offline :class:`~ctxutil_otel.LexicalJudge`, and real instrumentations or a real SDK tracer producing the
spans. The recorders are ``RecordingJudge`` (tests/capture/conftest.py) and the shared ``RecordingEmitter``
(tests/support/doubles.py); the real Emitter is used in test_openinference.py. The clock of the buffer
TTL is the shared ``FakeClock`` so eviction is tested without sleeping.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import SpanKind, Tracer

from ctxutil_otel import ContextualUtilization
from ctxutil_otel.capture import Interaction
from ctxutil_otel.capture.spans import UtilizationSpanProcessor
from ctxutil_otel.worker import Evaluator, EvaluatorStats
from tests.support.doubles import FakeClock, RecordingEmitter

from ..conftest import RecordingJudge

FIXTURES = Path(__file__).parent / "fixtures"


def load_fixture(name: str) -> dict[str, Any]:
    """A recorded attribute fixture from fixtures/ (each names the convention version it follows)."""
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


class FixedTraceIds(IdGenerator):
    """The SDK's random span ids, with trace ids taken from ``trace_ids`` in order while any are left
    (to put a trace on either side of the trace-id ratio sampler)."""

    def __init__(self) -> None:
        self.trace_ids: list[int] = []
        self._random = RandomIdGenerator()

    def generate_span_id(self) -> int:
        return self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        return self.trace_ids.pop(0) if self.trace_ids else self._random.generate_trace_id()


@dataclass
class Harness:
    """A TracerProvider whose finished spans go to an in-memory exporter and to the processor."""

    provider: TracerProvider
    exporter: InMemorySpanExporter
    processor: UtilizationSpanProcessor
    evaluator: Evaluator
    judge: RecordingJudge
    emitter: Any
    clock: FakeClock
    ids: FixedTraceIds
    tracer: Tracer = field(init=False)

    def __post_init__(self) -> None:
        self.tracer = self.provider.get_tracer("ctxutil-tests")

    def flush(self) -> EvaluatorStats:
        assert self.processor.force_flush(10_000)
        return self.evaluator.stats()

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if name is None or s.name == name]

    @property
    def interactions(self) -> list[Interaction]:
        return list(self.emitter.interactions)


@pytest.fixture
def make_harness() -> Iterator[Callable[..., Harness]]:
    """``make_harness(emitter=None, judge=None, provider_factory=None, processor_kwargs=None,
    **evaluator_settings)``: ``judge`` defaults to a ``RecordingJudge``; providers and evaluators are shut
    down after the test."""
    made: list[Harness] = []

    def make(
        *,
        emitter: Any = None,
        judge: RecordingJudge | None = None,
        provider_factory: Callable[[FixedTraceIds], TracerProvider] | None = None,
        processor_kwargs: Mapping[str, Any] | None = None,
        **evaluator_settings: Any,
    ) -> Harness:
        judge = judge if judge is not None else RecordingJudge()
        emitter = emitter if emitter is not None else RecordingEmitter()
        evaluator_settings.setdefault("max_evaluations_per_second", 0)
        evaluator = Evaluator(ContextualUtilization(judge=judge), emitter=emitter, **evaluator_settings)
        clock = FakeClock()
        processor = UtilizationSpanProcessor(evaluator, clock=clock, **dict(processor_kwargs or {}))
        ids = FixedTraceIds()
        provider = provider_factory(ids) if provider_factory else TracerProvider(id_generator=ids)
        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        provider.add_span_processor(processor)
        harness = Harness(provider, exporter, processor, evaluator, judge, emitter, clock, ids)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.provider.shutdown()  # shuts the processor, hence the evaluator, down


_KINDS = {kind.name: kind for kind in SpanKind}


def play(tracer: Tracer, node: Mapping[str, Any]) -> None:
    """Produce the span tree ``node`` (``name``, ``kind``, ``attributes``, ``children``) with a real SDK
    tracer: each span starts before and ends after its children, children in order."""
    with tracer.start_as_current_span(
        node["name"], kind=_KINDS[node.get("kind", "INTERNAL")], attributes=node.get("attributes") or {}
    ):
        for child in node.get("children", ()):
            play(tracer, child)
