"""The unit of evaluation: one RAG interaction (query, retrieved chunks, generated answer)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "MAX_CHUNKS",
    "ChunksReadError",
    "DatasetItem",
    "TooManyChunksError",
    "chunk_list",
    "chunk_text",
    "document_sequence",
    "is_chunk_iterable",
    "is_document",
    "mapping_text",
    "read_chunks",
]

_TEXT_KEYS = ("page_content", "content", "text")

#: The most chunks one interaction may have (``retrieved_content``): more is refused as invalid input, on
#: every path, without reading past ``MAX_CHUNKS + 1`` (an endless iterable included). Generous: a judge's
#: cost grows with the count (the semantic judge: about 1.5 s CPU at 10,000 short chunks, docs/judges.md).
MAX_CHUNKS = 10_000


def is_document(value: object) -> bool:
    """Whether ``value`` reads as a LangChain ``Document``: a ``str`` attribute ``page_content``."""
    return isinstance(getattr(value, "page_content", None), str)


def document_sequence(value: object) -> list[object] | None:
    """``value`` as a list when it is a non-empty sequence (not text) made only of :func:`is_document`
    items, else ``None``: so ordinary strings and lists of them never pass for documents."""
    if (
        isinstance(value, Sequence)
        and not isinstance(value, (str, bytes))
        and value
        and all(is_document(item) for item in value)
    ):
        return list(value)
    return None


def mapping_text(mapping: Mapping[Any, object]) -> str | None:
    """The first ``str`` under ``page_content``, ``content`` or ``text`` in ``mapping``; ``None`` if none."""
    for key in _TEXT_KEYS:
        value = mapping.get(key)
        if isinstance(value, str):
            return value
    return None


class TooManyChunksError(ValueError):
    """``retrieved_content`` holds more than :data:`MAX_CHUNKS` chunks."""

    def __init__(self) -> None:
        super().__init__(f"must hold at most {MAX_CHUNKS:,} chunks, got more")


class ChunksReadError(ValueError):
    """Iterating ``retrieved_content`` raised: ``reading the chunks raised <class>``, never the error's
    message, which may quote a chunk (the error chained as ``__cause__``)."""


def is_chunk_iterable(value: object) -> TypeGuard[Iterable[object]]:
    """Whether ``value`` has the shape of a list of chunks (an iterable that is not ``str``, ``bytes`` or a
    mapping), without reading it."""
    return isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))


def read_chunks(value: Iterable[object]) -> list[object]:
    """The first ``MAX_CHUNKS + 1`` items of ``value`` (never more: an endless iterable returns at once).

    Raises:
        ChunksReadError: (a ``ValueError``) for anything the iterable raises while read, its own
            ``ValueError`` included: the caller's error, not a verdict on the shape.
    """
    try:
        return list(itertools.islice(value, MAX_CHUNKS + 1))
    except Exception as exc:  # the iterable's own error (a generator, an __iter__ that raises)
        raise ChunksReadError(f"reading the chunks raised {type(exc).__name__}") from exc


def chunk_list(value: object) -> list[object]:
    """``retrieved_content`` as a list of chunks, not yet read: the one shape check of every path
    (:class:`DatasetItem`, ``Evaluator.record_interaction`` and both workers). Accepts a list, a tuple
    or any other iterable of chunks (a generator is consumed), of at most :data:`MAX_CHUNKS` chunks: no
    more than ``MAX_CHUNKS + 1`` are ever read from it.

    Raises:
        ValueError: ``must be a list of chunks ..., got <type>`` for ``None``, a ``str`` or ``bytes``
            (one text is not a list of chunks), a mapping (one chunk), or anything not iterable.
        ChunksReadError: (a ``ValueError``) ``reading the chunks raised <class>`` when iterating raises.
        TooManyChunksError: (a ``ValueError``) ``must hold at most 10,000 chunks, got more``.
    """
    if not is_chunk_iterable(value):
        raise ValueError(
            f"must be a list of chunks (strings, LangChain Documents or mappings), got {type(value).__name__}"
        )
    chunks = read_chunks(value)
    if len(chunks) > MAX_CHUNKS:
        raise TooManyChunksError
    return chunks


class _ChunkError(ValueError):
    """A chunk that is not one: its message is ours (names the index and the type, never the text)."""


def chunk_text(chunk: object, index: int) -> str:
    """Return the text of one retrieved chunk.

    Accepts a ``str``, anything with a ``str`` attribute ``page_content`` (LangChain ``Document``),
    or a mapping with a ``str`` under ``page_content``, ``content`` or ``text`` (first found wins).

    Raises:
        ValueError: naming ``retrieved_content[index]`` and the type received, for anything else
            (``None``, numbers, mappings without a text key, non-string text); and for a chunk whose
            reading raises (a mapping whose ``get``, ``__getitem__`` or iteration raises, a
            ``page_content`` property that raises): ``reading the chunk raised <class>``, never its
            message, which may quote the chunk (the error chained as ``__cause__``).
    """
    if isinstance(chunk, str):
        return str.__str__(chunk)  # a str subclass as a plain str (its own methods never called)
    try:
        return _read_chunk(chunk, index)
    except _ChunkError:
        raise
    except Exception as exc:  # the chunk's own methods raised: bad input, not our error
        problem = f"reading the chunk raised {type(exc).__name__}"
        raise _ChunkError(f"retrieved_content[{index}]: {problem}") from exc


def _read_chunk(chunk: object, index: int) -> str:
    if isinstance(chunk, Mapping):
        if (text := mapping_text(chunk)) is not None:
            return text
        # Counted, never quoted: a mapping's keys are the user's (a chunk keyed by its text: {text: score}).
        raise _ChunkError(
            f"retrieved_content[{index}]: {type(chunk).__name__} with {_keys(len(chunk))} and no string "
            f"'page_content', 'content' or 'text' key"
        )
    page_content = getattr(chunk, "page_content", None)
    if isinstance(page_content, str):
        return page_content
    raise _ChunkError(
        f"retrieved_content[{index}]: expected str, LangChain Document or a mapping with "
        f"'page_content'/'content'/'text', got {type(chunk).__name__}"
    )


def _keys(count: int) -> str:
    return "1 key" if count == 1 else f"{count:,} keys"


class DatasetItem(BaseModel):
    """One RAG interaction to evaluate.

    Attributes:
        query: The user's question; must contain a non-whitespace character.
        actual_output: The generated answer (may be empty: an empty answer scores 0.0 when relevant
            chunks were retrieved).
        retrieved_content: The retrieved chunks in retrieval order, normalised to a list of ``str``.
            Accepts ``str``, LangChain ``Document`` and mappings (see :func:`chunk_text`); at most
            :data:`MAX_CHUNKS` (10,000) of them.
        id: An optional identifier carried through to the result.
        metadata: Free-form data carried through to the result; never emitted as telemetry.

    Raises:
        pydantic.ValidationError: for a missing or blank ``query``, a non-string ``actual_output``, a
            chunk of an unsupported type or whose reading raises, chunks whose iteration raises
            (``reading the chunks raised <class>``), or more than :data:`MAX_CHUNKS` chunks;
            the message names the field and the chunk index.
    """

    model_config = ConfigDict(frozen=True)

    query: str
    actual_output: str
    retrieved_content: list[str]
    id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query must not be blank")
        return value

    @field_validator("retrieved_content", mode="before")
    @classmethod
    def _normalise_chunks(cls, value: object) -> list[str]:
        return [chunk_text(chunk, i) for i, chunk in enumerate(chunk_list(value))]
