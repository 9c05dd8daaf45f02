"""What capture hands to the worker: raw references to one finished RAG interaction.

Capture runs on the application's request path, so an :class:`Interaction` holds references only
(no copying, no validation); the worker turns it into a :class:`~ctxutil_otel.DatasetItem` off the
request path.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import SupportsIndex

from opentelemetry.trace import SpanContext

__all__ = [
    "INTERACTION_ID_MAX_CHARS",
    "INTERACTION_ID_TYPES",
    "Interaction",
    "InteractionIdError",
    "interaction_id_text",
]

INTERACTION_ID_MAX_CHARS = 256
"""Characters kept of an interaction id given by a caller (``record_interaction``, a batch line's ``id``)."""
INTERACTION_ID_TYPES = "a string, an integer, a UUID or None"
"""What an interaction id given by a caller may be."""


class InteractionIdError(TypeError):
    """An interaction id of a type :func:`interaction_id_text` does not take; the message is ours (names the
    type, never the value)."""


def interaction_id_text(value: object) -> str | None:
    """A caller's interaction id as ``ctxutil.interaction.id`` and ``item_id`` take it: a string as it is, a
    ``uuid.UUID`` as its text (``str``), an integer (``int``, ``numpy.int64``: anything with ``__index__``,
    never a ``bool``) as its decimal text; cut to :data:`INTERACTION_ID_MAX_CHARS` characters, the last
    one ``…`` when cut. ``None`` is no id.

    Raises:
        InteractionIdError: (a ``TypeError``) ``must be a string, an integer, a UUID or None, got float``
            for any other type (the type named, never the value), or an integer of more than 4,300 digits
            (Python's conversion limit). Anything else raised is the value's own (an ``__index__`` or a
            UUID subclass's ``__str__`` that raises): the caller's to report without its message.
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = str.__str__(value)  # a str subclass (numpy.str_) as a plain str, its own __str__ not called
    elif isinstance(value, uuid.UUID):
        text = str(value)
    else:
        text = _integer_text(value)
    if len(text) > INTERACTION_ID_MAX_CHARS:
        return text[: INTERACTION_ID_MAX_CHARS - 1] + "…"
    return text


def _integer_text(value: object) -> str:
    wrong = InteractionIdError(f"must be {INTERACTION_ID_TYPES}, got {type(value).__name__}")
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise wrong
    try:
        number = operator.index(value)
    except TypeError:  # an __index__ that refuses (numpy.bool_)
        raise wrong from None
    try:
        return str(number)
    except ValueError:  # over Python's limit on converting an integer to text
        raise InteractionIdError("must be an integer of at most 4,300 digits, got a longer one") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Interaction:
    """One captured RAG interaction, not yet validated.

    Attributes:
        query: The user's question as captured (``None`` when capture found none).
        answer: The generated answer as captured (``None`` when none).
        documents: Retrieved chunks in order: ``str``, LangChain ``Document`` or mappings
            (see :func:`ctxutil_otel.DatasetItem`). ``record_interaction`` hands over a value that is not a
            list of chunks (``None``, one string) as given, for the worker to fail it ``invalid_input``
            with :func:`~ctxutil_otel._item.chunk_list`'s message.
        trace_id: 128-bit trace id the sampling decision was made from.
        parent: The evaluated span's context (the evaluation span becomes its child and links to it);
            ``None`` when no OpenTelemetry span was active: the emitter then opens a root span
            ``rag.interaction`` spanning ``start_time_ns`` .. ``end_time_ns`` for the result to live in.
        start_time_ns / end_time_ns: Wall-clock bounds of the interaction (``time.time_ns()``).
        source: Which capture path produced it (``"langchain"``, ``"span_processor"``, ...).
        id: An identifier for logs and results (the LangChain root ``run_id``, or the span id).
        response_id: The evaluated generation's ``gen_ai.response.id`` (the model provider's completion id,
            e.g. ``chatcmpl-...``) when capture saw one; emitted on the ``gen_ai.evaluation.result`` event.
        service: Which application produced the evaluated spans, from their Resource: ``service.name``,
            ``service.namespace``, ``deployment.environment.name`` (those present; the span processor fills
            it, so ``serve`` can name each sender); ``None`` when unknown.
        dimensions: Raw dimension values read once by capture (docs/slices.md), keyed by the attribute
            they become: ``gen_ai.request.model``, ``gen_ai.provider.name``, ``ctxutil.chain.name``,
            ``ctxutil.retriever.name``, ``ctxutil.metadata.<key>``; absent keys are unknown. Strings, or
            numbers and booleans as given (a metadata value), never other types. Not truncated
            nor bounded here: the emitter does that, per process (``dimension_max_values`` /
            ``dimension_max_chars``). ``None`` when capture read none.
    """

    query: str | None
    answer: str | None
    documents: Sequence[object]
    trace_id: int
    parent: SpanContext | None = None
    start_time_ns: int = 0
    end_time_ns: int = 0
    source: str = "langchain"
    id: str | None = None
    metadata: dict[str, object] = field(default_factory=dict)
    response_id: str | None = None
    service: Mapping[str, str] | None = None
    dimensions: Mapping[str, str | int | float | bool] | None = None
