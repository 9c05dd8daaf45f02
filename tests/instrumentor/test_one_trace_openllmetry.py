"""Issue 9 item 5, OpenLLMetry's LangChain instrumentation (PyPI ``opentelemetry-instrumentation-langchain``,
Traceloop): it has no public way to look a run's span up, but it attaches each run's span to the OpenTelemetry
context while the run is open. So the evaluation span is a child of its root span when its handler runs
before ours (``CtxutilInstrumentor``: LangChain adds configure-hook handlers after the ones a callback
manager starts with), and NOT when ours runs first (``callbacks=[handler]``): that limitation is documented
(docs/telemetry.md, "One trace with other instrumentations") with the span processor as the recommended
set-up. Real parts throughout; the instrumentation is a test dependency.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.instrumentation.langchain import LangchainInstrumentor
from opentelemetry.sdk.trace import ReadableSpan

from ctxutil_otel.capture import CtxutilInstrumentor, UtilizationCallbackHandler
from ctxutil_otel.emit import names as n
from ctxutil_otel.worker import Evaluator
from tests.capture.conftest import QUESTION, rag_chain

from .conftest import Telemetry, make_telemetry


@pytest.fixture(scope="module")
def _instrumented() -> Iterator[Telemetry]:
    """OpenLLMetry's instrumentor does not trace again after ``uninstrument()`` + ``instrument()`` in one
    process, so it is instrumented once for this module, on providers of its own."""
    providers = make_telemetry()
    instrumentor = LangchainInstrumentor()
    instrumentor.instrument(tracer_provider=providers.tracer_provider)
    yield providers
    instrumentor.uninstrument()
    providers.tracer_provider.shutdown()
    providers.meter_provider.shutdown()
    providers.logger_provider.shutdown()


@pytest.fixture
def openllmetry(_instrumented: Telemetry) -> Telemetry:
    _instrumented.span_exporter.clear()
    _instrumented.log_exporter.clear()
    return _instrumented


def _their_root(telemetry: Telemetry) -> ReadableSpan:
    ours = {n.SPAN_EVALUATION, n.SPAN_INTERACTION}
    roots = [s for s in telemetry.spans() if s.name not in ours and s.parent is None]
    assert len(roots) == 1, [s.name for s in roots]
    return roots[0]


def test_with_the_instrumentor_the_evaluation_is_a_child_of_their_root(
    openllmetry: Telemetry,
) -> None:
    telemetry = openllmetry
    instrumentor = CtxutilInstrumentor()
    instrumentor.instrument(
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        logger_provider=telemetry.logger_provider,
        max_evaluations_per_second=0,
    )
    rag_chain().invoke(QUESTION)
    assert instrumentor.handler is not None and instrumentor.handler.force_flush(10_000)
    root = _their_root(telemetry)
    (evaluation,) = telemetry.spans(n.SPAN_EVALUATION)
    assert evaluation.context.trace_id == root.context.trace_id
    assert evaluation.parent is not None and evaluation.parent.span_id == root.context.span_id


def test_limitation_with_callbacks_the_evaluation_is_in_another_trace(
    openllmetry: Telemetry,
) -> None:
    telemetry = openllmetry
    evaluator = Evaluator(emitter=telemetry.emitter(), max_evaluations_per_second=0)
    handler = UtilizationCallbackHandler(evaluator)
    rag_chain().invoke(QUESTION, config={"callbacks": [handler]})
    assert handler.force_flush(10_000)
    evaluator.shutdown(5_000)
    root = _their_root(telemetry)
    (evaluation,) = telemetry.spans(n.SPAN_EVALUATION)
    assert evaluation.context.trace_id != root.context.trace_id  # documented: use the span processor
