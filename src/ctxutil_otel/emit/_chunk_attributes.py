"""Per-chunk span attributes ``ctxutil.chunks.{i}.*``: each chunk's verdict (index, relevant, utilized),
with content capture its reason and text, and where that text comes from (:func:`text_source`); and
``ctxutil.chunks.not_relevant.*``, the chunks left out of the score (:func:`not_relevant_attributes`).

On the emission hot path (the worker's CPU budget pays for it): the usual chunk takes one fast path with
keys made once; only a chunk with a field that fails goes field by field, losing just that field. The
result-level attributes (score, label, judge, tokens) are built in ``_attributes.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from opentelemetry.util.types import AttributeValue

from .._interaction import Interaction
from .._item import DatasetItem, chunk_text
from ..metric._results import ChunkResult, MetricEvaluationResult
from ._attributes import ErrorCallback
from ._identity import document_attributes, document_id, truncate
from ._names import (
    ATTR_CHUNK_PREFIX,
    ATTR_CHUNKS_TRUNCATED,
    ATTR_NOT_RELEVANT_ID,
    ATTR_NOT_RELEVANT_INDEX,
    ATTR_NOT_RELEVANT_REASON,
    ATTR_NOT_RELEVANT_TEXT,
    CHUNK_INDEX,
    CHUNK_IS_RELEVANT,
    CHUNK_IS_UTILIZED,
    CHUNK_METADATA,
    CHUNK_REASON,
    CHUNK_TEXT,
    chunk_attribute,
)

__all__ = ["chunk_attributes", "not_relevant_attributes", "text_source"]


def chunk_attributes(
    result: MetricEvaluationResult,
    *,
    max_chunks: int,
    capture_content: bool,
    max_content_chars: int,
    text_of: Callable[[int], str | None],
    on_error: ErrorCallback,
    document_of: Callable[[int], object] = lambda i: None,
    metadata_keys: Sequence[str] = (),
) -> dict[str, AttributeValue]:
    """Per-chunk attributes ``ctxutil.chunks.{i}.*`` for the first ``max_chunks`` verdicts, plus
    ``ctxutil.chunks.truncated``.

    Always: ``.index`` (int), ``.is_relevant`` (bool), ``.is_utilized`` (bool). With ``metadata_keys``
    (content capture or not): ``.id`` and ``.metadata.{key}`` of ``document_of(index)`` (see
    :func:`document_attributes`). With ``capture_content`` only: ``.reason`` (str, when non-empty) and
    ``.text`` (``text_of(i)`` truncated to ``max_content_chars``). A field that fails is reported as
    ``ctxutil.chunks.{i}.{field}`` and only it is lost.
    """
    out: dict[str, AttributeValue] = {}
    verdicts: Sequence[ChunkResult] = ()
    try:
        verdicts = result.signals.verdicts
    except Exception as exc:
        on_error(ATTR_CHUNK_PREFIX, exc)
    shown = max(0, min(len(verdicts), max_chunks))
    for i in range(shown):
        # The usual case first, without a function per field (emission is on the worker's CPU budget).
        if capture_content or not _verdict_fields(verdicts[i], i, out):
            _each_field(out, verdicts[i], i, capture_content, max_content_chars, text_of, on_error)
        if metadata_keys:
            try:
                index = int(verdicts[i].index)
                out.update(document_attributes(i, document_of(index), metadata_keys, text_of(i)))
            except Exception as exc:
                on_error(chunk_attribute(i, CHUNK_METADATA), exc)
    out[ATTR_CHUNKS_TRUNCATED] = shown < len(verdicts)
    return out


def not_relevant_attributes(
    result: MetricEvaluationResult,
    *,
    max_chunks: int,
    capture_content: bool,
    max_content_chars: int,
    text_of: Callable[[int], str | None],
    document_of: Callable[[int], object],
    with_ids: bool,
) -> dict[str, AttributeValue]:
    """``ctxutil.chunks.not_relevant.*``: which chunks the judge found not relevant, so not counted (the
    first ``max_chunks``; an identical repeat of one is not listed again).

    ``.index`` (int[]) whenever the result has verdicts (``[]`` when every chunk was relevant); ``.id``
    (string[], ``""`` for a document without one) with ``with_ids`` when one has an id; with
    ``capture_content`` only, ``.reason`` and ``.text`` (string[], truncated to ``max_content_chars``).
    The lists are aligned. ``{}`` for a result without verdicts (an error, no chunks).
    """
    verdicts = result.signals.verdicts
    if not verdicts:
        return {}
    left_out = [v for v in verdicts if not v.is_relevant and v.duplicate_of is None][: max(0, max_chunks)]
    indices = [int(v.index) for v in left_out]
    out: dict[str, AttributeValue] = {ATTR_NOT_RELEVANT_INDEX: indices}
    if with_ids:
        ids = [document_id(document_of(i)) or "" for i in indices]
        if any(ids):
            out[ATTR_NOT_RELEVANT_ID] = ids
    if capture_content:
        out[ATTR_NOT_RELEVANT_REASON] = [truncate(str(v.reason), max_content_chars) for v in left_out]
        out[ATTR_NOT_RELEVANT_TEXT] = [_text(text_of(i), max_content_chars) or "" for i in indices]
    return out


#: ``ctxutil.chunks.{i}.index`` / ``.is_relevant`` / ``.is_utilized`` for the first chunks, made once.
_VERDICT_KEYS = [
    (
        chunk_attribute(i, CHUNK_INDEX),
        chunk_attribute(i, CHUNK_IS_RELEVANT),
        chunk_attribute(i, CHUNK_IS_UTILIZED),
    )
    for i in range(128)
]


def _verdict_fields(verdict: ChunkResult, i: int, out: dict[str, AttributeValue]) -> bool:
    """The three verdict fields of chunk ``i`` into ``out``; ``False`` (nothing added) when one is not
    valid, for :func:`_each_field` to report the one that fails."""
    try:
        index, relevant, utilized = int(verdict.index), verdict.is_relevant, verdict.is_utilized
    except Exception:
        return False
    if not isinstance(relevant, bool) or not isinstance(utilized, bool):
        return False
    if i < len(_VERDICT_KEYS):
        key_index, key_relevant, key_utilized = _VERDICT_KEYS[i]
    else:
        key_index = chunk_attribute(i, CHUNK_INDEX)
        key_relevant, key_utilized = (
            chunk_attribute(i, CHUNK_IS_RELEVANT),
            chunk_attribute(i, CHUNK_IS_UTILIZED),
        )
    out[key_index], out[key_relevant], out[key_utilized] = index, relevant, utilized
    return True


def _each_field(
    out: dict[str, AttributeValue],
    verdict: ChunkResult,
    i: int,
    capture_content: bool,
    max_content_chars: int,
    text_of: Callable[[int], str | None],
    on_error: ErrorCallback,
) -> None:
    """Chunk ``i``'s fields one by one into ``out``: one that fails is reported and only it is lost."""
    for field, get in _chunk_fields(verdict, i, capture_content, max_content_chars, text_of):
        key = chunk_attribute(i, field)
        try:
            value = get()
        except Exception as exc:
            on_error(key, exc)
            continue
        if value is not None:
            out[key] = value


def _chunk_fields(
    verdict: ChunkResult,
    i: int,
    capture_content: bool,
    max_content_chars: int,
    text_of: Callable[[int], str | None],
) -> list[tuple[str, Callable[[], AttributeValue | None]]]:
    fields: list[tuple[str, Callable[[], AttributeValue | None]]] = [
        (CHUNK_INDEX, lambda: int(verdict.index)),
        (CHUNK_IS_RELEVANT, lambda: _strict_bool(verdict.is_relevant)),
        (CHUNK_IS_UTILIZED, lambda: _strict_bool(verdict.is_utilized)),
    ]
    if capture_content:
        fields.append((CHUNK_REASON, lambda: truncate(str(verdict.reason), max_content_chars) or None))
        fields.append((CHUNK_TEXT, lambda: _text(text_of(i), max_content_chars)))
    return fields


def _strict_bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected bool, got {type(value).__name__}")
    return value


def _text(text: str | None, max_chars: int) -> str | None:
    return None if text is None else truncate(text, max_chars)


def text_source(
    result: MetricEvaluationResult, interaction: Interaction, item: DatasetItem | None
) -> Callable[[int], str | None]:
    """Chunk text by retrieval index: the item's chunks, else the interaction's documents (read with
    :func:`~ctxutil_otel._item.chunk_text`), else the breakdown (relevant chunks only)."""
    if item is not None:
        chunks = item.retrieved_content
        return lambda i: chunks[i] if 0 <= i < len(chunks) else None
    documents = interaction.documents
    breakdown = {c.index: c.chunk_text for c in result.signals.chunk_breakdown}

    def from_interaction(i: int) -> str | None:
        if 0 <= i < len(documents):
            return chunk_text(documents[i], i)
        return breakdown.get(i)

    return from_interaction
