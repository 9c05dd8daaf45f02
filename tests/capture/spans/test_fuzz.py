"""Fuzzing the span-reader path with hypothesis (issue 10, "a fuzz target for the span-reader path").

Arbitrary attribute dicts, biased towards the keys and shapes the readers look at (indexed document and
message keys with odd indices, JSON documents with odd members, huge integers, NaN, tuples, redacted
values), go through every reader, the routing, and traces of such spans through
:class:`UtilizationSpanProcessor` (real SDK ``ReadableSpan`` objects as an OTLP receiver builds them,
the real Evaluator). Properties: no reader raises; ``read_part`` returns a record, the chain marker or
``None``; ``on_end`` never counts an error; after each trace every captured turn has exactly one outcome
and nothing stays buffered.

Brief in the default suite (``FUZZ_EXAMPLES`` examples per property, default 60); run longer on demand:
``FUZZ_EXAMPLES=20000 .venv/bin/python -m pytest tests/capture/spans/test_fuzz.py``. Every crash found is
kept as an explicit ``@example`` (and in test_nothing_vanishes.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from ctxutil_otel import ContextualUtilization
from ctxutil_otel.capture.spans import UtilizationSpanProcessor
from ctxutil_otel.capture.spans._model import CHAIN, Generation, Retrieval
from ctxutil_otel.capture.spans._route import _READERS, read_part
from ctxutil_otel.worker import Evaluator

from ..conftest import RecordingEmitter, RecordingJudge

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "60"))
pytestmark = pytest.mark.timeout(0 if EXAMPLES > 60 else 120)  # a long run on demand has no time limit
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=EXAMPLES <= 60,  # the default suite is reproducible; long runs explore
)

MARKERS = {
    "openinference.span.kind": st.sampled_from(
        ["RETRIEVER", "RERANKER", "LLM", "CHAIN", "AGENT", "TOOL", "x"]
    ),
    "gen_ai.operation.name": st.sampled_from(
        ["retrieval", "chat", "text_completion", "invoke_workflow", "vector_db_retrieve", "execute_task", "ø"]
    ),
    "traceloop.span.kind": st.sampled_from(["task", "workflow", "agent", "tool", ""]),
    "llm.request.type": st.sampled_from(["chat", "completion", "rerank"]),
}
PREFIXES = [
    "retrieval.documents.",
    "reranker.output_documents.",
    "llm.output_messages.",
    "llm.input_messages.",
    "gen_ai.prompt.",
    "gen_ai.completion.",
]
SUFFIXES = [
    "document.content",
    "document.id",
    "document.score",
    "document.metadata",
    "message.content",
    "message.role",
    "message.contents.0.message_content.text",
    "message.contents.x.message_content.type",
    "content",
    "role",
]
INDICES = st.one_of(
    st.integers(0, 3).map(str),
    st.sampled_from(["²", "٣", "-1", "", "00", "1e3", "9" * 5000, "0" * 40 + "1"]),
    st.text(max_size=3),
)
SCALARS = st.one_of(
    st.text(max_size=30),
    st.just("__REDACTED__"),
    st.integers(),
    st.sampled_from([10**400, -(10**5000), 2**64]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
JSONISH = st.recursive(
    st.one_of(st.text(max_size=10), st.integers(), st.floats(allow_nan=False), st.booleans(), st.none()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "content",
                    "text",
                    "page_content",
                    "id",
                    "score",
                    "metadata",
                    "documents",
                    "outputs",
                    "kwargs",
                    "role",
                    "parts",
                    "type",
                    "query",
                    "args",
                    "generations",
                ]
            )
            | st.text(max_size=5),
            inner,
            max_size=5,
        ),
    ),
    max_leaves=20,
)
JSON_KEYS = [
    "gen_ai.retrieval.documents",
    "gen_ai.output.messages",
    "gen_ai.input.messages",
    "traceloop.entity.output",
    "traceloop.entity.input",
    "gen_ai.task.output",
    "output.value",
    "input.value",
]
VALUES = st.one_of(
    SCALARS,
    JSONISH.map(json.dumps),
    st.text(max_size=20).map(lambda t: '{"documents": ' + t),  # truncated JSON
    st.lists(st.text(max_size=8), max_size=3).map(tuple),
)


@st.composite
def attributes(draw: st.DrawFn) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(sorted(MARKERS)), max_size=3, unique=True)):
        attrs[key] = draw(MARKERS[key])
    for _ in range(draw(st.integers(0, 8))):
        key = draw(st.sampled_from(PREFIXES)) + draw(INDICES) + "." + draw(st.sampled_from(SUFFIXES))
        attrs[key] = draw(VALUES)
    for key in draw(st.lists(st.sampled_from(JSON_KEYS), max_size=3, unique=True)):
        attrs[key] = draw(VALUES)
    attrs.update(draw(st.dictionaries(st.text(max_size=12), VALUES, max_size=2)))
    for key, value in list(attrs.items()):
        if value is None:
            del attrs[key]  # OpenTelemetry attributes have no None values
    return attrs


@FUZZ
@given(attributes())
@example({"openinference.span.kind": "LLM", "llm.output_messages.².message.content": "x"})
@example({"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": 10**5000})
@example({"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.score": 10**400})
@example({"openinference.span.kind": "RETRIEVER", f"retrieval.documents.{'9' * 5000}.document.content": "x"})
@example({"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": json.dumps([{"id": 10**30}])})
def test_no_reader_raises(attrs: dict[str, Any]) -> None:
    for _, reader, _ in _READERS:
        part = reader(attrs)
        assert part is None or part is CHAIN or isinstance(part, (Retrieval, Generation))
    part = read_part(attrs)
    assert part is None or part is CHAIN or isinstance(part, (Retrieval, Generation))


@pytest.fixture(scope="module")
def processor() -> Iterator[UtilizationSpanProcessor]:
    evaluator = Evaluator(
        ContextualUtilization(judge=RecordingJudge()),
        emitter=RecordingEmitter(),
        max_evaluations_per_second=0,
    )
    processor = UtilizationSpanProcessor(evaluator)
    yield processor
    processor.shutdown(10_000)


_trace_ids = iter(range(1 << 64, 1 << 65))  # low 64 bits from 0: always sampled


@FUZZ
@given(st.lists(st.tuples(attributes(), st.integers(0, 3)), min_size=1, max_size=6))
def test_traces_of_fuzzed_spans_are_accounted(
    processor: UtilizationSpanProcessor, spans: list[tuple[dict[str, Any], int]]
) -> None:
    """Spans end children first under a root (span id 1); each fuzzed span's parent is the root or an
    earlier fuzzed span (``parent`` picks it), as an OTLP receiver would hand them over."""
    trace_id = next(_trace_ids)
    ids = [1]
    ended: list[ReadableSpan] = []
    for n, (attrs, parent) in enumerate(spans):
        span_id = n + 2
        ended.append(_span(trace_id, span_id, ids[min(parent, len(ids) - 1)], attrs, n))
        ids.append(span_id)
    ended.reverse()  # children (later spans) end first
    ended.append(_span(trace_id, 1, None, {}, -1))
    errors = processor.errors
    for span in ended:
        processor.on_end(span)
    assert processor.errors == errors
    assert processor.force_flush(30_000)
    stats = processor.stats()
    assert stats.captured == stats.finished, stats
    assert processor.pending_traces == 0 and processor.buffered_bytes == 0


def _span(trace_id: int, span_id: int, parent: int | None, attrs: dict[str, Any], n: int) -> ReadableSpan:
    return ReadableSpan(
        name=f"span {n}",
        context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1)),
        parent=SpanContext(trace_id, parent, is_remote=False) if parent is not None else None,
        attributes=attrs,
        start_time=100 + n,
        end_time=1000 - n,
    )
