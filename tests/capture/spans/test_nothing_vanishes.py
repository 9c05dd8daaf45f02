"""Nothing RAG-shaped vanishes, whatever the attributes say (issue 15 item 3, issue 10 item 8).

Real parts: the SDK tracer making the spans, :class:`UtilizationSpanProcessor` on its provider, the real
Evaluator. Each test here lost the turn before (``captured=0``): an odd attribute key made a reader raise
(the exception was swallowed by ``on_end`` and the turn never reached ``stats()``), or a span no reader
knew left its turn unpaired, uncounted and unlogged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from .conftest import Harness
from .test_processor import chat_attrs, retrieval_attrs

Make = Callable[..., Harness]
Q, A, C = "what is green tea", "green tea is a tea", "green tea is made from unoxidised leaves"


def oi_retriever(**extra: Any) -> dict[str, Any]:
    return {
        "openinference.span.kind": "RETRIEVER",
        "input.value": Q,
        "retrieval.documents.0.document.content": C,
        **extra,
    }


def oi_llm(**extra: Any) -> dict[str, Any]:
    return {
        "openinference.span.kind": "LLM",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": A,
        **extra,
    }


def turn(
    h: Harness, retrieval: Mapping[str, Any], generation: Mapping[str, Any], *, first: str = "r"
) -> None:
    with h.tracer.start_as_current_span("request"):
        spans = [("retrieve", retrieval), ("generate", generation)]
        for name, attributes in spans if first == "r" else spans[::-1]:
            with h.tracer.start_as_current_span(name, attributes=dict(attributes)):
                pass


def accounted(h: Harness) -> Any:
    stats = h.flush()
    assert stats.captured == stats.finished, stats
    assert h.processor.pending_traces == 0
    return stats


# --- odd attribute keys and values (issue 10 item 8) ---------------------------------------------------


@pytest.mark.parametrize(
    ("retrieval", "generation"),
    [
        # a Unicode digit that str.isdigit() accepts and int() refuses
        (oi_retriever(), oi_llm(**{"llm.output_messages.².message.content": "x"})),
        (oi_retriever(**{"retrieval.documents.٣.document.content": "x"}), oi_llm()),  # Arabic-Indic 3
        # an integer document id or score beyond str()/float() limits
        (oi_retriever(**{"retrieval.documents.0.document.id": 10**5000}), oi_llm()),
        (oi_retriever(**{"retrieval.documents.0.document.score": 10**400}), oi_llm()),
    ],
    ids=["superscript-index", "arabic-indic-index", "huge-int-id", "huge-int-score"],
)
def test_odd_keys_and_values_do_not_lose_the_turn(
    make_harness: Make, retrieval: dict[str, Any], generation: dict[str, Any]
) -> None:
    h = make_harness()
    turn(h, retrieval, generation)
    stats = accounted(h)
    assert stats.captured == 1 and stats.evaluated + stats.not_applicable == 1
    assert h.judge.calls == [(Q, A, [C])] and h.processor.errors == 0


def test_an_index_thousands_of_digits_long_reads_as_truncated(make_harness: Make) -> None:
    h = make_harness()
    turn(h, oi_retriever(**{f"retrieval.documents.{'9' * 5000}.document.content": "x"}), oi_llm())
    stats = accounted(h)
    assert stats.captured == 1 and dict(stats.dropped) == {"not_evaluable": 1}
    assert h.processor.not_evaluable_causes == {("truncated", "openinference"): 1}


def test_a_reader_failure_counts_the_turn_capture_error(
    make_harness: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault injection (a reader bug stands in for input no test foresaw): the OpenInference reader
    raises on every span. The turn is counted ``capture_error``; the processor keeps working."""

    from ctxutil_otel.capture.spans import _route

    def broken(attributes: Mapping[str, object]) -> Any:
        raise KeyError("a reader bug")

    readers = tuple((m, broken if c == "openinference" else r, c) for m, r, c in _route._READERS)
    monkeypatch.setattr(_route, "_READERS", readers)
    h = make_harness()
    turn(h, oi_retriever(), oi_llm())
    turn(h, retrieval_attrs(Q, C), chat_attrs(A))  # GenAI spans are still read
    stats = accounted(h)
    assert stats.captured == 2 and dict(stats.dropped) == {"capture_error": 1}
    assert h.judge.calls == [(Q, A, [C])]


# --- spans no reader assembles (issue 15 item 3) -------------------------------------------------------


def test_an_unknown_retrieval_operation_is_counted_not_evaluable_and_warned_once(
    make_harness: Make, caplog: pytest.LogCaptureFixture
) -> None:
    h = make_harness()
    unknown = {"gen_ai.operation.name": "vector_search", "db.query.text": Q}
    with caplog.at_level(logging.WARNING, logger="ctxutil_otel.capture"):
        turn(h, unknown, chat_attrs(A))
        turn(h, unknown, chat_attrs(A))
    stats = accounted(h)
    assert stats.captured == 2 and dict(stats.dropped) == {"not_evaluable": 2}
    assert h.processor.not_evaluable_causes == {("unrecognised", "genai"): 2}
    warnings = [r for r in caplog.records if "not evaluable" in r.getMessage()]
    assert len(warnings) == 1 and "unrecognised" in warnings[0].getMessage()


def test_an_unknown_model_operation_is_counted_not_evaluable(make_harness: Make) -> None:
    h = make_harness()
    turn(h, retrieval_attrs(Q, C), {"gen_ai.operation.name": "generate_text", "gen_ai.request.model": "m"})
    stats = accounted(h)
    assert stats.captured == 1 and dict(stats.dropped) == {"not_evaluable": 1}
    assert h.processor.not_evaluable_causes == {("unrecognised", "genai"): 1}


def test_retrieval_and_generation_that_pair_into_no_turn_are_counted_once(make_harness: Make) -> None:
    h = make_harness()
    turn(h, retrieval_attrs(Q, C), chat_attrs(A), first="g")  # the model answered before retrieving
    stats = accounted(h)
    assert stats.captured == 1 and dict(stats.dropped) == {"not_evaluable": 1}
    assert h.processor.not_evaluable_causes == {("unpaired", "genai"): 1}


def test_spans_that_are_not_rag_are_still_not_counted(make_harness: Make) -> None:
    h = make_harness()
    turn(h, {"gen_ai.operation.name": "embeddings"}, chat_attrs(A))
    turn(h, {"gen_ai.operation.name": "execute_tool"}, {"gen_ai.operation.name": "invoke_agent"})
    with h.tracer.start_as_current_span("search only", attributes=retrieval_attrs(Q, C)):
        pass
    assert accounted(h).captured == 0 and h.processor.not_evaluable_causes == {}


def test_the_traceloop_retriever_marker_is_offered_to_the_openllmetry_reader(make_harness: Make) -> None:
    """The shape of opentelemetry-instrumentation-langchain 0.62 (recorded from it, see
    test_instrumentations.py): ``gen_ai.operation.name=vector_db_retrieve`` and ``traceloop.span.kind``."""
    h = make_harness()
    retriever = {
        "gen_ai.operation.name": "vector_db_retrieve",
        "traceloop.span.kind": "task",
        "traceloop.entity.name": "RecordedRetriever",
        "traceloop.entity.input": json.dumps({"query": Q}),
        "traceloop.entity.output": json.dumps({"documents": [{"page_content": C, "metadata": {}}]}),
    }
    turn(h, retriever, chat_attrs(A))
    stats = accounted(h)
    assert stats.captured == 1 and h.judge.calls == [(Q, A, [C])]
