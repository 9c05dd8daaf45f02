"""UtilizationSpanProcessor on real SDK spans: the GenAI and OpenLLMetry fixtures produced by a real
tracer, turns and accounting, out-of-order ends, TTL eviction (``ttl_expired``) and capacity eviction
(``pending_full``), self-skip, robustness."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from ctxutil_otel.capture.spans import UtilizationSpanProcessor
from ctxutil_otel.worker import Evaluator
from tests.support.doubles import RecordingEmitter

from .conftest import Harness, load_fixture, play

Make = Callable[..., Harness]
LOW_IN = 1  # low 64 bits far below any positive rate's bound: sampled
LOW_OUT = (1 << 64) - 1  # at the top: sampled out below rate 1.0


def retrieval_attrs(query: str, *texts: str) -> dict[str, Any]:
    documents = [{"id": f"d{i}", "score": 1.0 - i / 10, "content": t} for i, t in enumerate(texts)]
    return {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.retrieval.query.text": query,
        "gen_ai.retrieval.documents": json.dumps(documents),
    }


def chat_attrs(answer: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
        ),
    }


# --- conventions through the processor ----------------------------------------------------------------


@pytest.mark.parametrize(
    "fixture", ["genai_rag_turn.json", "genai_legacy_completion.json", "openllmetry_rag.json"]
)
def test_fixture_traces_reach_the_metric(make_harness: Make, fixture: str) -> None:
    data = load_fixture(fixture)
    h = make_harness()
    play(h.tracer, data["root"])
    stats = h.flush()
    expected = data["expected"]
    assert h.judge.calls == [(expected["query"], expected["answer"], expected["chunks"])]
    assert stats.captured == 1 and stats.evaluated + stats.not_applicable == 1
    (interaction,) = h.interactions
    (root,) = [s for s in h.spans() if s.parent is None]
    # parented to the generation's span; times of the closing span (here the root)
    generation = next(s for s in h.spans() if s.context.span_id == interaction.parent.span_id)  # type: ignore[union-attr]
    assert generation.attributes is not None
    assert {"gen_ai.operation.name", "llm.request.type"} & set(generation.attributes)
    assert interaction.trace_id == root.context.trace_id
    assert (interaction.start_time_ns, interaction.end_time_ns) == (root.start_time, root.end_time)
    assert interaction.source == "span_processor" and interaction.id == f"{generation.context.span_id:016x}"
    if "scores" in expected:
        assert [c.score for c in interaction.documents] == expected["scores"]  # type: ignore[attr-defined]
    assert h.processor.pending_traces == 0 and h.processor.buffered_bytes == 0 and h.processor.errors == 0


def test_two_turns_without_chain_spans_pair_in_time_order(make_harness: Make) -> None:
    h = make_harness()
    with h.tracer.start_as_current_span("session"):
        for n in (1, 2):
            with h.tracer.start_as_current_span(
                "retrieval kb", attributes=retrieval_attrs(f"question {n}", f"chunk {n}")
            ):
                pass
            with h.tracer.start_as_current_span("chat m", attributes=chat_attrs(f"answer {n}")):
                pass
    h.flush()
    assert sorted(h.judge.calls) == [
        ("question 1", "answer 1", ["chunk 1"]),
        ("question 2", "answer 2", ["chunk 2"]),
    ]
    assert len({i.parent.span_id for i in h.interactions if i.parent is not None}) == 2


def test_two_turns_under_chain_spans_are_assembled_at_each_chain_end(make_harness: Make) -> None:
    h = make_harness()
    seen_after_first: list[int] = []
    with h.tracer.start_as_current_span("conversation"):
        for n in (1, 2):
            with h.tracer.start_as_current_span(
                f"turn {n}", attributes={"gen_ai.operation.name": "invoke_workflow"}
            ):
                with h.tracer.start_as_current_span(
                    "retrieval kb", attributes=retrieval_attrs(f"q{n}", f"c{n}")
                ):
                    pass
                with h.tracer.start_as_current_span("chat m", attributes=chat_attrs(f"a{n}")):
                    pass
            seen_after_first.append(h.evaluator.stats().captured)
    stats = h.flush()
    assert seen_after_first == [1, 2]  # each turn captured when its chain span ended, not at the root
    assert stats.captured == 2  # and never again when the root ended
    turns = {s.name: s for s in h.spans() if s.name.startswith("turn")}
    by_query = {i.query: i for i in h.interactions}
    for n in (1, 2):
        chain = turns[f"turn {n}"]
        assert (by_query[f"q{n}"].start_time_ns, by_query[f"q{n}"].end_time_ns) == (
            chain.start_time,
            chain.end_time,
        )


def test_out_of_order_generation_ending_after_its_chain(make_harness: Make) -> None:
    """Decided: assembled when the local root ends, parented to the generation's span."""
    h = make_harness()
    root = h.tracer.start_span("root")
    with trace.use_span(root):
        chain = h.tracer.start_span("chain", attributes={"openinference.span.kind": "CHAIN"})
        with trace.use_span(chain):
            retriever = h.tracer.start_span("retriever", attributes=retrieval_attrs("q", "c"))
            llm = h.tracer.start_span("llm", attributes=chat_attrs("streamed answer"))
    retriever.end()
    chain.end()  # the chain ends before the streamed generation
    assert h.evaluator.stats().captured == 0
    llm.end()
    assert h.evaluator.stats().captured == 0 and h.processor.pending_traces == 1
    root.end()
    h.flush()
    assert h.judge.calls == [("q", "streamed answer", ["c"])]
    (interaction,) = h.interactions
    assert interaction.parent == llm.get_span_context()
    assert (interaction.start_time_ns, interaction.end_time_ns) == (root.start_time, root.end_time)  # type: ignore[attr-defined]


def test_local_root_with_remote_parent_closes_the_turn(make_harness: Make) -> None:
    h = make_harness()
    remote = SpanContext(
        trace_id=0x1234 << 64 | LOW_IN, span_id=0x99, is_remote=True, trace_flags=TraceFlags(1)
    )
    with (
        trace.use_span(NonRecordingSpan(remote)),
        h.tracer.start_as_current_span("POST /ask", kind=trace.SpanKind.SERVER),
    ):
        with h.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs("q", "c")):
            pass
        with h.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
            pass
    h.flush()
    assert h.judge.calls == [("q", "a", ["c"])] and h.processor.pending_traces == 0


# --- accounting ---------------------------------------------------------------------------------------


def test_content_not_captured_is_counted_not_evaluable(make_harness: Make) -> None:
    h = make_harness()
    with h.tracer.start_as_current_span("root"):
        # OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT off: the opt-in attributes are absent
        with h.tracer.start_as_current_span(
            "retrieval kb", attributes={"gen_ai.operation.name": "retrieval"}
        ):
            pass
        with h.tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
            pass
    stats = h.flush()
    assert (stats.captured, dict(stats.dropped)) == (1, {"not_evaluable": 1})
    assert h.judge.calls == [] and h.processor.errors == 0


def test_malformed_retrieval_documents_counted_without_exception(make_harness: Make) -> None:
    h = make_harness()
    broken = {**retrieval_attrs("q", "c"), "gen_ai.retrieval.documents": '[{"id": "d0", "content": "trunc'}
    with h.tracer.start_as_current_span("root"):
        with h.tracer.start_as_current_span("retrieval kb", attributes=broken):
            pass
        with h.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
            pass
    stats = h.flush()
    assert (stats.captured, dict(stats.dropped)) == (1, {"not_evaluable": 1})
    assert h.processor.errors == 0 and h.judge.calls == []


def test_root_that_never_ends_is_evicted_after_the_ttl_and_counted_per_turn(make_harness: Make) -> None:
    h = make_harness(processor_kwargs={"run_ttl_s": 30})
    root = h.tracer.start_span("request that never ends")
    with trace.use_span(root):
        for n in (1, 2):
            with h.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs(f"q{n}", "c")):
                pass
            with h.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
                pass
    assert h.processor.pending_traces == 1 and h.evaluator.stats().captured == 0
    h.clock.advance(29)
    with h.tracer.start_as_current_span("unrelated"):  # any span: eviction is lazy, on on_end
        pass
    assert h.processor.pending_traces == 1
    h.clock.advance(2)
    with h.tracer.start_as_current_span("unrelated"):
        pass
    stats = h.flush()
    assert h.processor.pending_traces == 0 and h.processor.buffered_bytes == 0
    assert (stats.captured, dict(stats.dropped)) == (2, {"ttl_expired": 2})
    assert h.judge.calls == []
    root.end()  # ending it late changes nothing
    assert h.flush().captured == 2


def test_capacity_bounds_evict_the_oldest_trace(make_harness: Make) -> None:
    h = make_harness(processor_kwargs={"max_pending_runs": 1})
    roots = [h.tracer.start_span(f"root {n}") for n in (1, 2)]
    for root in roots:
        with trace.use_span(root):
            with h.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs("q", "c")):
                pass
            with h.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
                pass
    assert h.processor.pending_traces == 1
    assert dict(h.evaluator.stats().dropped) == {"pending_full": 1}  # the bound, not the age
    roots[1].end()
    roots[0].end()
    stats = h.flush()
    assert stats.captured == 2 and len(h.judge.calls) == 1
    assert dict(stats.dropped) == {"pending_full": 1}

    small = make_harness(processor_kwargs={"max_buffered_bytes": 2000})
    roots = [small.tracer.start_span(f"root {n}") for n in (1, 2)]
    for root, text in zip(roots, ("a" * 300, "b" * 800), strict=True):
        with trace.use_span(root):
            with small.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs("q", text)):
                pass
            with small.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
                pass
    assert small.processor.pending_traces == 1 and small.processor.buffered_bytes <= 2000
    for root in roots:
        root.end()
    stats = small.flush()
    assert stats.captured == 2 and dict(stats.dropped) == {"pending_full": 1}
    assert len(small.judge.calls) == 1 and small.judge.calls[0][2] == ["b" * 800]

    tiny = make_harness(processor_kwargs={"max_buffered_bytes": 100})
    with tiny.tracer.start_as_current_span("root"):
        with tiny.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs("q", "c" * 500)):
            pass
        assert tiny.processor.pending_traces == 0 and tiny.processor.buffered_bytes == 0
        with tiny.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
            pass
    # the retrieval alone overflows the byte bound and is evicted before its generation ends: the
    # generation is counted with the eviction's reason instead of vanishing unpaired (before: captured=0)
    stats = tiny.flush()
    assert stats.captured == 1 and dict(stats.dropped) == {"pending_full": 1}


@pytest.mark.parametrize(("elapsed", "reason"), [(29.0, "pending_full"), (31.0, "ttl_expired")])
def test_a_trace_evicted_for_room_is_ttl_expired_once_past_the_ttl(
    make_harness: Make, elapsed: float, reason: str
) -> None:
    """The byte bound evicts the oldest trace while a span of another buffered trace ends (no lazy TTL
    sweep runs before that): the reason is the evicted trace's age, not the path that evicted it."""
    h = make_harness(processor_kwargs={"run_ttl_s": 30, "max_buffered_bytes": 2000})
    old = h.tracer.start_span("request that never ends")
    with trace.use_span(old):
        with h.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs("q", "a" * 300)):
            pass
        with h.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
            pass
    h.clock.advance(20)
    young = h.tracer.start_span("request")
    with trace.use_span(young):
        with h.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs("q", "b")):
            pass
        assert h.processor.pending_traces == 2 and not h.evaluator.stats().dropped
        h.clock.advance(elapsed - 20)  # the old trace is now `elapsed` seconds old
        with h.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs("q", "c" * 800)):
            pass  # the young trace's record goes over the byte bound: the old trace is evicted
    assert h.processor.pending_traces == 1
    assert dict(h.evaluator.stats().dropped) == {reason: 1}
    old.end()  # ending it late changes nothing
    young.end()  # two retrievals, no generation: not a turn
    stats = h.flush()
    assert (stats.captured, dict(stats.dropped)) == (1, {reason: 1})
    assert h.judge.calls == [] and h.processor.pending_traces == 0


def test_sampling_is_decided_from_the_trace_id_before_buffering(make_harness: Make) -> None:
    h = make_harness(sample_rate=0.5)
    h.ids.trace_ids = [7 << 64 | LOW_OUT, 8 << 64 | LOW_IN]
    buffered_after_retrieval = []
    for _ in range(2):
        with h.tracer.start_as_current_span("root"):
            with h.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs("q", "c")):
                pass
            buffered_after_retrieval.append(h.processor.pending_traces)
            with h.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
                pass
    assert buffered_after_retrieval == [0, 1]
    stats = h.flush()
    # the sampled-out trace was never buffered nor counted; the sampled one counted once
    assert (stats.captured, stats.sampled_out, len(h.judge.calls)) == (1, 0, 1)
    assert h.interactions[0].trace_id == 8 << 64 | LOW_IN


def test_non_rag_spans_are_not_buffered(make_harness: Make) -> None:
    h = make_harness()
    for n in range(50):
        with (
            h.tracer.start_as_current_span("GET /", attributes={"http.request.method": "GET", "n": n}),
            h.tracer.start_as_current_span("SELECT", attributes={"db.system": "postgresql"}),
        ):
            pass
        with (
            h.tracer.start_as_current_span("chain", attributes={"openinference.span.kind": "CHAIN"}),
            h.tracer.start_as_current_span("embed", attributes={"openinference.span.kind": "EMBEDDING"}),
        ):
            pass
        assert h.processor.pending_traces == 0 and h.processor.buffered_bytes == 0
    assert h.flush().captured == 0


def test_shutdown_counts_buffered_turns(make_harness: Make) -> None:
    h = make_harness()
    root = h.tracer.start_span("open root")
    with trace.use_span(root):
        with h.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs("q", "c")):
            pass
        with h.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
            pass
    h.processor.shutdown(5000)
    stats = h.evaluator.stats()
    assert (stats.captured, dict(stats.dropped)) == (1, {"shutdown": 1})
    root.end()  # after shutdown: ignored
    assert h.evaluator.stats().captured == 1


# --- never re-evaluated, never raising ------------------------------------------------------------------


def test_own_spans_and_suppressed_spans_are_skipped(make_harness: Make) -> None:
    h = make_harness()
    # Spans shaped like a RAG turn but named/marked as ctxutil's own output.
    for name, extra in (
        ("contextual_utilization", {}),
        ("rag.interaction", {}),
        ("chat judge", {"gen_ai.evaluation.name": "contextual_utilization"}),
    ):
        with h.tracer.start_as_current_span("root"):
            with h.tracer.start_as_current_span(name, attributes={**retrieval_attrs("q", "c"), **extra}):
                pass
            with h.tracer.start_as_current_span(name, attributes={**chat_attrs("a"), **extra}):
                pass
    # A RAG turn whose spans end while instrumentation is suppressed (the evaluator's worker).
    token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        with h.tracer.start_as_current_span("root"):
            with h.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs("q", "c")):
                pass
            with h.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
                pass
    finally:
        detach(token)
    assert h.flush().captured == 0 and h.processor.pending_traces == 0


class _BrokenSpan:
    """Not a real span (a mock, on purpose): a span-like object whose attributes raise, to prove
    on_end never lets an exception into the caller."""

    name = "broken"
    context = SpanContext(trace_id=5, span_id=6, is_remote=False)
    parent = None

    @property
    def attributes(self) -> Any:
        raise RuntimeError("boom")


def test_on_end_never_raises_and_counts_errors(make_harness: Make) -> None:
    h = make_harness()
    h.processor.on_end(_BrokenSpan())  # type: ignore[arg-type]
    h.processor.on_end(_BrokenSpan())  # type: ignore[arg-type]
    assert h.processor.errors == 2
    with h.tracer.start_as_current_span("root"):  # still working afterwards
        with h.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs("q", "c")):
            pass
        with h.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
            pass
    assert h.flush().captured == 1


def test_receiver_style_readable_spans(make_harness: Make) -> None:
    """The OTLP receiver's path: ReadableSpan objects built directly (as from protobuf), fed to on_end."""
    h = make_harness()
    trace_id = 0x42 << 64 | LOW_IN

    def span(
        name: str, span_id: int, parent: int | None, attrs: dict[str, Any], start: int, end: int
    ) -> ReadableSpan:
        return ReadableSpan(
            name=name,
            context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1)),
            parent=SpanContext(trace_id, parent, is_remote=False) if parent else None,
            attributes=attrs,
            start_time=start,
            end_time=end,
        )

    for s in (
        span("retrieval kb", 2, 1, retrieval_attrs("q", "c1", "c2"), 10, 20),
        span("chat m", 3, 1, chat_attrs("a"), 30, 40),
        span("root", 1, None, {}, 5, 50),
    ):
        h.processor.on_end(s)
    h.flush()
    assert h.judge.calls == [("q", "a", ["c1", "c2"])]
    (interaction,) = h.interactions
    assert interaction.parent is not None and interaction.parent.span_id == 3
    assert (interaction.start_time_ns, interaction.end_time_ns) == (5, 50)


def test_settings_validation() -> None:
    evaluator = Evaluator(emitter=RecordingEmitter())
    try:
        with pytest.raises(TypeError, match="sample_rate"):
            UtilizationSpanProcessor(evaluator, sample_rate=0.5)
        with pytest.raises(ValueError, match="max_buffered_bytes"):
            UtilizationSpanProcessor(evaluator, max_buffered_bytes=-1)
        processor = UtilizationSpanProcessor(evaluator, run_ttl_s=5, max_pending_runs=3)
        assert (processor.settings.run_ttl_s, processor.settings.max_pending_runs) == (5, 3)
    finally:
        evaluator.shutdown(1000)


def test_concurrent_traces_from_many_threads_are_each_assembled_once(make_harness: Make) -> None:
    h = make_harness()
    barrier = threading.Barrier(8)

    def work(worker: int) -> None:
        barrier.wait()
        for n in range(10):
            key = f"{worker}-{n}"
            with h.tracer.start_as_current_span("root"):
                with h.tracer.start_as_current_span(
                    "retrieval kb", attributes=retrieval_attrs(f"q{key}", f"c{key}")
                ):
                    pass
                with h.tracer.start_as_current_span("GET /", attributes={"http.request.method": "GET"}):
                    pass
                with h.tracer.start_as_current_span("chat m", attributes=chat_attrs(f"a{key}")):
                    pass

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = h.flush()
    assert stats.captured == 80 and stats.pending == 0 and stats.dropped_total == 0
    assert sorted(h.judge.calls) == sorted(
        (f"q{w}-{n}", f"a{w}-{n}", [f"c{w}-{n}"]) for w in range(8) for n in range(10)
    )
    assert h.processor.pending_traces == 0 and h.processor.errors == 0
