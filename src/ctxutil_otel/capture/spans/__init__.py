"""The span processor: evaluate RAG turns found in finished OpenTelemetry spans.

* :class:`UtilizationSpanProcessor`: add it to a ``TracerProvider`` (or feed it from an OTLP receiver).
* :class:`SpanLike`: what the processor reads from a span (``ReadableSpan`` satisfies it; an OTLP
  receiver may build anything with the same read-only properties).
* :data:`DEFAULT_MAX_BUFFERED_BYTES`: the default bound on buffered text.

Which conventions and instrumentations are read, and how spans pair into turns: docs/span-conventions.md.
The readers (``_openinference``, ``_genai``, ``_openllmetry``), the routing between them (``_route``) and
the trace assembly (``_assembly``) are internal.
"""

from __future__ import annotations

from ._model import SpanLike
from ._processor import DEFAULT_MAX_BUFFERED_BYTES, UtilizationSpanProcessor

__all__ = ["DEFAULT_MAX_BUFFERED_BYTES", "SpanLike", "UtilizationSpanProcessor"]
