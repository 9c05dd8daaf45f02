"""A closed turn -> the :class:`~ctxutil_otel.capture.Interaction` the evaluator judges, or why it cannot be
evaluated (:class:`NotEvaluable`: the drop reason it is counted with and its cause)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..._accounting import DropReason
from ..._interaction import Interaction
from . import _dimensions
from ._assembly import Turn
from ._model import CAPTURE_ERROR, NO_ANSWER, NO_QUERY, Chunk, Generation, Retrieval

__all__ = ["SOURCE", "NotEvaluable", "to_interaction"]

SOURCE = "span_processor"


@dataclass(frozen=True, slots=True)
class NotEvaluable:
    """Why a turn cannot be evaluated.

    Attributes:
        reason: The drop reason it is counted with: ``capture_error`` when a reader failed on one of
            its spans, else ``not_evaluable``.
        cause: ``content_not_captured``, ``malformed``, ``truncated``, ``unrecognised``,
            ``capture_error``, :data:`UNPAIRED`, :data:`NO_QUERY` or :data:`NO_ANSWER`.
        convention: The convention of the record at fault (the generation's for the turn-level causes).
    """

    reason: DropReason
    cause: str
    convention: str


def to_interaction(
    turn: Turn, closing: object = None, metadata_keys: Sequence[str] = ()
) -> Interaction | NotEvaluable:
    """The :class:`Interaction` of a turn, or why it is not evaluable: a record's content could not be
    read (its ``problem``; a reader failure is ``capture_error``), the trace's records did not pair
    (:data:`UNPAIRED`), the answer was not captured, or no query was found (retrievals first, then
    the generation's input messages).

    The interaction is parented to the generation's span (``parent``, ``trace_id`` and ``id``, the
    span id in 16 hex digits); start/end are the closing span's; ``source`` is ``"span_processor"``.
    Read here, once per turn, from the buffered spans (``_dimensions``): ``response_id`` and ``service``
    (the sender's Resource) from the generation span, ``dimensions`` from the generation, retrieval and
    ``closing`` spans (the span that closed the turn; ``metadata_keys``: the ``metric_dimensions``).
    """
    generation = turn.generation.record
    assert isinstance(generation, Generation)
    records: list[Retrieval | Generation] = [p.record for p in turn.retrievals]
    records.append(generation)
    failed = next((r for r in records if r.problem == CAPTURE_ERROR), None)
    if failed is not None:
        return NotEvaluable(CAPTURE_ERROR, CAPTURE_ERROR, failed.convention)
    if turn.cause is not None:
        return NotEvaluable("not_evaluable", turn.cause, generation.convention)
    chunks: list[Chunk] = []
    query: str | None = None
    for part in turn.retrievals:
        record = part.record
        assert isinstance(record, Retrieval)
        if record.chunks is None:
            return NotEvaluable("not_evaluable", record.problem or "malformed", record.convention)
        chunks.extend(record.chunks)
        if query is None and record.query is not None and record.query.strip():
            query = record.query
    if generation.answer is None:
        return NotEvaluable("not_evaluable", generation.problem or NO_ANSWER, generation.convention)
    if query is None:
        query = generation.query
    if query is None or not query.strip():
        return NotEvaluable("not_evaluable", NO_QUERY, generation.convention)
    context = turn.generation.context
    generating = turn.generation.span
    facts = _dimensions.generation_facts(generating)
    return Interaction(
        query=query,
        answer=generation.answer,
        documents=chunks,
        trace_id=context.trace_id,
        parent=context,
        start_time_ns=turn.start_ns,
        end_time_ns=turn.end_ns,
        source=SOURCE,
        id=format(context.span_id, "016x"),
        response_id=_dimensions.response_id(facts) or generation.response_id,
        service=_dimensions.sender(generating) or dict(generation.service) or None,
        dimensions=_dimensions.dimensions(
            facts, [p.span for p in turn.retrievals], closing, metadata_keys, generating
        )
        or None,
        metadata={
            "convention": generation.convention,
            "retrieval_span_ids": [format(p.context.span_id, "016x") for p in turn.retrievals],
        },
    )
