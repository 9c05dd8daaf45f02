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
import sys
from collections.abc import Iterable

from ._warn_once import warn_once

__all__ = ["check_dimension_keys", "dimension_text", "dimension_value", "is_no_number", "metadata_dimension"]


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
    """``value`` as a dimension value: a non-empty ``str``, or an ``int`` / ``float`` / ``bool`` (the
    emitter's limiter turns it into text), always as the plain built-in type (a subclass's own methods,
    its ``__str__`` included, never run again: the emitter formats the value on the worker); any other
    integer (``numbers.Integral``: ``numpy.int64``, ``numpy.int32``) as an ``int``, any other real number
    (``numbers.Real``: ``numpy.float32``, ``fractions.Fraction``) as a ``float``, ``numpy.bool_`` as a
    ``bool``. ``None`` for anything else, a NaN or infinite number included (a DataFrame's missing value
    would otherwise be the dimension ``"nan"``)."""
    if isinstance(value, str):
        return str.__str__(value) or None
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        number = float.__float__(value)
        return number if math.isfinite(number) else None
    if _is_numpy_bool(value):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _is_numpy_bool(value: object) -> bool:
    """Whether ``value`` is ``numpy.bool_`` (registered with no ``numbers`` ABC), without importing numpy:
    when numpy is not imported, no value is one of its scalars."""
    numpy = sys.modules.get("numpy")
    numpy_bool = getattr(numpy, "bool_", None)
    return isinstance(numpy_bool, type) and isinstance(value, numpy_bool)


def metadata_dimension(key: str, value: object) -> str | int | float | bool | None:
    """:func:`dimension_value` of the ``metric_dimensions`` ``key``'s ``value``; a value present of a type
    that gives no dimension (a list, a dict, a ``Decimal``, a ``datetime``) logs one WARNING per key and
    process, naming the key and the type (never the value), so a dimension is not silently missing.
    ``None``, ``""`` and a NaN or infinite number are no value: nothing logged."""
    found = dimension_value(value)
    if found is None and value is not None and not isinstance(value, str) and not is_no_number(value):
        _warn_once(key, type(value).__name__)
    return found


def _warn_once(key: str, type_name: str) -> None:
    warn_once(
        f"metric_dimensions:{key}",
        "ctxutil: metric_dimensions key %r has a value of type %s, which gives no dimension (strings, "
        "numbers and booleans do): results carry no ctxutil.metadata.%s for it (logged once per key)",
        key,
        type_name,
        key,
    )


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
