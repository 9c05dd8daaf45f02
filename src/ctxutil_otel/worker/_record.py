"""``Evaluator.record_interaction``: a finished RAG interaction from an application without a framework,
handed to the evaluator like any capture path's (docs/no-framework.md).

:func:`interaction_of_call` turns the call's arguments into an :class:`~ctxutil_otel._interaction.Interaction`
(references and a shallow copy of the chunk list: no validation here, the worker validates off the request
path) and :func:`facts_of_call` into the selection rules' facts; ``Evaluator.record_interaction`` then hands
the interaction over as every capture path does, through one ticket: ``admit(...).submit(interaction)``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence

from opentelemetry import trace
from opentelemetry.trace import SpanContext

from .._interaction import Interaction
from .._selection import SelectionFacts
from ..emit._names import (
    ATTR_CHAIN_NAME,
    ATTR_PROVIDER_NAME,
    ATTR_REQUEST_MODEL,
    ATTR_RETRIEVER_NAME,
    DIMENSION_METADATA_PREFIX,
)

__all__ = ["SOURCE", "facts_of_call", "interaction_of_call"]

#: ``ctxutil.interaction.source`` of these interactions.
SOURCE = "record_interaction"


def interaction_of_call(
    *,
    query: object,
    retrieved_content: object,
    actual_output: object,
    span_context: SpanContext | None,
    model: str | None,
    provider: str | None,
    retriever_name: str | None,
    name: str | None,
    metadata: Mapping[str, object] | None,
    metric_dimensions: Sequence[str],
    interaction_id: str | None,
) -> Interaction:
    """The interaction of one ``record_interaction`` call. Its trace: ``span_context`` when valid, else
    the current OpenTelemetry span's (the evaluation span becomes a child of that span), else a new
    random trace id and no parent (the emitter opens a ``rag.interaction`` root span)."""
    context = span_context if span_context is not None else trace.get_current_span().get_span_context()
    if context.is_valid:
        trace_id, parent = context.trace_id, context
    else:
        trace_id, parent = random.getrandbits(128) or 1, None
    if isinstance(retrieved_content, (str, bytes)) or not isinstance(retrieved_content, Sequence):
        documents: list[object] = [retrieved_content]  # one chunk, or an invalid one the worker names
    else:
        documents = list(retrieved_content)
    now = time.time_ns()
    return Interaction(
        query=query,  # type: ignore[arg-type]  # validated by the worker: a wrong type fails invalid_input
        answer=actual_output,  # type: ignore[arg-type]  # as above
        documents=documents,
        trace_id=trace_id,
        parent=parent,
        start_time_ns=now,
        end_time_ns=now,
        source=SOURCE,
        id=_id_text(interaction_id),
        dimensions=_dimensions(model, provider, retriever_name, name, metadata, metric_dimensions) or None,
    )


def facts_of_call(name: str | None, metadata: Mapping[str, object] | None) -> SelectionFacts:
    """What the selection rules see of the call: ``name`` as the root name (a name that is not a string
    is no name: the rules' match would fail, counted ``sampled_out``), ``metadata``."""
    root_name = name if isinstance(name, str) else None
    return SelectionFacts(root_name=root_name, metadata=dict(metadata) if metadata else None)


def _id_text(interaction_id: object) -> str | None:
    """``interaction_id`` as ``ctxutil.interaction.id`` takes it: an integer (a database row's id) as its
    decimal text; anything else that is not a string is left out (it failed the evaluation, or, in the
    process worker's child, the rest of its batch)."""
    if isinstance(interaction_id, str):
        return interaction_id
    if isinstance(interaction_id, int) and not isinstance(interaction_id, bool):
        return str(interaction_id)
    return None


def _dimensions(
    model: str | None,
    provider: str | None,
    retriever_name: str | None,
    name: str | None,
    metadata: Mapping[str, object] | None,
    keys: Sequence[str],
) -> dict[str, str | int | float | bool]:
    out: dict[str, str | int | float | bool] = {}
    for attribute, value in (
        (ATTR_REQUEST_MODEL, model),
        (ATTR_PROVIDER_NAME, provider),
        (ATTR_RETRIEVER_NAME, retriever_name),
        (ATTR_CHAIN_NAME, name),
    ):
        if isinstance(value, str) and value:
            out[attribute] = value
    if metadata:
        for key in keys:
            found = metadata.get(key)
            if isinstance(found, (str, int, float, bool)):
                out[f"{DIMENSION_METADATA_PREFIX}.{key}"] = found
    return out
