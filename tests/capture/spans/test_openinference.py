"""Real instrumentation producing real spans: ``openinference-instrumentation-langchain`` on the demo's LCEL
RAG chain (real LangChain runnables replaying the bundled RAGBench rows), the real SDK with an in-memory
exporter, and UtilizationSpanProcessor on the same TracerProvider."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from openinference.instrumentation import TraceConfig
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

from ctxutil_otel.data import load_sample
from ctxutil_otel.demo import build_rag_chain, replay_parts
from ctxutil_otel.emit import Emitter, names

from .conftest import Harness

# openinference-instrumentation-langchain 0.1.80 calls BaseMessage.text() on langchain-core 1.x
pytestmark = pytest.mark.filterwarnings("ignore:Calling .text\\(\\) as a method is deprecated")

Make = Callable[..., Harness]
ROWS = load_sample(3)


@pytest.fixture
def instrument() -> Iterator[Callable[..., None]]:
    """``instrument(provider, config=None)``: OpenInference's LangChain instrumentation on ``provider``,
    removed after the test (the instrumentor is a process-wide singleton)."""
    instrumentor = LangChainInstrumentor()

    def do(provider: TracerProvider, config: TraceConfig | None = None) -> None:
        instrumentor.instrument(tracer_provider=provider, config=config)

    yield do
    instrumentor.uninstrument()


def _kind(span: ReadableSpan) -> Any:
    return (span.attributes or {}).get("openinference.span.kind")


def _chain() -> Any:
    retriever, model = replay_parts(ROWS)
    return build_rag_chain(retriever, model)


def test_lcel_chain_turns_reach_the_metric(make_harness: Make, instrument: Callable[..., None]) -> None:
    h = make_harness()
    instrument(h.provider)
    chain = _chain()
    for row in ROWS:
        assert chain.invoke(row["query"]) == row["actual_output"]
    stats = h.flush()
    assert sorted(h.judge.calls) == sorted(
        (row["query"], row["actual_output"], list(row["retrieved_content"])) for row in ROWS
    )
    assert stats.captured == 3 and stats.evaluated + stats.not_applicable == 3
    llm_spans = {s.context.span_id: s for s in h.spans() if _kind(s) == "LLM"}
    roots = {s.context.trace_id: s for s in h.spans() if s.parent is None}
    for interaction in h.interactions:
        assert interaction.parent is not None and interaction.parent.span_id in llm_spans
        root = roots[interaction.trace_id]
        assert (interaction.start_time_ns, interaction.end_time_ns) == (root.start_time, root.end_time)
        documents = interaction.documents
        assert [d.metadata for d in documents] == [{"index": i} for i in range(len(documents))]  # type: ignore[attr-defined]
    assert h.processor.pending_traces == 0 and h.processor.errors == 0


def test_two_invocations_in_one_trace_are_two_turns(
    make_harness: Make, instrument: Callable[..., None]
) -> None:
    h = make_harness()
    instrument(h.provider)
    chain = _chain()
    with h.tracer.start_as_current_span("conversation"):
        assert chain.invoke(ROWS[0]["query"]) == ROWS[0]["actual_output"]
        assert "".join(chain.stream(ROWS[1]["query"])) == ROWS[1]["actual_output"]  # streamed
        captured_before_root_end = h.evaluator.stats().captured
    stats = h.flush()
    assert captured_before_root_end == 2 and stats.captured == 2
    assert sorted(h.judge.calls) == sorted(
        (row["query"], row["actual_output"], list(row["retrieved_content"])) for row in ROWS[:2]
    )
    (conversation,) = h.spans("conversation")
    invocations = [
        s for s in h.spans() if s.parent is not None and s.parent.span_id == conversation.context.span_id
    ]
    assert len(invocations) == 2
    assert {i.trace_id for i in h.interactions} == {conversation.context.trace_id}
    assert sorted((i.start_time_ns, i.end_time_ns) for i in h.interactions) == sorted(
        (s.start_time, s.end_time) for s in invocations
    )
    assert len({i.parent.span_id for i in h.interactions if i.parent is not None}) == 2


def test_hidden_content_is_counted_not_evaluable(make_harness: Make, instrument: Callable[..., None]) -> None:
    h = make_harness()
    instrument(h.provider, TraceConfig(hide_inputs=True, hide_outputs=True))
    _chain().invoke(ROWS[0]["query"])
    stats = h.flush()
    assert (stats.captured, dict(stats.dropped)) == (1, {"not_evaluable": 1})
    assert h.judge.calls == []


def test_real_emitter_evaluation_span_is_not_reevaluated(
    make_harness: Make, instrument: Callable[..., None]
) -> None:
    provider = TracerProvider()
    emitter = _Forward(Emitter(tracer_provider=provider))  # evaluation spans go to the same provider
    h = make_harness(emitter=emitter, provider_factory=lambda ids: provider)
    instrument(h.provider)
    chain = _chain()
    with h.tracer.start_as_current_span("request"):  # keeps the trace open while the result is emitted
        chain.invoke(ROWS[0]["query"])
        h.flush()
    stats = h.flush()
    (evaluation,) = h.spans(names.SPAN_EVALUATION)
    (llm,) = [s for s in h.spans() if _kind(s) == "LLM"]
    assert evaluation.parent is not None and evaluation.parent.span_id == llm.context.span_id
    assert evaluation.context.trace_id == llm.context.trace_id
    assert stats.captured == 1 and h.processor.errors == 0 and h.processor.pending_traces == 0


class _Forward:
    """Forwards to the real Emitter and keeps the interactions (for ``Harness.interactions``)."""

    def __init__(self, emitter: Emitter) -> None:
        self.emitter = emitter
        self.interactions: list[Any] = []

    def emit(self, interaction: Any, result: Any, duration_s: float) -> None:
        self.interactions.append(interaction)
        self.emitter.emit(interaction, result, duration_s)

    def observe(self, *args: Any) -> None:
        self.emitter.observe(*args)
