"""Which metadata keys may become metric dimensions (``metric_dimensions``), checked once at settings time,
and which values (:func:`dimension_value`, on every capture path and at the emitter; :func:`dimension_text`
for a dimension kept as text).

A key becomes the metric attribute ``ctxutil.metadata.<key>`` and, with ``.`` and ``-`` as ``_``, the
Prometheus label ``ctxutil_metadata_<key>`` (docs/slices.md). Its values leave the process whatever
``capture_content`` says, so a key known to carry user content is refused.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable

__all__ = ["check_dimension_keys", "dimension_text", "dimension_value", "is_no_number"]

# A metric_dimensions key: part of an attribute name and, with . and - as _, of a Prometheus label.
_DIMENSION_KEY = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
# Keys whose values are user content (queries, answers, messages, documents) in the conventions capture reads
# (OpenTelemetry GenAI, OpenInference, OpenLLMetry, ours); dimension values leave without content capture.
_CONTENT_KEY = re.compile(
    r"(?:metadata\.)?(?:input\.value|output\.value|gen_ai\..*messages.*|gen_ai\.system_instructions.*"
    r"|gen_ai\.(?:prompt|completion).*|gen_ai\.retrieval\.(?:query\.text|documents).*|retrieval\.documents.*"
    r"|llm\.(?:input_messages|output_messages|prompts).*|traceloop\.entity\.(?:input|output).*"
    r"|ctxutil\.(?:query|answer).*)",
    re.IGNORECASE,
)


def is_no_number(value: object) -> bool:
    """Whether ``value`` is a NaN or infinite real number (``float("nan")``, ``numpy.nan``,
    ``numpy.float32("inf")``, a JSON ``NaN``): no dimension value, as ``None`` is none."""
    if isinstance(value, float):  # the usual case (numpy.float64 included), without the ABC check
        return not math.isfinite(value)
    return isinstance(value, numbers.Real) and not isinstance(value, int) and not math.isfinite(value)


def dimension_value(value: object) -> str | int | float | bool | None:
    """``value`` as a dimension value: a non-empty ``str``, or an ``int`` / ``float`` / ``bool`` as given
    (the emitter's limiter turns it into text); ``None`` for anything else, a NaN or infinite number
    included (a DataFrame's missing value would otherwise be the dimension ``"nan"``)."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, (bool, int)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


def dimension_text(value: object) -> str | None:
    """:func:`dimension_value` as text (a model name given as a number: ``"4"``); ``None`` when it is none
    (a NaN or infinite number included)."""
    found = dimension_value(value)
    return None if found is None else str(found)


def _prometheus_label(key: str) -> str:
    """``tenant.id`` -> ``ctxutil_metadata_tenant_id``."""
    return "ctxutil_metadata_" + key.replace(".", "_").replace("-", "_")


def check_dimension_keys(keys: Iterable[str]) -> tuple[str, ...]:
    """``keys`` without repeats, in order.

    Raises:
        ValueError: naming the key, when it is not 1-64 letters, digits, ``_``, ``.`` or ``-``; when it
            carries user content (``input.value``, ``gen_ai.*messages``, ...); or when two keys become
            the same Prometheus label (``tenant.id`` and ``tenant_id``).
    """
    labels: dict[str, str] = {}
    for key in dict.fromkeys(keys):
        if not _DIMENSION_KEY.fullmatch(key):
            raise ValueError(
                f"metadata key {key!r} must be letters, digits, '_', '.' or '-' (it becomes the metric "
                f"attribute ctxutil.metadata.<key> and a Prometheus label)"
            )
        if _CONTENT_KEY.fullmatch(key):
            raise ValueError(
                f"metadata key {key!r} carries user content (queries, answers, messages or documents); "
                f"dimension values are emitted whatever capture_content says, so metric_dimensions "
                f"refuses it (docs/slices.md)"
            )
        label = _prometheus_label(key)
        other = labels.setdefault(label, key)
        if other != key:
            raise ValueError(
                f"metadata keys {other!r} and {key!r} both become the Prometheus label {label}; "
                f"keep one of them in metric_dimensions"
            )
    return tuple(labels.values())
