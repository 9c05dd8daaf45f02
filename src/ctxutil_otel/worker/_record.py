"""``Evaluator.record_interaction``: a finished RAG interaction from an application without a framework,
handed to the evaluator like any capture path's (docs/no-framework.md).

In two steps, so that a call not sampled never reads its chunks: :func:`call_of` reads what the
sampling and selection decision needs (the trace, ``name`` and ``metadata``) and checks the arguments;
``Evaluator.record_interaction`` admits the call on them; only then :func:`interaction_of_call` makes the
dimensions and reads ``retrieved_content`` (references and a shallow copy of the chunk list: the texts are
validated by the worker, off the request path, which fails a wrong one ``invalid_input`` naming the
field) into an :class:`~ctxutil_otel._interaction.Interaction`, handed over through the call's ticket. The
call's own arguments (``metadata``, ``span_context``, ``interaction_id``) are checked at the call, by type
only: a wrong one raises :class:`ArgumentError`, which ``record_interaction`` logs and counts dropped
``capture_error``. A dimension argument (``model``, ``provider``, ``retriever_name``, ``name``) that is
not a string is left out (:attr:`Call.left_out`: logged, the interaction still evaluated). Every argument
read here is read inside a ``try`` (:func:`raise_read_error`): one whose reading raises (a generator of
chunks that raises, a mapping whose methods raise, an id whose ``__index__`` raises, an ``isinstance``
that raises) raises :class:`ArgumentReadError` naming it and the error's class, never its message.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, NoReturn

from opentelemetry import trace
from opentelemetry.trace import SpanContext

from .._dimension_keys import metadata_dimension
from .._interaction import Interaction, InteractionIdError, interaction_id_text
from .._item import ChunksReadError, is_chunk_iterable, read_chunks
from .._selection import SelectionFacts, SelectionRule
from ..emit._names import (
    ATTR_CHAIN_NAME,
    ATTR_PROVIDER_NAME,
    ATTR_REQUEST_MODEL,
    ATTR_RETRIEVER_NAME,
    DIMENSION_METADATA_PREFIX,
)

__all__ = [
    "SOURCE",
    "ArgumentError",
    "ArgumentReadError",
    "Call",
    "call_of",
    "facts_of_call",
    "interaction_of_call",
    "metadata_keys_read",
    "raise_read_error",
]

#: ``ctxutil.interaction.source`` of these interactions.
SOURCE = "record_interaction"
_ABSENT = object()  # a metadata key not in the mapping


class ArgumentError(TypeError):
    """A ``record_interaction`` argument that is not of its documented type; the message names the
    argument, what it takes and the type given (never the value)."""

    def __init__(self, argument: str, problem: str) -> None:
        self.argument = argument
        super().__init__(f"`{argument}` {problem}")

    @classmethod
    def wrong_type(cls, argument: str, expected: str, value: object) -> ArgumentError:
        """``argument`` must be ``expected``, got ``type(value)``."""
        return cls(argument, f"must be {expected}, got {type(value).__name__}")


class ArgumentReadError(Exception):
    """Reading a ``record_interaction`` argument raised (the error chained as ``__cause__``). The message
    names the argument and the error's class, never the error's message (it may quote the user's text)."""

    def __init__(self, argument: str, error: BaseException) -> None:
        self.argument = argument
        self.error_type = type(error).__name__
        super().__init__(f"reading `{argument}` raised {self.error_type}")


def raise_read_error(argument: str, exc: Exception) -> NoReturn:
    """Raise for reading ``argument`` (a user's object) having raised ``exc``: our own
    :class:`ArgumentError` or :class:`ArgumentReadError` as it is, anything else (the argument's own
    ``__index__``, ``__class__``, a mapping's ``get``) as :class:`ArgumentReadError` naming the argument
    and the error's class, never its message. Called as ``except Exception as exc:
    raise_read_error(argument, exc)`` around the reads, ``argument`` set before each: a ``try`` costs the
    call nothing until something raises (a ``contextlib`` manager per argument tripled a sampled-out
    call's time)."""
    if isinstance(exc, (ArgumentError, ArgumentReadError)):  # ours, already naming the argument
        raise exc
    raise ArgumentReadError(argument, exc) from exc


def check_arguments(*, metadata: object, span_context: object, interaction_id: object) -> str | None:
    """Raise :class:`ArgumentError` for a ``metadata`` that is not a mapping, a ``span_context`` that is
    not a ``SpanContext``, or an ``interaction_id`` that
    :func:`~ctxutil_otel._interaction.interaction_id_text` refuses (``None`` is each one's default),
    :class:`ArgumentReadError` for one whose reading raises; return the id's text."""
    argument = "metadata"
    try:
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ArgumentError.wrong_type("metadata", "a mapping or None", metadata)
        argument = "span_context"
        if span_context is not None and not isinstance(span_context, SpanContext):
            expected = "an opentelemetry.trace.SpanContext (span.get_span_context()) or None"
            raise ArgumentError.wrong_type("span_context", expected, span_context)
        argument = "interaction_id"
        return interaction_id_text(interaction_id)
    except InteractionIdError as exc:  # ours: names the type
        raise ArgumentError("interaction_id", str(exc)) from None
    except Exception as exc:
        raise_read_error(argument, exc)


class Call(NamedTuple):
    """What a ``record_interaction`` call is known by before its chunks are read."""

    trace_id: int
    parent: SpanContext | None
    facts: SelectionFacts
    id: str | None
    #: The dimension arguments given as non-empty strings, by their attributes.
    argument_dimensions: dict[str, str]
    #: ``metric_dimensions``: the metadata keys that become dimensions (read from ``facts.metadata``).
    metadata_keys: Sequence[str]
    #: An :class:`ArgumentError` for each dimension argument (``model=...``) given that is not a string:
    #: the interaction is evaluated without that dimension (a ``name`` that is not one is no name).
    left_out: tuple[ArgumentError, ...]


def call_of(
    *,
    span_context: object,
    model: str | None,
    provider: str | None,
    retriever_name: str | None,
    name: str | None,
    metadata: object,
    metric_dimensions: Sequence[str],
    metadata_read: Sequence[str],
    interaction_id: object,
) -> Call:
    """The call's trace, selection facts, id and dimension arguments (and those left out for their type:
    :attr:`Call.left_out`): all but the texts, the chunks and the metadata's dimensions, which are read
    only once it is admitted (the selection rules read ``metadata``, never the dimensions). Its trace:
    ``span_context`` when valid, else the current OpenTelemetry span's (the evaluation span becomes a child
    of that span), else a new random trace id and no parent (the emitter opens a ``rag.interaction`` root
    span).

    ``metadata_read``: the metadata keys read (:func:`metadata_keys_read`); no other is ever read and the
    mapping is never iterated.

    Raises :class:`ArgumentError` (see :func:`check_arguments`), :class:`ArgumentReadError` for a
    ``metadata`` whose reading raises (read once, by :func:`facts_of_call`; the dimensions read its copy)."""
    id_text = check_arguments(metadata=metadata, span_context=span_context, interaction_id=interaction_id)
    mapping = metadata if isinstance(metadata, Mapping) else None  # checked above: the same value
    try:  # a SpanContext subclass's own properties
        context = (
            span_context
            if isinstance(span_context, SpanContext)
            else trace.get_current_span().get_span_context()
        )
        valid = context.is_valid
        trace_id, parent = (context.trace_id, context) if valid else (random.getrandbits(128) or 1, None)
    except Exception as exc:
        raise_read_error("span_context", exc)
    facts = facts_of_call(name, mapping, metadata_read)  # reads ``metadata``'s keys once, into a copy
    named, left_out = _dimension_arguments(model, provider, retriever_name, name)
    return Call(trace_id, parent, facts, id_text, named, metric_dimensions, left_out)


def interaction_of_call(
    call: Call, *, query: object, retrieved_content: object, actual_output: object
) -> Interaction:
    """The interaction of an admitted call: its dimensions made and ``retrieved_content`` read here, on the
    caller's thread.

    An iterable of chunks is copied (the caller may reuse theirs), at most its first ``MAX_CHUNKS + 1``
    (never read further: an endless iterable returns at once; the worker refuses more than
    ``MAX_CHUNKS``); anything else (``None``, one string, one mapping) is handed over as given. The
    worker fails either ``invalid_input`` with :func:`~ctxutil_otel._item.chunk_list`'s message, as
    ``DatasetItem`` does. Raises :class:`ArgumentReadError` when iterating raises (any ``Exception``, its own
    ``ValueError`` included)."""
    documents: Sequence[object]
    argument = "retrieved_content"
    try:  # a generator that raises, an __iter__ that raises
        if not is_chunk_iterable(retrieved_content):  # not a list of chunks: the worker names it
            documents = retrieved_content  # type: ignore[assignment]  # validated there: invalid_input
        else:
            try:
                documents = read_chunks(retrieved_content)
            except ChunksReadError as exc:  # the iterable's own error, as read_chunks chains it
                cause = exc.__cause__ if exc.__cause__ is not None else exc
                raise ArgumentReadError("retrieved_content", cause) from cause
        argument = "metadata"  # a metadata value's own number conversion (numbers.Integral / Real)
        dimensions = _dimensions(call.argument_dimensions, call.facts.metadata, call.metadata_keys)
    except Exception as exc:
        raise_read_error(argument, exc)
    now = time.time_ns()
    return Interaction(
        query=query,  # type: ignore[arg-type]  # validated by the worker: a wrong type fails invalid_input
        answer=actual_output,  # type: ignore[arg-type]  # as above
        documents=documents,
        trace_id=call.trace_id,
        parent=call.parent,
        start_time_ns=now,
        end_time_ns=now,
        source=SOURCE,
        id=call.id,
        dimensions=dimensions or None,
    )


def metadata_keys_read(rules: Iterable[SelectionRule], metric_dimensions: Iterable[str]) -> tuple[str, ...]:
    """The ``metadata`` keys ``record_interaction`` reads: those the selection rules' ``metadata`` match
    and the ``metric_dimensions`` keys, without repeats (computed once, with the settings)."""
    ruled = (key for rule in rules if rule.metadata for key in rule.metadata)
    return tuple(dict.fromkeys((*ruled, *metric_dimensions)))


def facts_of_call(name: object, metadata: Mapping[str, object] | None, keys: Sequence[str]) -> SelectionFacts:
    """What the selection rules see of the call: ``name`` as the root name (a name that is not a string
    is no name: the rules' match would fail, counted ``sampled_out``), and ``metadata``'s ``keys`` (those
    the rules and the dimensions read, :func:`metadata_keys_read`), each read once with ``get``, into a
    copy: the mapping is never iterated nor copied whole (its size costs the call nothing; an endless
    one returns), and with no keys to read it is not touched. Reading it raises
    :class:`ArgumentReadError`."""
    try:
        root_name = name if isinstance(name, str) else None
    except Exception as exc:
        raise_read_error("name", exc)
    if metadata is None or not keys:
        return SelectionFacts(root_name=root_name)
    copied: dict[str, object] = {}
    try:  # a mapping whose own methods raise
        for key in keys:
            value = metadata.get(key, _ABSENT)
            if value is not _ABSENT:
                copied[key] = value
    except Exception as exc:
        raise_read_error("metadata", exc)
    return SelectionFacts(root_name=root_name, metadata=copied)


def _dimension_arguments(
    model: object, provider: object, retriever_name: object, name: object
) -> tuple[dict[str, str], tuple[ArgumentError, ...]]:
    """The dimension arguments given as non-empty strings (by their attributes), and an
    :class:`ArgumentError` for each given that is not a string (:attr:`Call.left_out`)."""
    named: dict[str, str] = {}
    left_out: list[ArgumentError] = []
    argument = "model"
    try:
        for argument, attribute, value in (
            ("model", ATTR_REQUEST_MODEL, model),
            ("provider", ATTR_PROVIDER_NAME, provider),
            ("retriever_name", ATTR_RETRIEVER_NAME, retriever_name),
            ("name", ATTR_CHAIN_NAME, name),
        ):
            if isinstance(value, str):
                if value:
                    named[attribute] = str.__str__(value)  # a str subclass as a plain str
            elif value is not None:
                left_out.append(ArgumentError.wrong_type(argument, "a string or None", value))
    except Exception as exc:
        raise_read_error(argument, exc)
    return named, tuple(left_out)


def _dimensions(
    named: Mapping[str, str], metadata: Mapping[str, object] | None, keys: Sequence[str]
) -> dict[str, str | int | float | bool]:
    """The dimension arguments' (``named``) and the ``metric_dimensions`` ``keys`` found in ``metadata``."""
    out: dict[str, str | int | float | bool] = dict(named)
    if metadata:
        for key in keys:
            found = metadata_dimension(key, metadata.get(key))  # a NaN or infinite number is none
            if found is not None:
                out[f"{DIMENSION_METADATA_PREFIX}.{key}"] = found
    return out
