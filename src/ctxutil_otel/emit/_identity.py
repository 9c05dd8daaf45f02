"""Which document and which application a result is about: per-chunk document ids and metadata, and the
evaluated service named by the evaluated spans' Resource (docs/telemetry.md). Also :func:`truncate`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from opentelemetry.util.types import AttributeValue

from .._dimension_keys import dimension_value
from .._interaction import Interaction
from ._names import (
    CHUNK_ID,
    CHUNK_LABEL_MAX_CHARS,
    CHUNK_METADATA,
    EVALUATED_SERVICE_FROM_RESOURCE,
    chunk_attribute,
)

__all__ = [
    "document_attributes",
    "document_id",
    "document_source",
    "evaluated_service_attributes",
    "truncate",
]


def truncate(text: str, max_chars: int) -> str:
    """Return ``text`` cut to at most ``max_chars`` characters, the last one ``…`` when cut."""
    if len(text) <= max_chars:
        return text
    return text[: max_chars - 1] + "…" if max_chars > 1 else text[:max_chars]


def document_id(document: object) -> str | None:
    """The id of a captured document (``Document.id``, a span reader's chunk's ``id``, a mapping's
    ``"id"``), as a string cut to :data:`CHUNK_LABEL_MAX_CHARS` (an ``int`` in decimal); ``None`` when it
    has none, or when reading it raises (the user's object: its error, which may quote its text, is not
    ours to report)."""
    try:
        doc_id = document.get("id") if isinstance(document, Mapping) else getattr(document, "id", None)
        if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
            return None
        text = str.__str__(doc_id) if isinstance(doc_id, str) else int.__repr__(doc_id)
    except BaseException:  # a property, a mapping's get that raises (even SystemExit: on the worker): no id
        return None
    return truncate(text, CHUNK_LABEL_MAX_CHARS) if text else None


def document_attributes(
    i: int, document: object, metadata_keys: Sequence[str], text: str | None
) -> dict[str, AttributeValue]:
    """``ctxutil.chunks.{i}.id`` and ``ctxutil.chunks.{i}.metadata.{key}`` of one retrieved document.

    ``document`` is what capture holds: a LangChain ``Document`` (``id``, ``metadata``), a span reader's
    chunk (the same attributes) or a mapping (``"id"``, ``"metadata"``); anything else (a plain string)
    has neither. The id is a string (an ``int`` id is written in decimal), cut to
    :data:`CHUNK_LABEL_MAX_CHARS`; a metadata value is kept when it is a ``str`` (cut the same way), ``bool``,
    ``int`` or finite ``float`` and is not the chunk's ``text`` itself, as the plain Python type (a
    subclass's own methods never called); other values are left out, as are an id or metadata whose
    reading raises.
    """
    out: dict[str, AttributeValue] = {}
    doc_id = document_id(document)
    if doc_id is not None:
        out[chunk_attribute(i, CHUNK_ID)] = doc_id
    if not metadata_keys:
        return out
    try:
        metadata = (
            document.get("metadata") if isinstance(document, Mapping) else getattr(document, "metadata", None)
        )
        if isinstance(metadata, Mapping):
            for key in metadata_keys:
                value = _metadata_value(metadata.get(key), text)
                if value is not None:
                    out[f"{chunk_attribute(i, CHUNK_METADATA)}.{key}"] = value
    except BaseException:  # the user's mapping raised reading it (any class: the worker must go on): what
        # was read is kept, no more
        pass
    return out


def _metadata_value(value: object, text: str | None) -> AttributeValue | None:
    """A chunk metadata value as a dimension value is taken (:func:`dimension_value`: the plain ``str``,
    ``bool``, ``int`` or finite ``float``, numpy's numbers included), a string cut to
    :data:`CHUNK_LABEL_MAX_CHARS`; ``None`` for the chunk's text itself and what gives no dimension."""
    found = dimension_value(value)
    if isinstance(found, str):
        return None if found == text else truncate(found, CHUNK_LABEL_MAX_CHARS)
    return found


def evaluated_service_attributes(interaction: Interaction) -> dict[str, AttributeValue]:
    """``ctxutil.evaluated.service.name`` / ``.namespace`` / ``ctxutil.evaluated.deployment.environment.name``
    from the interaction's ``service`` (the sender's Resource); ``{}`` when unknown. The emitter cleans and
    cuts the values to ``dimension_max_chars`` and bounds how many distinct identities it labels
    (``CardinalityLimiter.bound_group``)."""
    service = getattr(interaction, "service", None)
    if not isinstance(service, Mapping):
        return {}
    out: dict[str, AttributeValue] = {}
    for key, name in EVALUATED_SERVICE_FROM_RESOURCE.items():
        value = service.get(key)
        if isinstance(value, str) and value and name not in out:
            out[name] = value
    return out


def document_source(interaction: Interaction) -> Callable[[int], object]:
    """The captured document at a retrieval index (``None`` out of range): ids and metadata live there
    (the validated item keeps only text)."""
    documents = interaction.documents

    def document_of(i: int) -> object:
        return documents[i] if 0 <= i < len(documents) else None

    return document_of
