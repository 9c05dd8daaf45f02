"""The span processor: evaluate RAG turns found in finished OpenTelemetry spans.

* :class:`UtilizationSpanProcessor`: add it to a ``TracerProvider`` (or feed it from an OTLP receiver).
* :func:`read_part`: one finished span's attributes -> :class:`Retrieval`, :class:`Generation`, the
  :data:`CHAIN` marker or ``None``, whichever convention wrote them (OpenInference, OpenTelemetry GenAI,
  OpenLLMetry).
* :class:`SpanLike`: what the processor reads from a span (``ReadableSpan`` satisfies it).
"""

from __future__ import annotations

from ._model import CHAIN, Chain, Chunk, Generation, Retrieval, SpanLike
from ._processor import DEFAULT_MAX_BUFFERED_BYTES, MARKER_ATTRIBUTES, UtilizationSpanProcessor, read_part

__all__ = [
    "CHAIN",
    "DEFAULT_MAX_BUFFERED_BYTES",
    "MARKER_ATTRIBUTES",
    "Chain",
    "Chunk",
    "Generation",
    "Retrieval",
    "SpanLike",
    "UtilizationSpanProcessor",
    "read_part",
]
