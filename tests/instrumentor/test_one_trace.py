"""Issue 9 item 5: with OpenInference's ``LangChainInstrumentor`` tracing the same chain, the evaluation span
is a child of OpenInference's span for the evaluated root run, in the same trace (not under a separate
``rag.interaction`` root). Real parts: OpenInference's instrumentor on a non-global SDK ``TracerProvider``,
real LangChain runnables, the real Evaluator and Emitter. The handler is attached both ways users do it:
``callbacks=[handler]`` (it then runs before OpenInference's tracer) and :class:`CtxutilInstrumentor` (after).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import ReadableSpan

from ctxutil_otel.capture import CtxutilInstrumentor, UtilizationCallbackHandler
from ctxutil_otel.emit import names as n
from ctxutil_otel.worker import Evaluator
from tests.capture.conftest import QUESTION, rag_chain

from .conftest import Telemetry


@pytest.fixture
def openinference(telemetry: Telemetry) -> Iterator[LangChainInstrumentor]:
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider)
    yield instrumentor
    instrumentor.uninstrument()


def _openinference_root(telemetry: Telemetry) -> ReadableSpan:
    ours = {n.SPAN_EVALUATION, n.SPAN_INTERACTION}
    roots = [s for s in telemetry.spans() if s.name not in ours and s.parent is None]
    assert len(roots) == 1, [s.name for s in roots]
    attrs = dict(roots[0].attributes or {})
    assert attrs.get("openinference.span.kind") == "CHAIN"
    return roots[0]


def _assert_child_of_the_openinference_root(telemetry: Telemetry) -> None:
    root = _openinference_root(telemetry)
    (evaluation,) = telemetry.spans(n.SPAN_EVALUATION)
    assert telemetry.spans(n.SPAN_INTERACTION) == [], "a separate rag.interaction root was opened"
    assert evaluation.context.trace_id == root.context.trace_id
    assert evaluation.parent is not None and evaluation.parent.span_id == root.context.span_id
    assert [link.context.span_id for link in evaluation.links] == [root.context.span_id]


def test_handler_in_callbacks_parents_the_evaluation_to_the_openinference_root(
    telemetry: Telemetry, openinference: LangChainInstrumentor
) -> None:
    evaluator = Evaluator(emitter=telemetry.emitter(), max_evaluations_per_second=0)
    handler = UtilizationCallbackHandler(evaluator)
    rag_chain().invoke(QUESTION, config={"callbacks": [handler]})
    assert handler.force_flush(10_000)
    evaluator.shutdown(5_000)
    _assert_child_of_the_openinference_root(telemetry)


def test_instrumentor_parents_the_evaluation_to_the_openinference_root(
    telemetry: Telemetry, openinference: LangChainInstrumentor
) -> None:
    instrumentor = CtxutilInstrumentor()
    instrumentor.instrument(
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        logger_provider=telemetry.logger_provider,
        max_evaluations_per_second=0,
    )
    rag_chain().invoke(QUESTION)
    assert instrumentor.handler is not None and instrumentor.handler.force_flush(10_000)
    _assert_child_of_the_openinference_root(telemetry)


def test_inside_an_application_span_the_trace_is_the_application_one(
    telemetry: Telemetry, openinference: LangChainInstrumentor
) -> None:
    evaluator = Evaluator(emitter=telemetry.emitter(), max_evaluations_per_second=0)
    handler = UtilizationCallbackHandler(evaluator)
    tracer = telemetry.tracer_provider.get_tracer("tests.app")
    with tracer.start_as_current_span("POST /ask") as request:
        rag_chain().invoke(QUESTION, config={"callbacks": [handler]})
    assert handler.force_flush(10_000)
    evaluator.shutdown(5_000)
    (evaluation,) = telemetry.spans(n.SPAN_EVALUATION)
    chain_roots = [
        s for s in telemetry.spans() if s.parent and s.parent.span_id == request.get_span_context().span_id
    ]
    (chain_root,) = [s for s in chain_roots if s.name != n.SPAN_EVALUATION]
    assert evaluation.context.trace_id == request.get_span_context().trace_id
    assert evaluation.parent is not None and evaluation.parent.span_id == chain_root.context.span_id


def test_without_openinference_nothing_changes(telemetry: Telemetry) -> None:
    evaluator = Evaluator(emitter=telemetry.emitter(), max_evaluations_per_second=0)
    handler = UtilizationCallbackHandler(evaluator)
    rag_chain().invoke(QUESTION, config={"callbacks": [handler]})
    assert handler.force_flush(10_000)
    evaluator.shutdown(5_000)
    (root,) = telemetry.spans(n.SPAN_INTERACTION)
    (evaluation,) = telemetry.spans(n.SPAN_EVALUATION)
    assert evaluation.parent is not None and evaluation.parent.span_id == root.context.span_id
