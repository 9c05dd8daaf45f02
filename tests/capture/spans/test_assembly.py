"""Trace assembly on its own: which records pair into turns, where turns close, the bounds.

``TraceBuffer`` is pure bookkeeping over span ids; these tests drive it with ``SpanContext`` values and
a fake clock (the processor tests drive it with real SDK spans).
"""

from __future__ import annotations

import itertools

import pytest
from opentelemetry.trace import SpanContext, TraceFlags

from ctxutil_otel.capture.spans._assembly import BufferedPart, TraceBuffer, Turn, pair
from ctxutil_otel.capture.spans._convert import NotEvaluable, to_interaction
from ctxutil_otel.capture.spans._model import Chunk, Generation, Retrieval
from tests.support.doubles import FakeClock

TRACE = 0xABC
_ids = itertools.count(1)


def ctx(trace_id: int = TRACE) -> SpanContext:
    return SpanContext(trace_id=trace_id, span_id=next(_ids), is_remote=False, trace_flags=TraceFlags(1))


def retrieval(*texts: str, query: str | None = "q", reranked: bool = False) -> Retrieval:
    return Retrieval(query, tuple(Chunk(t) for t in texts), "genai", reranked=reranked)


def generation(answer: str | None = "a") -> Generation:
    return Generation(answer, "genai")


def part(record: Retrieval | Generation, start: int) -> BufferedPart:
    return BufferedPart(record, ctx(), start, start + 1, record.size())


def ended(buf: TraceBuffer, span_id: int, parent: int | None, start: int, end: int) -> list[Turn]:
    """A span of TRACE that is no record ended (``TraceBuffer.end_span`` with ``record=None``)."""
    turns, evicted = buf.end_span(None, SpanContext(TRACE, span_id, is_remote=False), parent, start, end)
    assert evicted == []
    return turns


def buffer(clock: FakeClock | None = None, **kw: int | float) -> TraceBuffer:
    settings = {"ttl_s": 60.0, "max_traces": 100, "max_bytes": 10_000_000, **kw}
    return TraceBuffer(clock=clock or FakeClock(), **settings)  # type: ignore[arg-type]


# --- pairing -----------------------------------------------------------------------------------------


def test_pair_merges_retrievals_in_start_order_and_leaves_generations_without_retrieval() -> None:
    rewrite = part(generation("rewritten question"), 0)  # a query rewrite before retrieval
    late = part(retrieval("second"), 20)
    early = part(retrieval("first"), 10)
    answer = part(generation(), 30)
    follow_up = part(generation("suggestions"), 40)  # after the answer used the retrievals
    pairs, leftovers = pair([answer, late, follow_up, rewrite, early])
    assert pairs == [((early, late), answer)]
    assert leftovers == [rewrite, follow_up]


def test_pair_reranker_output_replaces_the_retrievals_before_it() -> None:
    wide = part(retrieval("a", "b", "c"), 0)
    reranked = part(retrieval("c", "a", reranked=True), 5)
    answer = part(generation(), 9)
    pairs, leftovers = pair([answer, reranked, wide])
    assert pairs == [((reranked,), answer)] and leftovers == []


def test_pair_sequential_turns_and_unused_retrieval() -> None:
    r1, g1, r2, g2, r3 = (part(retrieval("1"), 0), part(generation(), 1), part(retrieval("2"), 2),
                          part(generation(), 3), part(retrieval("3"), 4))  # fmt: skip
    pairs, leftovers = pair([g2, r3, r1, g1, r2])
    assert pairs == [((r1,), g1), ((r2,), g2)] and leftovers == [r3]


# --- closing ----------------------------------------------------------------------------------------


def test_turn_closes_at_the_lowest_span_enclosing_retrieval_and_generation() -> None:
    """The OpenInference LCEL shape: root -> parallel -> inner sequence -> retriever; root -> LLM."""
    buf = buffer()
    root, parallel, inner, retriever, llm = ctx(), ctx(), ctx(), ctx(), ctx()
    assert buf.end_span(retrieval("c1", "c2"), retriever, inner.span_id, 10, 20) == ([], [])
    assert ended(buf, inner.span_id, parallel.span_id, 5, 25) == []
    assert ended(buf, parallel.span_id, root.span_id, 4, 30) == []
    assert buf.end_span(generation("answer"), llm, root.span_id, 40, 50) == ([], [])
    turns = ended(buf, root.span_id, None, 1, 60)
    assert len(turns) == 1
    (turn,) = turns
    assert turn.generation.context == llm and [p.context for p in turn.retrievals] == [retriever]
    assert (turn.start_ns, turn.end_ns) == (1, 60)
    assert len(buf) == 0 and buf.size == 0


def test_two_turns_under_their_own_chain_spans_close_separately_and_once() -> None:
    buf = buffer()
    root, chain1, chain2 = ctx(), ctx(), ctx()
    buf.end_span(retrieval("1"), ctx(), chain1.span_id, 10, 11)
    buf.end_span(generation("a1"), ctx(), chain1.span_id, 12, 13)
    first = ended(buf, chain1.span_id, root.span_id, 9, 14)
    assert [(t.start_ns, t.end_ns) for t in first] == [(9, 14)]
    assert len(buf) == 0  # nothing left: the trace is forgotten, later spans cost one lookup
    buf.end_span(retrieval("2"), ctx(), chain2.span_id, 20, 21)
    buf.end_span(generation("a2"), ctx(), chain2.span_id, 22, 23)
    second = ended(buf, chain2.span_id, root.span_id, 19, 24)
    assert [(t.start_ns, t.end_ns) for t in second] == [(19, 24)]
    assert ended(buf, root.span_id, None, 0, 30) == []  # each turn once


def test_generation_ending_after_its_chain_is_assembled_at_the_root() -> None:
    buf = buffer()
    root, chain = ctx(), ctx()
    buf.end_span(retrieval("x"), ctx(), chain.span_id, 10, 11)
    assert ended(buf, chain.span_id, root.span_id, 9, 15) == []  # only the retrieval so far
    late = ctx()
    # its chain already ended:
    assert buf.end_span(generation("late"), late, chain.span_id, 12, 18) == ([], [])
    (turn,) = ended(buf, root.span_id, None, 0, 20)
    assert turn.generation.context == late and (turn.start_ns, turn.end_ns) == (0, 20)


def test_remote_parent_is_a_local_root_and_leftovers_are_dropped() -> None:
    buf = buffer()
    server = ctx()
    buf.end_span(retrieval("unused"), ctx(), server.span_id, 1, 2)
    assert ended(buf, server.span_id, None, 0, 3) == []
    assert len(buf) == 0 and buf.size == 0


# --- bounds ------------------------------------------------------------------------------------------


def test_ttl_expiry_is_lazy_bounded_and_returns_pending_turns() -> None:
    clock = FakeClock()
    buf = buffer(clock, ttl_s=10.0)
    for trace_id in (1, 2, 3):
        root = ctx(trace_id)
        buf.end_span(retrieval("x"), ctx(trace_id), root.span_id, 1, 2)
        buf.end_span(generation(), ctx(trace_id), root.span_id, 3, 4)
        clock.advance(1)
    assert buf.expire(clock(), limit=10) == []
    clock.advance(8.5)  # traces 1 and 2 are older than 10 s (11.5, 10.5), trace 3 is not (9.5)
    first = buf.expire(clock(), limit=1)
    assert [t.trace_id for t in first] == [1] and (first[0].start_ns, first[0].end_ns) == (1, 4)
    assert [t.trace_id for t in buf.expire(clock(), limit=5)] == [2]
    assert list(buf.traces) == [3]


def test_count_and_byte_bounds_evict_the_oldest() -> None:
    buf = buffer(max_traces=2)
    for trace_id in (1, 2):
        buf.end_span(retrieval("x"), ctx(trace_id), 99, 1, 2)
        buf.end_span(generation(), ctx(trace_id), 99, 3, 4)
    assembled, evicted = buf.end_span(retrieval("y"), ctx(3), 99, 5, 6)
    assert assembled == [] and [(t.trace_id, reason) for t, reason in evicted] == [(1, "pending_full")]
    assert list(buf.traces) == [2, 3]

    small = buffer(max_bytes=1000)
    small.end_span(retrieval("a" * 300), ctx(1), 99, 1, 2)
    small.end_span(generation(), ctx(1), 99, 3, 4)
    _, evicted = small.end_span(retrieval("b" * 500), ctx(2), 99, 5, 6)
    assert [(t.trace_id, reason) for t, reason in evicted] == [(1, "pending_full")]
    assert 500 < small.size <= 1000 and list(small.traces) == [2]


def test_a_trace_evicted_for_room_past_the_ttl_is_ttl_expired() -> None:
    """``expire`` is lazy and bounded: the count bound may meet an expired trace first. Its reason is
    its age (``ttl_expired``); a younger trace evicted for room is ``pending_full``."""
    clock = FakeClock()
    buf = buffer(clock, ttl_s=10.0, max_traces=2)
    for trace_id in (1, 2):
        buf.end_span(retrieval("x"), ctx(trace_id), 99, 1, 2)
        buf.end_span(generation(), ctx(trace_id), 99, 3, 4)
        clock.advance(5)
    # now: trace 1 is 10 s old (expired), trace 2 is 5 s old
    _, evicted = buf.end_span(retrieval("y"), ctx(3), 99, 5, 6)
    assert [(t.trace_id, reason) for t, reason in evicted] == [(1, "ttl_expired")]
    _, evicted = buf.end_span(retrieval("z"), ctx(4), 99, 7, 8)
    assert [(t.trace_id, reason) for t, reason in evicted] == [(2, "pending_full")]
    assert list(buf.traces) == [3, 4]


def test_buffer_rejects_bad_bounds() -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        buffer(ttl_s=0)


# --- interaction -------------------------------------------------------------------------------------


def test_to_interaction_query_chunks_parent_and_not_evaluable_cases() -> None:
    buf = buffer()
    root, llm = ctx(), ctx()
    buf.end_span(retrieval("c1", query=" "), ctx(), root.span_id, 1, 2)  # blank query: skipped
    buf.end_span(retrieval("c2", query="real query"), ctx(), root.span_id, 3, 4)
    buf.end_span(Generation("answer", "genai", query="from messages"), llm, root.span_id, 5, 6)
    (turn,) = ended(buf, root.span_id, None, 0, 9)
    interaction = to_interaction(turn)
    assert not isinstance(interaction, NotEvaluable)
    assert (interaction.query, interaction.answer) == ("real query", "answer")
    assert [c.page_content for c in interaction.documents] == ["c1", "c2"]  # type: ignore[attr-defined]
    assert interaction.parent == llm and interaction.trace_id == TRACE
    assert interaction.id == f"{llm.span_id:016x}" and interaction.source == "span_processor"
    assert (interaction.start_time_ns, interaction.end_time_ns) == (0, 9)

    def single(r: Retrieval, g: Generation) -> object:
        b = buffer()
        top = ctx()
        b.end_span(r, ctx(), top.span_id, 1, 2)
        b.end_span(g, ctx(), top.span_id, 3, 4)
        (t,) = ended(b, top.span_id, None, 0, 5)
        return to_interaction(t)

    assert single(Retrieval("q", None, "genai", "malformed"), generation()) == NotEvaluable(
        "not_evaluable", "malformed", "genai"
    )
    assert single(retrieval("c"), generation(None)) == NotEvaluable("not_evaluable", "no_answer", "genai")
    assert single(retrieval("c", query=None), generation()) == NotEvaluable(
        "not_evaluable", "no_query", "genai"
    )
    fallback = single(retrieval("c", query=None), Generation("a", "genai", query="q from messages"))
    assert not isinstance(fallback, NotEvaluable) and fallback.query == "q from messages"  # type: ignore[attr-defined]


def test_a_trace_evicted_before_its_generation_counts_the_generation_with_the_eviction_reason() -> None:
    """The span side of issue 10 item 6: the retrieval was evicted (pending_full), then the generation
    that used it ended: one turn, counted with the eviction's reason (before: nothing, it vanished)."""
    buf = buffer(max_traces=1)
    first, second = ctx(1), ctx(2)
    buf.end_span(retrieval("x"), ctx(1), first.span_id, 1, 2)
    _, evicted = buf.end_span(retrieval("y"), ctx(2), second.span_id, 3, 4)
    assert evicted == []  # nothing paired yet: remembered, not counted
    late = ctx(1)
    turns, evicted = buf.end_span(generation(), late, first.span_id, 5, 6)
    assert turns == [] and [(t.trace_id, t.generation.context, r) for t, r in evicted] == [
        (1, late, "pending_full")
    ]
    assert list(buf.traces) == [2]  # the generation was not buffered
    # a search-only trace evicted and then ended is not a turn: its root forgets it, nothing counted
    buf.end_span(retrieval("z"), ctx(3), 77, 7, 8)  # evicts trace 2 (retrieval only)
    assert buf.end_span(None, SpanContext(2, second.span_id, is_remote=False), None, 0, 9) == ([], [])
    assert buf.end_span(generation(), ctx(2), second.span_id, 10, 11)[1] == []  # root ended: forgotten
