"""What the convention readers return, and the tolerant attribute helpers they share.

A reader maps the attributes of one finished span to a :class:`Retrieval`, a :class:`Generation`, the
:data:`CHAIN` marker, or ``None`` (not part of a RAG interaction). Readers never raise on bad input:
a missing, redacted, truncated or malformed attribute becomes a record whose ``problem`` says why its
content cannot be evaluated (the processor counts such an interaction ``not_evaluable``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, TypeAlias

from opentelemetry.trace import SpanContext

__all__ = [
    "CAPTURE_ERROR",
    "CHAIN",
    "CONTENT_NOT_CAPTURED",
    "INVALID",
    "MALFORMED",
    "MAX_ID_DIGITS",
    "MAX_INDEX",
    "NO_ANSWER",
    "NO_QUERY",
    "REDACTED",
    "TRUNCATED",
    "UNPAIRED",
    "UNRECOGNISED",
    "Chain",
    "Chunk",
    "Generation",
    "Part",
    "Retrieval",
    "SpanLike",
    "as_float",
    "as_id",
    "as_mapping",
    "as_text",
    "contiguous",
    "first_text",
    "indexed",
    "load_json",
]

#: The value OpenInference writes in place of hidden content (``openinference.instrumentation.config``).
REDACTED: Final = "__REDACTED__"

#: ``problem`` values: why a record's content cannot be evaluated.
CONTENT_NOT_CAPTURED: Final = "content_not_captured"  # the instrumentation did not record the text
MALFORMED: Final = "malformed"  # the attribute is there but unreadable (bad JSON, wrong types)
TRUNCATED: Final = "truncated"  # some documents are missing (attribute count limit, gaps in indices)
UNRECOGNISED: Final = "unrecognised"  # a retrieval or model span no reader knows how to read
CAPTURE_ERROR: Final = "capture_error"  # the reader failed on this span (counted ``capture_error``)
#: Causes of a not-evaluable turn besides the records' own ``problem`` values.
UNPAIRED: Final = "unpaired"  # retrieval and generation in a trace that pair into no turn
NO_QUERY: Final = "no_query"  # no retrieval or input message of the turn holds a query
NO_ANSWER: Final = "no_answer"  # the generation's answer was not recorded

_RECORD_OVERHEAD = 200  # approximate bytes of a buffered record besides its text

#: Largest index read from a flattened attribute key (``retrieval.documents.{i}...``); far above any
#: attribute count limit, so only a hostile or broken sender reaches it.
MAX_INDEX: Final = 99_999
_INDEX_DIGITS = len(str(MAX_INDEX))
#: Document ids given as integers are read up to this many digits.
MAX_ID_DIGITS: Final = 64
_MAX_ID = 10**MAX_ID_DIGITS


class SpanLike(Protocol):
    """What the span processor reads from a finished span: the read-only view of
    ``opentelemetry.sdk.trace.ReadableSpan`` (which satisfies it), or anything an OTLP receiver builds
    with the same properties.

    Attributes:
        name: The span name.
        context: The span's own ``SpanContext`` (``trace_id``, ``span_id``).
        parent: The parent's ``SpanContext``, ``None`` for a root; ``parent.is_remote`` marks a local root
            whose parent lives in another process.
        attributes: The span attributes (``None`` or empty allowed).
        start_time / end_time: Nanoseconds since the epoch (``None`` when unknown).
    """

    @property
    def name(self) -> str: ...
    @property
    def context(self) -> SpanContext | None: ...
    @property
    def parent(self) -> SpanContext | None: ...
    @property
    def attributes(self) -> Mapping[str, object] | None: ...
    @property
    def start_time(self) -> int | None: ...
    @property
    def end_time(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrieved chunk. ``page_content`` (LangChain's name) makes it a valid chunk for
    :class:`~ctxutil_otel.DatasetItem`.

    Attributes:
        page_content: The chunk text.
        id: The document id, if the instrumentation recorded one.
        score: The retrieval score, if recorded (units are the retriever's).
        metadata: Document metadata, if recorded as a JSON object.
    """

    page_content: str
    id: str | None = None
    score: float | None = None
    metadata: Mapping[str, object] | None = None


@dataclass(frozen=True, slots=True)
class Retrieval:
    """A retrieval (or rerank) span's query and ordered chunks.

    Attributes:
        query: The query text, ``None`` when not captured.
        chunks: The chunks in retrieval order; ``()`` for a retrieval that found nothing; ``None`` when
            documents were retrieved but their text cannot be read (see ``problem``).
        convention: ``"openinference"``, ``"genai"`` or ``"openllmetry"``.
        problem: ``None``, or why ``chunks`` is ``None`` (:data:`CONTENT_NOT_CAPTURED`,
            :data:`MALFORMED`, :data:`TRUNCATED`, :data:`UNRECOGNISED`, :data:`CAPTURE_ERROR`).
        reranked: A reranker's output: it replaces the retrievals before it in the same turn.
    """

    query: str | None
    chunks: tuple[Chunk, ...] | None
    convention: str
    problem: str | None = None
    reranked: bool = False

    def size(self) -> int:
        """Approximate bytes this record holds (text lengths plus a fixed overhead per record)."""
        total = _RECORD_OVERHEAD + len(self.query or "")
        for chunk in self.chunks or ():
            total += _RECORD_OVERHEAD + len(chunk.page_content)
        return total


@dataclass(frozen=True, slots=True)
class Generation:
    """A model call's answer, and the user query of its input messages when there is one.

    Attributes:
        answer: The generated text (first choice); ``None`` when not captured (see ``problem``).
        query: The last user message of the input, ``None`` when not captured. Used only when no
            retrieval of the turn has a query (in a RAG prompt it usually holds the context too).
        convention: ``"openinference"``, ``"genai"`` or ``"openllmetry"``.
        problem: ``None``, or why ``answer`` is ``None``.
        response_id: The span's ``gen_ai.response.id`` (GenAI conventions, OpenLLMetry), if any.
        service: ``(key, value)`` pairs of the span's Resource that name the sending application
            (``service.name``, ``service.namespace``, ``deployment.environment.name``).
    """

    answer: str | None
    convention: str
    query: str | None = None
    problem: str | None = None
    response_id: str | None = None
    service: tuple[tuple[str, str], ...] = ()

    def size(self) -> int:
        """Approximate bytes this record holds."""
        return _RECORD_OVERHEAD + len(self.answer or "") + len(self.query or "")


class Chain:
    """The marker for a span that groups others (OpenInference ``CHAIN``/``AGENT``, Traceloop
    ``workflow``/``task``, GenAI ``invoke_workflow``/``invoke_agent``). Use the singleton :data:`CHAIN`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "CHAIN"


CHAIN: Final = Chain()

Part: TypeAlias = "Retrieval | Generation | Chain"


# --- tolerant attribute helpers ------------------------------------------------------------------


def as_text(value: object) -> str | None:
    """``value`` when it is a ``str`` other than OpenInference's :data:`REDACTED`, else ``None``."""
    if isinstance(value, str) and value != REDACTED:
        return value
    return None


def first_text(fields: Mapping[str, object], keys: Sequence[str]) -> str | None:
    """:func:`as_text` of the first of ``keys`` in ``fields`` that has a text value, else ``None``."""
    for key in keys:
        text = as_text(fields.get(key))
        if text is not None:
            return text
    return None


def as_id(value: object) -> str | None:
    """A document id as ``str`` (``str`` or ``int`` accepted; ``bool``, an ``int`` of more than
    :data:`MAX_ID_DIGITS` digits and others give ``None``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        # str() of an int over sys.get_int_max_str_digits() digits raises: bound it first (cheaply).
        return str(value) if -_MAX_ID < value < _MAX_ID else None
    return as_text(value)


def as_float(value: object) -> float | None:
    """A score as ``float`` (``int``/``float``, or a numeric ``str``); ``None`` otherwise."""
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, (int, float)):
            return float(value)  # an int beyond the float range raises OverflowError
        if isinstance(value, str):
            return float(value)
    except (ValueError, OverflowError):
        return None
    return None


class _Invalid:
    __slots__ = ()


INVALID: Final = _Invalid()


def load_json(value: object) -> object:
    """Parse a JSON string attribute. Non-strings are returned as they are (structured attribute
    values, tuples of strings). Returns :data:`INVALID` for a string that is not JSON (truncated by an
    attribute length limit, or just malformed); never raises."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return INVALID


def as_mapping(value: object) -> Mapping[str, object] | None:
    """A metadata mapping from a ``dict`` or a JSON-object string; ``None`` otherwise."""
    loaded = load_json(value) if isinstance(value, str) else value
    if isinstance(loaded, Mapping):
        return loaded
    return None


def indexed(attributes: Mapping[str, object], prefix: str) -> list[tuple[int, dict[str, object]]]:
    """Group flattened attributes ``{prefix}{i}.{rest}`` by index ``i``.

    Returns ``(i, {rest: value})`` pairs sorted by ``i``. Keys whose index is not written with ASCII
    digits (``"²"``, ``"-1"``, ``"x"``) and keys that are not strings are ignored. An index above
    :data:`MAX_INDEX` (however many digits it has) is read as ``MAX_INDEX + 1``: it sorts last and
    leaves a gap, so a document list holding one reads as truncated rather than silently shorter.
    Example: ``indexed(a, "retrieval.documents.")`` on ``retrieval.documents.0.document.content`` gives
    ``[(0, {"document.content": ...})]``. Never raises.
    """
    groups: dict[int, dict[str, object]] = {}
    start = len(prefix)
    for key, value in attributes.items():
        if type(key) is not str or not key.startswith(prefix):
            continue
        dot = key.find(".", start)
        if dot <= start:
            continue
        index = key[start:dot]
        # str.isdigit() accepts Unicode digits ("²", "٣") that int() refuses or reads as another number.
        if not (index.isascii() and index.isdigit()):
            continue
        digits = index.lstrip("0") or "0"
        number = int(digits) if len(digits) <= _INDEX_DIGITS else MAX_INDEX + 1  # never int() of 10k digits
        groups.setdefault(min(number, MAX_INDEX + 1), {})[key[dot + 1 :]] = value
    return sorted(groups.items())


def contiguous(groups: Sequence[tuple[int, object]]) -> bool:
    """``True`` when the indices are exactly ``0 .. n-1`` (no document lost to a limit)."""
    return all(index == position for position, (index, _) in enumerate(groups))
