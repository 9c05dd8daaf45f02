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
from contextlib import contextmanager
from typing import Any

import pytest
import wrapt
from opentelemetry.instrumentation.langchain import LangchainInstrumentor
from opentelemetry.sdk.trace import ReadableSpan

from ctxutil_otel.capture import CtxutilInstrumentor, UtilizationCallbackHandler
from ctxutil_otel.emit import names as n
from ctxutil_otel.worker import Evaluator
from tests.capture.conftest import QUESTION, rag_chain

from .conftest import Telemetry, make_telemetry

_ABSENT = object()
Patch = tuple[Any, str, Any]  # (owner, attribute, what the owner held before: a function or _ABSENT)


@contextmanager
def _recording_patches() -> Iterator[list[Patch]]:
    """Record the wrapt patches OpenLLMetry's ``instrument()`` makes inside the block, for :func:`_undo`.

    Its ``uninstrument()`` (0.62.4) undoes none of them: it passes dotted names such as
    ``unwrap("langchain_core.callbacks", "BaseCallbackManager.__init__")`` to
    ``opentelemetry.instrumentation.utils.unwrap``, which resolves no dotted attribute and silently does
    nothing. Left behind, the ``BaseCallbackManager.__init__`` wrapper adds OpenLLMetry's handler to every
    later callback manager in the process: it traces onto this module's shut-down provider ("Processor is
    already shutdown") and attaches its spans to the context, so the chains of later tests (OpenInference's
    in tests/capture/spans) got a foreign parent; and a second ``instrument()`` never traces. The recorder
    only observes: wrapt still makes each patch, with OpenLLMetry's own wrapper.
    """
    import opentelemetry.instrumentation.langchain as openllmetry

    made: list[Patch] = []

    def recording(target: Any, name: str, wrapper: Any) -> Any:
        owner, attribute, _ = wrapt.resolve_path(target, name)
        made.append((owner, attribute, vars(owner).get(attribute, _ABSENT)))
        return wrapt.wrap_function_wrapper(target, name, wrapper)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(openllmetry, "wrap_function_wrapper", recording)
        yield made


def _undo(made: list[Patch]) -> None:
    for owner, attribute, before in reversed(made):
        if before is _ABSENT:
            delattr(owner, attribute)
        else:
            setattr(owner, attribute, before)


@pytest.fixture(scope="module")
def _instrumented() -> Iterator[Telemetry]:
    """OpenLLMetry instrumented once for this module, on providers of its own, and every patch it made
    undone afterwards (its ``uninstrument()`` undoes none: :func:`_recording_patches`)."""
    providers = make_telemetry()
    instrumentor = LangchainInstrumentor()
    with _recording_patches() as made:
        instrumentor.instrument(tracer_provider=providers.tracer_provider)
    assert made, "OpenLLMetry patched nothing: the recorder no longer sees its patches"
    yield providers
    instrumentor.uninstrument()
    _undo(made)
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
