"""Records delivered again (an OTLP exporter's retry) are assembled once, within the buffer's lifetime:
``ttl_s`` after their trace left the buffer, and at most ``REMEMBERED_PER_TRACE x max_traces`` span ids
(issue 24 row 5). ``TraceBuffer`` driven with ``SpanContext`` values and a fake clock, as in
test_assembly.py; the end-to-end case is tests/faults/test_retry_faults.py.
"""

from __future__ import annotations

from opentelemetry.trace import SpanContext

from ctxutil_otel.capture.spans._assembly import REMEMBERED_PER_TRACE, TraceBuffer, Turn
from tests.support.doubles import FakeClock

from .test_assembly import buffer, ctx, generation, retrieval


def _turn(trace_id: int) -> tuple[SpanContext, SpanContext, SpanContext]:
    """The root, retrieval and generation contexts of a one-turn trace."""
    return ctx(trace_id), ctx(trace_id), ctx(trace_id)


def _deliver(buf: TraceBuffer, spans: tuple[SpanContext, SpanContext, SpanContext]) -> list[Turn]:
    """The spans as an exporter sends them (children first); returns the turns assembled."""
    root, retriever, llm = spans
    turns: list[Turn] = []
    steps = (
        (retrieval("c1", "c2"), retriever, root.span_id),
        (generation(), llm, root.span_id),
        (None, root, None),
    )
    for record, context, parent in steps:
        assembled, evicted = buf.end_span(record, context, parent, 1, 2)
        assert evicted == []
        turns.extend(assembled)
    return turns


def test_a_copy_is_ignored_within_the_ttl_and_assembled_again_after_it() -> None:
    clock = FakeClock()
    buf = buffer(clock, ttl_s=60.0)
    spans = _turn(0x1)
    assert len(_deliver(buf, spans)) == 1
    clock.advance(59.0)
    assert _deliver(buf, spans) == []  # the retry: nothing assembled, nothing left buffered
    assert len(buf) == 0
    clock.advance(1.0)  # 60 s after the trace left the buffer: forgotten
    assert len(_deliver(buf, spans)) == 1


def test_a_copy_while_its_trace_is_buffered_is_not_paired_twice() -> None:
    buf = buffer()
    root, retriever, llm = _turn(0x2)
    buf.end_span(retrieval("c1", "c2"), retriever, root.span_id, 1, 2)
    buf.end_span(retrieval("c1", "c2"), retriever, root.span_id, 1, 2)  # the retried batch
    buf.end_span(generation(), llm, root.span_id, 3, 4)
    buf.end_span(generation(), llm, root.span_id, 3, 4)
    turns, _ = buf.end_span(None, root, None, 0, 5)
    [turn] = turns
    assert [p.context for p in turn.retrievals] == [retriever]


def test_the_memory_of_assembled_spans_is_bounded() -> None:
    buf = buffer(max_traces=2)
    traces = [_turn(0x100 + i) for i in range(REMEMBERED_PER_TRACE)]  # 2 records each: 8 remembered
    for spans in traces:
        assert len(_deliver(buf, spans)) == 1
    assert _deliver(buf, traces[0]) == []  # the oldest is still remembered (8 = the bound)
    assert len(_deliver(buf, _turn(0x200))) == 1  # 2 more: the oldest two are forgotten
    assert len(_deliver(buf, traces[0])) == 1  # forgotten: assembled again
    assert _deliver(buf, traces[-1]) == []
