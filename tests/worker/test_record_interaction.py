"""``Evaluator.record_interaction`` (issue 23 item 2): a plain Python RAG application (the OpenAI SDK and
its own search, no LangChain, no OpenInference) is evaluated in its own trace, under the same selection,
sampling and accounting as the capture paths, without ever raising or blocking. Before, there was no
documented way to evaluate such an application at all.

Real parts: the ``openai`` client over real HTTP against the local OpenAI-compatible test server (the
application's model), the real Evaluator with the lexical judge, the real Emitter on SDK providers with
in-memory exporters, and the example ``examples/plain_openai_rag.py`` run as a script.
"""

from __future__ import annotations

import collections
import gc
import itertools
import json
import logging
import re
import subprocess
import sys
import threading
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy
import pytest
from langchain_core.documents import Document
from openai import OpenAI
from opentelemetry.trace import SpanContext
from pydantic import ValidationError

from ctxutil_otel import DatasetItem, Evaluator
from ctxutil_otel._item import MAX_CHUNKS
from ctxutil_otel.emit import names as n
from tests.support.env import environ_without_settings
from tests.support.openai_server import OpenAICompatServer, Reply, completion
from tests.support.telemetry import Telemetry
from tests.support.telemetry import telemetry as telemetry  # the fixture

QUESTION = "What are the benefits of green tea?"
CHUNKS = [
    "Green tea contains antioxidants called catechins.",
    "The antioxidants in green tea reduce inflammation.",
    "Tea originated in China thousands of years ago.",
]
ANSWER = "Green tea contains antioxidants called catechins, and these antioxidants reduce inflammation."


@pytest.fixture
def model_server() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer(lambda request: Reply(body=completion(ANSWER, model="app-model"))) as server:
        yield server


def _evaluator(telemetry: Telemetry, **settings: Any) -> Evaluator:
    return telemetry.evaluator(**settings)


def test_an_openai_sdk_application_is_evaluated_in_its_own_trace(
    telemetry: Telemetry, model_server: OpenAICompatServer
) -> None:
    evaluator = _evaluator(telemetry, chunk_metadata_keys=("source",))
    client = OpenAI(base_url=model_server.base_url, api_key="sk-app")
    tracer = telemetry.tracer_provider.get_tracer("plain-app")
    chunks: list[object] = [
        CHUNKS[0],
        Document(page_content=CHUNKS[1], id="doc-2", metadata={"source": "review.html"}),
        {"text": CHUNKS[2], "id": "doc-3", "metadata": {"source": "history.txt"}},
    ]
    with tracer.start_as_current_span("rag.request") as request_span:
        reply = client.chat.completions.create(
            model="app-model", messages=[{"role": "user", "content": f"{CHUNKS}\n{QUESTION}"}]
        )
        answer = reply.choices[0].message.content or ""
        assert evaluator.record_interaction(
            query=QUESTION,
            retrieved_content=chunks,
            actual_output=answer,
            model="app-model",
            provider="openai",
            retriever_name="my_search",
        )
    assert evaluator.force_flush(30_000)
    stats = evaluator.stats()
    assert (stats.captured, stats.evaluated) == (1, 1)
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    app = request_span.get_span_context()
    assert span.context is not None and span.context.trace_id == app.trace_id
    assert span.parent is not None and span.parent.span_id == app.span_id
    attrs = dict(span.attributes or {})
    assert attrs[n.ATTR_TOTAL_CHUNKS] == 3
    assert attrs[n.ATTR_REQUEST_MODEL] == "app-model" and attrs[n.ATTR_PROVIDER_NAME] == "openai"
    assert attrs[n.ATTR_RETRIEVER_NAME] == "my_search"
    assert attrs[n.chunk_attribute(1, n.CHUNK_ID)] == "doc-2"
    assert attrs[n.chunk_attribute(2, n.CHUNK_ID)] == "doc-3"
    assert attrs[f"{n.chunk_attribute(2, n.CHUNK_METADATA)}.source"] == "history.txt"
    assert attrs[n.ATTR_INTERACTION_SOURCE] == "record_interaction"
    evaluator.shutdown(5_000)


def test_a_passed_span_context_and_no_span_at_all(telemetry: Telemetry) -> None:
    evaluator = _evaluator(telemetry)
    other = telemetry.evaluated_span("earlier.request")
    evaluator.record_interaction(
        query=QUESTION, retrieved_content=CHUNKS, actual_output=ANSWER, span_context=other
    )
    evaluator.record_interaction(query=QUESTION, retrieved_content=CHUNKS, actual_output=ANSWER)
    assert evaluator.force_flush(30_000)
    evaluations = telemetry.spans(n.SPAN_EVALUATION)
    assert len(evaluations) == 2
    under_other = [s for s in evaluations if s.parent is not None and s.parent.span_id == other.span_id]
    assert len(under_other) == 1
    (root,) = telemetry.spans(n.SPAN_INTERACTION)  # no span was current: a short root span of its own
    assert any(s.parent is not None and s.parent.span_id == root.context.span_id for s in evaluations)  # type: ignore[union-attr]
    evaluator.shutdown(5_000)


def test_sampling_and_selection_rules_apply_and_are_counted(telemetry: Telemetry) -> None:
    evaluator = _evaluator(
        telemetry,
        sample_rate=0.0,
        selection_rules=[
            {"root_name": "checkout", "sample_rate": 1.0},
            {"metadata": {"tier": "free"}, "sample_rate": 0.0},
        ],
    )
    assert not evaluator.record_interaction(query=QUESTION, retrieved_content=CHUNKS, actual_output=ANSWER)
    assert evaluator.record_interaction(
        query=QUESTION, retrieved_content=CHUNKS, actual_output=ANSWER, name="checkout"
    )
    assert not evaluator.record_interaction(
        query=QUESTION, retrieved_content=CHUNKS, actual_output=ANSWER, metadata={"tier": "free"}
    )
    assert evaluator.force_flush(30_000)
    stats = evaluator.stats()
    assert (stats.captured, stats.sampled_out, stats.not_selected, stats.evaluated) == (3, 1, 1, 1)
    evaluator.shutdown(5_000)


class _UnlistableMetadata(Mapping[str, object]):
    """Metadata that answers a look-up by key but whose iteration never ends (and whose size raises):
    what a lazily-loaded or very large mapping is to a reader that copies it whole."""

    def __init__(self, values: Mapping[str, object]) -> None:
        self._values = dict(values)
        self.looked_up: list[str] = []

    def __getitem__(self, key: str) -> object:
        self.looked_up.append(key)
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return (f"k{i}" for i in itertools.count())  # endless

    def __len__(self) -> int:
        raise RuntimeError("the size is not known")


def test_metadata_is_read_by_the_keys_named_never_iterated(telemetry: Telemetry) -> None:
    # metadata was copied whole (dict(metadata)) on every call, before sampling: 1,000,000 keys cost
    # ~112 ms on a call sampled out, and a mapping whose iteration never ends never returned. Only the keys
    # the selection rules and metric_dimensions name are read, each once, with get.
    evaluator = _evaluator(
        telemetry,
        sample_rate=0.0,
        selection_rules=[{"metadata": {"tier": "paid"}, "sample_rate": 1.0}],
        metric_dimensions=("shard",),
    )
    args: dict[str, Any] = {"query": QUESTION, "retrieved_content": CHUNKS, "actual_output": ANSWER}
    paid = _UnlistableMetadata({"tier": "paid", "shard": 3, "other": "x"})
    free = _UnlistableMetadata({"tier": "free", "shard": 4})
    assert evaluator.record_interaction(**args, metadata=paid)  # selected by the rule: returned
    assert not evaluator.record_interaction(**args, metadata=free)  # sampled out: returned
    assert evaluator.force_flush(30_000)
    stats = evaluator.stats()
    assert (stats.captured, stats.evaluated, stats.sampled_out, stats.dropped) == (2, 1, 1, {}), stats
    assert paid.looked_up == free.looked_up == ["tier", "shard"]  # each key once, the dimension from it
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    assert (span.attributes or {})["ctxutil.metadata.shard"] == "3"
    evaluator.shutdown(5_000)


def test_metadata_is_not_touched_when_no_key_is_read(telemetry: Telemetry) -> None:
    evaluator = _evaluator(telemetry)  # no selection rule on metadata, no metric_dimensions
    metadata = _UnlistableMetadata({"tier": "paid"})
    assert evaluator.record_interaction(
        query=QUESTION, retrieved_content=CHUNKS, actual_output=ANSWER, metadata=metadata
    )
    assert evaluator.force_flush(30_000)
    assert evaluator.stats().evaluated == 1 and metadata.looked_up == []
    evaluator.shutdown(5_000)


def test_wrong_arguments_never_raise_and_are_counted(telemetry: Telemetry) -> None:
    evaluator = _evaluator(telemetry)
    evaluator.record_interaction(query=None, retrieved_content=CHUNKS, actual_output=ANSWER)  # type: ignore[arg-type]
    evaluator.record_interaction(query=QUESTION, retrieved_content=[42], actual_output=ANSWER)
    evaluator.record_interaction(query=QUESTION, retrieved_content=5, actual_output=ANSWER)  # type: ignore[arg-type]
    assert evaluator.force_flush(30_000)
    stats = evaluator.stats()
    assert stats.captured == 3 and stats.evaluated == 0
    assert stats.dropped == {"not_evaluable": 1}  # no query
    assert stats.failed == {"invalid_input": 2}  # a chunk that is not text: named by the worker
    evaluator.shutdown(5_000)


def _batch_message(retrieved_content: object) -> str:
    """What the batch path (``DatasetItem``) says of ``retrieved_content``, in the worker's wording."""
    with pytest.raises(ValidationError) as caught:
        DatasetItem(query=QUESTION, actual_output=ANSWER, retrieved_content=retrieved_content)  # type: ignore[arg-type]
    (error,) = caught.value.errors(include_url=False)
    return f"retrieved_content: {error['msg']}"


@pytest.mark.parametrize("worker", ["thread", "process"])
def test_retrieved_content_that_is_not_a_list_of_chunks_is_named_as_the_batch_path_names_it(
    telemetry: Telemetry, worker: str
) -> None:
    # retrieved_content=None was wrapped as one chunk: "retrieved_content[0]: expected str ... got
    # NoneType", as if the list held a None; a generator was wrapped too ("[0] ... got generator") while
    # DatasetItem takes one; one string or one mapping was evaluated as a single chunk while DatasetItem
    # refused it. Now both paths share one check (``chunk_list``) and one message.
    evaluator = _evaluator(telemetry, worker=worker)
    wrong: list[object] = [None, CHUNKS[0], {"text": CHUNKS[0]}, 5]
    for value in wrong:
        evaluator.record_interaction(query=QUESTION, retrieved_content=value, actual_output=ANSWER)  # type: ignore[arg-type]
    evaluator.record_interaction(
        query=QUESTION, retrieved_content=(c for c in CHUNKS), actual_output=ANSWER
    )  # an iterable of chunks, as DatasetItem takes it
    assert evaluator.force_flush(30_000)
    stats = evaluator.stats()
    assert (stats.captured, stats.evaluated, stats.failed) == (5, 1, {"invalid_input": 4}), stats
    failed = [
        dict(s.attributes or {})
        for s in telemetry.spans(n.SPAN_EVALUATION)
        if (s.attributes or {}).get(n.ATTR_EVALUATION_SCORE_LABEL) == "error"
    ]
    assert [a[n.ATTR_TOTAL_CHUNKS] for a in failed] == [0] * 4  # not the length of a string or a mapping
    explanations = sorted(str(a[n.ATTR_EVALUATION_EXPLANATION]) for a in failed)
    assert explanations == sorted(_batch_message(value) for value in wrong)
    assert "retrieved_content: Value error, must be a list of chunks" in explanations[0]
    assert {e.rsplit("got ", 1)[1] for e in explanations} == {"NoneType", "str", "dict", "int"}
    evaluator.shutdown(5_000)


def _twice_with(
    evaluator: Evaluator, caplog: pytest.LogCaptureFixture, argument: str, value: object
) -> list[bool]:
    """Two ``record_interaction`` calls with ``argument=value`` (WARNINGs captured): what each returned."""
    args: dict[str, Any] = {"query": QUESTION, "retrieved_content": CHUNKS, "actual_output": ANSWER}
    with caplog.at_level(logging.WARNING, logger="ctxutil_otel"):
        return [evaluator.record_interaction(**args, **{argument: value}) for _ in range(2)]


@pytest.mark.parametrize(
    ("argument", "value", "expected"),
    [
        ("metadata", "x", "`metadata` must be a mapping or None, got str"),
        ("span_context", "abc", "`span_context` must be an opentelemetry.trace.SpanContext"),
        ("interaction_id", [1], "`interaction_id` must be a string, an integer, a UUID or None, got list"),
        ("interaction_id", True, "`interaction_id` must be a string, an integer, a UUID or None, got bool"),
        ("interaction_id", 1.5, "`interaction_id` must be a string, an integer, a UUID or None, got float"),
    ],
)
def test_a_call_argument_of_the_wrong_type_is_counted_and_logged_naming_it(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, argument: str, value: object, expected: str
) -> None:
    # metadata="x" was counted capture_error with a raw traceback ("dictionary update sequence element
    # #0 has length 1"), span_context="abc" with "'str' object has no attribute 'is_valid'", and
    # interaction_id=[1] was taken silently, without its id. Now each is counted dropped capture_error
    # at the call, with a WARNING naming the argument and never its value, logged once per argument.
    evaluator = _evaluator(telemetry)
    assert _twice_with(evaluator, caplog, argument, value) == [False, False]
    assert evaluator.record_interaction(query=QUESTION, retrieved_content=CHUNKS, actual_output=ANSWER)
    assert evaluator.force_flush(30_000)
    stats = evaluator.stats()
    assert (stats.captured, stats.dropped, stats.evaluated) == (3, {"capture_error": 2}, 1), stats
    records = [r for r in caplog.records if "record_interaction" in r.getMessage()]
    assert len(records) == 1, [r.getMessage() for r in records]  # once per argument
    (record,) = records
    assert expected in record.getMessage() and "capture_error" in record.getMessage()
    assert record.exc_info is None  # a message, not a traceback
    evaluator.shutdown(5_000)


def test_a_span_context_and_an_integer_id_of_the_right_types_are_taken(telemetry: Telemetry) -> None:
    evaluator = _evaluator(telemetry)
    parent = telemetry.evaluated_span("earlier.request")
    assert isinstance(parent, SpanContext)
    assert evaluator.record_interaction(
        query=QUESTION,
        retrieved_content=CHUNKS,
        actual_output=ANSWER,
        span_context=parent,
        interaction_id=7,
        metadata={"tier": "paid"},
    )
    assert evaluator.force_flush(30_000)
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    assert span.parent is not None and span.parent.span_id == parent.span_id
    assert (span.attributes or {}).get(n.ATTR_INTERACTION_ID) == "7"
    evaluator.shutdown(5_000)


@pytest.mark.parametrize("worker", ["thread", "process"])
def test_an_integer_id_and_a_non_string_name_are_taken_not_failed_or_sampled_out(
    telemetry: Telemetry, worker: str
) -> None:
    # An application's own ids are often integers (a database row). interaction_id=5 failed that evaluation
    # internal_error with an ERROR traceback (thread worker) or, in the process worker's child, raised in
    # the middle of a batch: the evaluations after it in the batch never ran, force_flush timed out, and
    # shutdown counted them dropped. name=5 broke the selection rules' match: counted sampled_out at
    # sample_rate 1.0. An integer id is its decimal text; a name that is not a string is no name.
    evaluator = _evaluator(
        telemetry, worker=worker, selection_rules=[{"root_name": "checkout", "sample_rate": 1.0}]
    )
    args: dict[str, Any] = {"query": QUESTION, "retrieved_content": CHUNKS, "actual_output": ANSWER}
    assert evaluator.record_interaction(**args, interaction_id=12345)  # type: ignore[arg-type]
    assert evaluator.record_interaction(**args, name=5)  # type: ignore[arg-type]
    assert evaluator.record_interaction(**args, interaction_id="order-7")
    assert evaluator.force_flush(30_000)
    stats = evaluator.stats()
    assert (stats.captured, stats.evaluated, stats.sampled_out, stats.failed) == (3, 3, 0, {}), stats
    ids = {s.attributes.get(n.ATTR_INTERACTION_ID) for s in telemetry.spans(n.SPAN_EVALUATION)}  # type: ignore[union-attr]
    assert {"12345", "order-7"} <= ids
    evaluator.shutdown(5_000)


@pytest.mark.parametrize("worker", ["thread", "process"])
def test_uuid_and_numpy_integer_ids_are_taken_and_a_long_id_is_cut(telemetry: Telemetry, worker: str) -> None:
    # interaction_id=uuid.uuid4() and numpy.int64(5) (a DataFrame's id column) were refused: dropped
    # capture_error, one WARNING per process and then silently. A 1,000,000-character id was emitted uncut
    # on the span and the event. A UUID is its text, anything with __index__ its decimal text, and an id
    # is cut to 256 characters (the last one "…").
    evaluator = _evaluator(telemetry, worker=worker)
    args: dict[str, Any] = {"query": QUESTION, "retrieved_content": CHUNKS, "actual_output": ANSWER}
    given = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert evaluator.record_interaction(**args, interaction_id=given)
    assert evaluator.record_interaction(**args, interaction_id=numpy.int64(5))
    assert evaluator.record_interaction(**args, interaction_id="i" * 1_000_000)
    assert evaluator.force_flush(30_000)
    stats = evaluator.stats()
    assert (stats.captured, stats.evaluated, stats.dropped) == (3, 3, {}), stats
    cut = "i" * 255 + "…"
    span_ids = {(s.attributes or {}).get(n.ATTR_INTERACTION_ID) for s in telemetry.spans(n.SPAN_EVALUATION)}
    assert span_ids == {str(given), "5", cut}
    event_ids = {(r.log_record.attributes or {}).get(n.ATTR_INTERACTION_ID) for r in telemetry.logs()}
    assert event_ids == {str(given), "5", cut}
    evaluator.shutdown(5_000)


@pytest.mark.parametrize(
    ("argument", "value", "dimension"),
    [
        ("model", 123, n.ATTR_REQUEST_MODEL),
        ("provider", ["openai"], n.ATTR_PROVIDER_NAME),
        ("retriever_name", {"a": 1}, n.ATTR_RETRIEVER_NAME),
        ("name", b"checkout", n.ATTR_CHAIN_NAME),
    ],
)
def test_a_dimension_of_the_wrong_type_is_left_out_with_a_warning_naming_it(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, argument: str, value: object, dimension: str
) -> None:
    # model=123, provider=["openai"], retriever_name={...} and name=b"..." were ignored silently: the
    # results came without the dimension and nothing said why. Now a WARNING names the argument (once per
    # argument), and the interaction is still evaluated, without that dimension.
    evaluator = _evaluator(telemetry)
    assert _twice_with(evaluator, caplog, argument, value) == [True, True]
    assert evaluator.force_flush(30_000)
    stats = evaluator.stats()
    assert (stats.captured, stats.evaluated, stats.dropped) == (2, 2, {}), stats
    assert all(dimension not in (s.attributes or {}) for s in telemetry.spans(n.SPAN_EVALUATION))
    records = [r for r in caplog.records if "record_interaction" in r.getMessage()]
    assert [r.getMessage() for r in records] == [
        f"ctxutil evaluator: record_interaction: `{argument}` must be a string or None, got "
        f"{type(value).__name__}; the interaction is evaluated without it (logged once per argument)"
    ]
    evaluator.shutdown(5_000)


class _PreemptibleKey(str):
    """An argument name whose hashing is Python code: the interpreter may switch threads inside it, as a
    free-threaded build may anywhere (with a plain ``str`` the GIL build happens never to switch between a
    set's membership test and its ``add``)."""

    def __hash__(self) -> int:
        return str.__hash__(self)


def test_concurrent_first_problems_with_one_argument_are_logged_once(telemetry: Telemetry) -> None:
    # The log-once set of record_interaction's problems was tested and then added to, without a lock: two
    # application threads meeting the same problem at once could both find it new and both log it. Many
    # arguments, threads released together by a barrier, a short switch interval: each argument is taken as
    # new by exactly one thread.
    evaluator = _evaluator(telemetry)
    threads, rounds, per_round = 4, 20, 500
    taken: list[list[str]] = [[] for _ in range(threads)]
    for round_ in range(rounds):
        keys = [_PreemptibleKey(f"argument {round_}.{i}") for i in range(per_round)]
        barrier = threading.Barrier(threads)

        def first_times(out: list[str], keys: list[_PreemptibleKey] = keys, barrier: Any = barrier) -> None:
            barrier.wait()
            out.extend(key for key in keys if evaluator._first_time(key))

        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            workers = [threading.Thread(target=first_times, args=(out,)) for out in taken]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        finally:
            sys.setswitchinterval(interval)
    counts = collections.Counter(key for out in taken for key in out)
    assert len(counts) == rounds * per_round
    assert {key: n for key, n in counts.items() if n != 1} == {}
    evaluator.shutdown(5_000)


def test_a_nan_or_infinite_metadata_value_is_no_dimension(telemetry: Telemetry) -> None:
    # metadata={"tier": numpy.nan} (a DataFrame row's missing value) became the dimension "nan" on the
    # span and every metric point; a NaN or infinite number is no value: the dimension is absent.
    evaluator = _evaluator(telemetry, metric_dimensions=("tier", "ratio", "shard"))
    metadata = {"tier": numpy.nan, "ratio": float("inf"), "shard": float("nan")}
    args: dict[str, Any] = {"query": QUESTION, "retrieved_content": CHUNKS, "actual_output": ANSWER}
    assert evaluator.record_interaction(**args, metadata=metadata)
    assert evaluator.force_flush(30_000)
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    assert not [k for k in span.attributes or {} if k.startswith("ctxutil.metadata.")]
    evaluator.shutdown(5_000)


def test_numpy_metadata_values_are_dimensions(telemetry: Telemetry) -> None:
    # metadata={"shard": numpy.int64(7)} (a DataFrame row's value) silently gave no dimension: only int,
    # float and bool were taken. Any integer, real number and numpy.bool_ is one now, as Python's.
    evaluator = _evaluator(telemetry, metric_dimensions=("shard", "replica", "ratio", "cached"))
    metadata = {
        "shard": numpy.int64(7),
        "replica": numpy.int32(2),
        "ratio": numpy.float32(0.5),
        "cached": numpy.bool_(False),
    }
    args: dict[str, Any] = {"query": QUESTION, "retrieved_content": CHUNKS, "actual_output": ANSWER}
    assert evaluator.record_interaction(**args, metadata=metadata)
    assert evaluator.force_flush(30_000)
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    found = {k: v for k, v in (span.attributes or {}).items() if k.startswith("ctxutil.metadata.")}
    assert found == {
        "ctxutil.metadata.shard": "7",
        "ctxutil.metadata.replica": "2",
        "ctxutil.metadata.ratio": "0.5",
        "ctxutil.metadata.cached": "False",
    }
    evaluator.shutdown(5_000)


class _RaisingMapping(Mapping[str, object]):
    """A metadata mapping whose reads raise; the error's message holds text that must never be logged."""

    def __getitem__(self, key: str) -> object:
        raise RuntimeError("private metadata text")

    def __iter__(self) -> Iterator[str]:
        return iter(["tier"])

    def __len__(self) -> int:
        return 1


class _RequestId:
    """A lazily resolved request id (a web framework's) whose ``__index__`` raises with private text."""

    def __index__(self) -> int:
        raise ValueError("no request id for private user")


class _ClassRaises:
    """An object whose ``__class__`` raises (a lazy proxy's may): ``isinstance`` on it raises."""

    @property  # type: ignore[misc]  # a property over __class__ is the point
    def __class__(self) -> type:
        raise RuntimeError("private proxy text")


def _chunks_then(error: Exception) -> Callable[[], Iterator[str]]:
    """A generator of chunks (a vector store's lazy results) that yields one, then raises ``error``."""

    def chunks() -> Iterator[str]:
        yield CHUNKS[0]
        raise error

    return chunks


def _json_error() -> json.JSONDecodeError:
    try:
        json.loads('{"text": "private chunk text"')
    except json.JSONDecodeError as exc:
        return exc
    raise AssertionError("unreachable")


_READ_ERRORS: list[tuple[str, Callable[[], object], str]] = [
    ("retrieved_content", _chunks_then(RuntimeError("private chunk text")), "RuntimeError"),
    ("retrieved_content", _chunks_then(ValueError("private chunk text")), "ValueError"),
    ("retrieved_content", _chunks_then(_json_error()), "JSONDecodeError"),
    (
        "retrieved_content",
        _chunks_then(UnicodeDecodeError("utf-8", b"private chunk text", 0, 1, "private")),
        "UnicodeDecodeError",
    ),
    ("metadata", _RaisingMapping, "RuntimeError"),
    ("interaction_id", lambda: _RequestId(), "ValueError"),
    ("model", lambda: _ClassRaises(), "RuntimeError"),
    ("span_context", lambda: _ClassRaises(), "RuntimeError"),
]


@pytest.mark.parametrize(("argument", "value", "error"), _READ_ERRORS)
def test_an_argument_whose_reading_raises_is_counted_and_logged_naming_it_and_the_error_class(
    telemetry: Telemetry,
    caplog: pytest.LogCaptureFixture,
    argument: str,
    value: Callable[[], object],
    error: str,
) -> None:
    # A generator of chunks that raised ValueError (or JSONDecodeError, UnicodeDecodeError) mid-read was
    # taken for "not a list of chunks": the half-read generator went to the worker and the interaction
    # was counted not_applicable ("No chunks were retrieved"), nothing logged. And any argument whose
    # reading raised was logged with its traceback and message (which may quote the user's chunk text).
    # Now each is dropped capture_error with one ERROR naming the argument and the error's class only.
    # An interaction_id whose __index__ raised (or any argument whose isinstance check raised) took the
    # unexpected-error path: logged with its message and traceback. Now it is read as the others are.
    evaluator = _evaluator(telemetry, metric_dimensions=("tier",))  # a metadata key read: "tier"
    args: dict[str, Any] = {"query": QUESTION, "retrieved_content": CHUNKS, "actual_output": ANSWER}
    with caplog.at_level(logging.DEBUG, logger="ctxutil_otel"):
        assert not evaluator.record_interaction(**{**args, argument: value()})
        assert evaluator.force_flush(30_000)
    stats = evaluator.stats()
    assert (stats.captured, stats.dropped, stats.evaluated, stats.not_applicable) == (
        1,
        {"capture_error": 1},
        0,
        0,
    ), stats
    (record,) = [r for r in caplog.records if "record_interaction" in r.getMessage()]
    assert record.levelno == logging.ERROR
    assert record.getMessage().startswith(
        f"ctxutil evaluator: record_interaction failed reading `{argument}`: it raised {error} "
    )
    assert record.exc_info is None and record.exc_text is None
    assert all("private" not in r.getMessage() for r in caplog.records)
    evaluator.shutdown(5_000)


class _InterruptingMapping(Mapping[str, object]):
    """Metadata whose look-up is interrupted (Ctrl-C while the call reads it)."""

    def __getitem__(self, key: str) -> object:
        raise KeyboardInterrupt

    def __iter__(self) -> Iterator[str]:
        return iter(["tier"])

    def __len__(self) -> int:
        return 1


@pytest.mark.parametrize("argument", ["retrieved_content", "metadata"])
def test_a_keyboard_interrupt_while_reading_propagates_and_the_call_is_counted(
    telemetry: Telemetry, argument: str
) -> None:
    # A KeyboardInterrupt raised by the chunk generator propagated (right) but left the call's ticket
    # open: later counted internal_error with a TicketWarning when collected. It is counted dropped
    # capture_error before it propagates, and nothing is left open.
    evaluator = _evaluator(telemetry, metric_dimensions=("tier",))
    values = {"retrieved_content": _chunks_then(KeyboardInterrupt()), "metadata": _InterruptingMapping}
    args: dict[str, Any] = {"query": QUESTION, "retrieved_content": CHUNKS, "actual_output": ANSWER}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a TicketWarning (a ticket collected open) fails the test
        with pytest.raises(KeyboardInterrupt):
            evaluator.record_interaction(**{**args, argument: values[argument]()})
        gc.collect()
        assert evaluator.force_flush(30_000)
    stats = evaluator.stats()
    assert (stats.captured, dict(stats.dropped), dict(stats.failed)) == (1, {"capture_error": 1}, {}), stats
    evaluator.shutdown(5_000)


@pytest.mark.parametrize("error", [RuntimeError("private chunk text"), ValueError("private chunk text")])
def test_a_generator_of_chunks_that_raises_is_a_validation_error_of_the_batch_path(
    error: Exception,
) -> None:
    # DatasetItem let a RuntimeError through, and took a ValueError as the generator's verdict on itself,
    # quoting its message. Both are what a chunk whose reading raises is: a validation error naming the
    # field and the error's class, never its message.
    with pytest.raises(ValidationError) as caught:
        DatasetItem(query=QUESTION, actual_output=ANSWER, retrieved_content=_chunks_then(error)())
    (detail,) = caught.value.errors(include_url=False)
    assert detail["loc"] == ("retrieved_content",)
    assert detail["msg"] == f"Value error, reading the chunks raised {type(error).__name__}"
    assert "private" not in str(caught.value)


class _WatchedChunks(Iterator[str]):
    """An iterator of chunks that counts how many were read of it."""

    def __init__(self) -> None:
        self.read = 0

    def __next__(self) -> str:
        if self.read >= len(CHUNKS):
            raise StopIteration
        self.read += 1
        return CHUNKS[self.read - 1]


@pytest.mark.parametrize(
    ("settings", "call", "outcome"),
    [
        ({"sample_rate": 0.0}, {}, "sampled_out"),
        (
            {"sample_rate": 1.0, "selection_rules": [{"root_name": "free", "sample_rate": 0.0}]},
            {"name": "free"},
            "not_selected",
        ),
        (
            {"sample_rate": 1.0, "selection_rules": [{"metadata": {"tier": "free"}, "sample_rate": 0.0}]},
            {"metadata": {"tier": "free"}},
            "not_selected",
        ),
    ],
)
def test_a_call_not_sampled_leaves_its_chunks_unread(
    telemetry: Telemetry, settings: dict[str, Any], call: dict[str, Any], outcome: str
) -> None:
    # The chunks were read (up to 10,001 of a lazy iterable, on the application's thread) before the
    # sampling decision, so a call sampled out still consumed the caller's generator. The decision needs
    # only the trace id, name and metadata: a call not sampled never touches retrieved_content.
    evaluator = _evaluator(telemetry, **settings)
    chunks = _WatchedChunks()
    assert not evaluator.record_interaction(
        query=QUESTION, retrieved_content=chunks, actual_output=ANSWER, **call
    )
    assert chunks.read == 0
    stats = evaluator.stats()
    assert stats.captured == 1 and getattr(stats, outcome) == 1, stats
    evaluator.shutdown(5_000)
    sampled = _WatchedChunks()  # and a sampled call reads them all
    evaluator = _evaluator(telemetry)
    assert evaluator.record_interaction(query=QUESTION, retrieved_content=sampled, actual_output=ANSWER)
    assert sampled.read == len(CHUNKS)
    assert evaluator.force_flush(30_000) and evaluator.stats().evaluated == 1
    evaluator.shutdown(5_000)


class _ChunkWhoseReadingRaises(Mapping[str, object]):
    """A chunk mapping whose every read raises (a vector store's lazy record whose fetch failed); the
    error's message holds text that must never reach a log or the telemetry."""

    def __getitem__(self, key: str) -> object:
        raise RuntimeError("private chunk text")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("private chunk text")

    def __len__(self) -> int:
        return 1

    def get(self, key: str, default: object = None) -> object:
        raise RuntimeError("private chunk text")


def _refused_invalid_input(
    evaluator: Evaluator,
    telemetry: Telemetry,
    caplog: pytest.LogCaptureFixture,
    chunk_lists: Sequence[Iterable[object]],
) -> list[dict[str, Any]]:
    """Record one interaction per chunk list (each call returns at once), flush, check every one failed
    ``invalid_input``; the result spans' attributes."""
    with caplog.at_level(logging.WARNING, logger="ctxutil_otel"):
        for chunks in chunk_lists:
            assert evaluator.record_interaction(
                query=QUESTION, retrieved_content=chunks, actual_output=ANSWER
            )
        assert evaluator.force_flush(30_000)
    stats = evaluator.stats()
    expected = (len(chunk_lists), 0, {"invalid_input": len(chunk_lists)})
    assert (stats.captured, stats.evaluated, stats.failed) == expected, stats
    return [dict(s.attributes or {}) for s in telemetry.spans(n.SPAN_EVALUATION)]


def _the_one_evaluator_warning(caplog: pytest.LogCaptureFixture) -> str:
    """The message of the only WARNING-or-worse record the evaluator logged: a WARNING, no traceback."""
    records = [r for r in caplog.records if r.levelno >= logging.WARNING and "evaluator" in r.getMessage()]
    assert len(records) == 1, [r.getMessage() for r in records]
    (record,) = records
    assert record.levelno == logging.WARNING and record.exc_info is None
    return record.getMessage()


@pytest.mark.parametrize("worker", ["thread", "process"])
def test_a_chunk_whose_reading_raises_fails_invalid_input_naming_it(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, worker: str
) -> None:
    # A chunk mapping whose .get (or __getitem__, or iteration) raised was counted failed internal_error,
    # logged as an ERROR with a full traceback on every call, and no result span was emitted. It is bad
    # input: failed invalid_input with a result naming retrieved_content[1], one WARNING (throttled), no
    # traceback, nothing of the error's text.
    evaluator = _evaluator(telemetry, worker=worker)
    chunks: list[object] = [CHUNKS[0], _ChunkWhoseReadingRaises()]
    failed = _refused_invalid_input(evaluator, telemetry, caplog, [chunks, chunks])
    assert len(failed) == 2 and all(a[n.ATTR_EVALUATION_SCORE_LABEL] == "error" for a in failed)
    explanation = str(failed[0][n.ATTR_EVALUATION_EXPLANATION])
    assert "retrieved_content[1]" in explanation and "RuntimeError" in explanation
    assert "private" not in explanation
    message = _the_one_evaluator_warning(caplog)  # throttled: one for both calls
    assert "invalid_input" in message and "retrieved_content[1]" in message and "private" not in message
    evaluator.shutdown(5_000)


def test_a_chunk_whose_reading_raises_is_a_validation_error_of_the_batch_path() -> None:
    # DatasetItem let the chunk's RuntimeError through (the batch runner counted it _OTHER).
    with pytest.raises(ValidationError) as caught:
        DatasetItem(
            query=QUESTION, actual_output=ANSWER, retrieved_content=["ok", _ChunkWhoseReadingRaises()]
        )
    assert "retrieved_content[1]: reading the chunk raised RuntimeError" in str(caught.value)
    assert "private" not in str(caught.value)


def _endless_chunks() -> Iterator[str]:
    """``itertools.repeat("x")``, with a guard that fails the test (rather than filling the memory) when
    more than ``MAX_CHUNKS + 1`` chunks are read from it."""
    for read, chunk in enumerate(itertools.repeat("x")):
        if read > MAX_CHUNKS:
            raise AssertionError(f"read {read + 1} chunks of an endless iterable")
        yield chunk


@pytest.mark.parametrize("worker", ["thread", "process"])
def test_an_endless_iterable_of_chunks_is_refused_at_the_limit(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, worker: str
) -> None:
    # record_interaction(retrieved_content=itertools.repeat("x")) blocked the application's thread for
    # ever, materialising the iterable (a list of MAX_CHUNKS + 1 chunks was evaluated in full). At most
    # MAX_CHUNKS + 1 chunks are read; more than MAX_CHUNKS fail invalid_input naming the field and the
    # limit, with one WARNING, and the call returns.
    evaluator = _evaluator(telemetry, worker=worker)
    too_many: list[Iterable[object]] = [_endless_chunks(), ["x"] * (MAX_CHUNKS + 1)]
    failed = _refused_invalid_input(evaluator, telemetry, caplog, too_many)
    assert [a[n.ATTR_TOTAL_CHUNKS] for a in failed] == [0, 0]  # refused, not 10,001 chunks
    for attributes in failed:
        explanation = str(attributes[n.ATTR_EVALUATION_EXPLANATION])
        assert (
            explanation
            == f"retrieved_content: Value error, must hold at most {MAX_CHUNKS:,} chunks, got more"
        )
    assert f"at most {MAX_CHUNKS:,} chunks" in _the_one_evaluator_warning(caplog)
    evaluator.shutdown(5_000)


def test_the_batch_path_takes_at_most_the_same_number_of_chunks() -> None:
    at_the_limit = DatasetItem(query=QUESTION, actual_output=ANSWER, retrieved_content=["x"] * MAX_CHUNKS)
    assert len(at_the_limit.retrieved_content) == MAX_CHUNKS
    for too_many in (_endless_chunks(), ["x"] * (MAX_CHUNKS + 1)):
        assert _batch_message(too_many) == (
            f"retrieved_content: Value error, must hold at most {MAX_CHUNKS:,} chunks, got more"
        )


def test_after_shutdown_it_is_refused_and_counted(telemetry: Telemetry) -> None:
    evaluator = _evaluator(telemetry)
    evaluator.shutdown(5_000)
    assert not evaluator.record_interaction(query=QUESTION, retrieved_content=CHUNKS, actual_output=ANSWER)
    assert evaluator.stats().dropped == {"shutdown": 1}


def test_the_example_evaluates_every_question(model_server: OpenAICompatServer) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "plain_openai_rag.py"
    env = {
        **environ_without_settings("OPENAI_"),
        "OPENAI_BASE_URL": model_server.base_url,
        "OPENAI_API_KEY": "sk-example",
        "EXAMPLE_CHAT_MODEL": "app-model",
    }
    proc = subprocess.run(
        [sys.executable, str(example), "3"], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(model_server.requests) == 3  # the application's own model calls, over real HTTP
    assert proc.stdout.count("[span] contextual_utilization") == 3
    match = re.search(r"captured=(\d+).*evaluated=(\d+), not_applicable=(\d+)", proc.stdout)
    assert match is not None and match[1] == "3" and int(match[2]) + int(match[3]) == 3


class _TenantId(int):
    """An int subclass whose own ``__str__`` raises (a lazily resolved id of a web framework)."""

    def __str__(self) -> str:
        raise RuntimeError("tenant lookup failed")

    __repr__ = __str__


class _TenantName(str):
    def __str__(self) -> str:
        raise RuntimeError("tenant lookup failed")


@pytest.mark.parametrize("worker", ["thread", "process"])
def test_a_dimension_value_of_a_subclass_is_taken_as_the_plain_value(
    telemetry: Telemetry, worker: str
) -> None:
    # metadata={"tenant": an int subclass whose __str__ raises}: the worker's emitter formatted it with str(),
    # raising, and the evaluation was counted evaluated while nothing of it was emitted (a DEBUG line only).
    evaluator = _evaluator(telemetry, metric_dimensions=("tenant",), worker=worker)
    args: dict[str, Any] = {"query": QUESTION, "retrieved_content": CHUNKS, "actual_output": ANSWER}
    for tenant in ("acme", _TenantId(7), _TenantName("globex")):
        assert evaluator.record_interaction(**args, metadata={"tenant": tenant})
    assert evaluator.force_flush(60_000)
    spans = telemetry.spans(n.SPAN_EVALUATION)
    assert sorted((s.attributes or {}).get("ctxutil.metadata.tenant") for s in spans) == [
        "7",
        "acme",
        "globex",
    ]
    assert evaluator.stats().evaluated == 3
    evaluator.shutdown(5_000)


def test_chunk_metadata_takes_the_values_a_dimension_takes(telemetry: Telemetry) -> None:
    # A chunk's metadata {"page": numpy.int64(3)} was left out (only int, float, bool, str were kept), while
    # the same value under metric_dimensions was a dimension: one rule now (dimension_value) for both.
    evaluator = _evaluator(telemetry, chunk_metadata_keys=("page", "source", "score"))
    chunk = {"text": CHUNKS[0], "metadata": {"page": numpy.int64(3), "source": "a.pdf", "score": [1]}}
    args: dict[str, Any] = {"query": QUESTION, "actual_output": ANSWER}
    assert evaluator.record_interaction(**args, retrieved_content=[chunk, *CHUNKS[1:]])
    assert evaluator.force_flush(30_000)
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    found = {k: v for k, v in (span.attributes or {}).items() if k.startswith("ctxutil.chunks.0.metadata.")}
    assert found == {"ctxutil.chunks.0.metadata.page": 3, "ctxutil.chunks.0.metadata.source": "a.pdf"}
    evaluator.shutdown(5_000)
