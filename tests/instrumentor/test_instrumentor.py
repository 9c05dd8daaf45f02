"""``CtxutilInstrumentor``: one ``instrument()`` attaches the handler to every LangChain run through
LangChain's configure hook (no ``callbacks=`` anywhere), in every thread and task; ``uninstrument()``
detaches it. Real parts: LangChain runnables, the real Evaluator with the offline lexical judge, the real
SDK providers with in-memory exporters (passed as arguments, not global)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from ctxutil_otel import SettingsError
from ctxutil_otel.capture import CtxutilInstrumentor
from ctxutil_otel.emit import names as n
from tests.capture.conftest import QUESTION, rag_chain

from .conftest import Telemetry

QUESTIONS = (QUESTION, "Does green tea reduce inflammation?", "Where did tea originate?")


def _instrument(telemetry: Telemetry, **settings: object) -> CtxutilInstrumentor:
    instrumentor = CtxutilInstrumentor()
    instrumentor.instrument(
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        logger_provider=telemetry.logger_provider,
        max_evaluations_per_second=0,
        **settings,
    )
    return instrumentor


def _flush(instrumentor: CtxutilInstrumentor) -> None:
    handler = instrumentor.handler
    assert handler is not None
    assert handler.force_flush(10_000)


def test_is_an_opentelemetry_instrumentor_singleton() -> None:
    assert isinstance(CtxutilInstrumentor(), BaseInstrumentor)
    assert CtxutilInstrumentor() is CtxutilInstrumentor()
    assert any("langchain-core" in dep for dep in CtxutilInstrumentor().instrumentation_dependencies())


def test_every_run_is_evaluated_without_callbacks_in_threads_and_tasks(telemetry: Telemetry) -> None:
    instrumentor = _instrument(telemetry, application_name="instrumented-bot")
    chain = rag_chain()
    chain.invoke(QUESTIONS[0])  # the calling thread

    worker = threading.Thread(target=lambda: chain.invoke(QUESTIONS[1]))  # a thread started afterwards
    worker.start()
    worker.join()

    async def in_a_task() -> str:
        return await chain.ainvoke(QUESTIONS[2])

    asyncio.run(in_a_task())  # a task on a new event loop
    _flush(instrumentor)

    spans = telemetry.spans(n.SPAN_EVALUATION)
    assert len(spans) == 3
    assert {dict(s.attributes or {})[n.ATTR_APPLICATION_NAME] for s in spans} == {"instrumented-bot"}
    assert len(telemetry.logs()) == 3
    stats = instrumentor.handler.stats() if instrumentor.handler else None
    assert stats is not None and stats.evaluated == 3 and stats.captured == 3


def test_a_handler_passed_explicitly_as_well_is_not_doubled(telemetry: Telemetry) -> None:
    instrumentor = _instrument(telemetry)
    handler = instrumentor.handler
    assert handler is not None
    rag_chain().invoke(QUESTION, config={"callbacks": [handler]})
    _flush(instrumentor)
    assert len(telemetry.spans(n.SPAN_EVALUATION)) == 1


def test_uninstrument_detaches_and_shuts_the_handler_down(telemetry: Telemetry) -> None:
    instrumentor = _instrument(telemetry)
    handler = instrumentor.handler
    assert handler is not None
    rag_chain().invoke(QUESTION)
    _flush(instrumentor)
    instrumentor.uninstrument()
    assert instrumentor.handler is None

    rag_chain().invoke(QUESTION)
    assert handler.stats().captured == 1, "a run after uninstrument() reached the handler"
    assert len(telemetry.spans(n.SPAN_EVALUATION)) == 1


def test_instrument_again_after_uninstrument_takes_the_new_settings(telemetry: Telemetry) -> None:
    _instrument(telemetry, application_name="first").uninstrument()
    instrumentor = _instrument(telemetry, application_name="second")
    rag_chain().invoke(QUESTION)
    _flush(instrumentor)
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    assert dict(span.attributes or {})[n.ATTR_APPLICATION_NAME] == "second"


def test_settings_come_from_the_environment_too(
    telemetry: Telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXUTIL_SAMPLE_RATE", "0")
    instrumentor = _instrument(telemetry)
    rag_chain().invoke(QUESTION)
    _flush(instrumentor)
    assert instrumentor.handler is not None and instrumentor.handler.stats().sampled_out == 1
    assert telemetry.spans(n.SPAN_EVALUATION) == []


def test_an_unknown_setting_is_refused_by_name_and_nothing_is_attached(telemetry: Telemetry) -> None:
    with pytest.raises(SettingsError, match="sample_rat"):
        _instrument(telemetry, sample_rat=0.5)
    assert CtxutilInstrumentor().handler is None
    assert not CtxutilInstrumentor().is_instrumented_by_opentelemetry
