"""The emission boundary: what every attribute set of the evaluation span, the log events and the per-result
metrics passes on its way to an exporter.

* every string (and string in a sequence) goes through the one redaction (``ctxutil_otel._redact``): the
  judge's key and key lookalikes become ``[REDACTED]``, in reasons, explanations, captured content and
  dimension values alike;
* an integer outside the signed 64-bit range OTLP encodes (a chunk's metadata value, a count) is left
  out: one such value fails the encoding of the whole export batch, the application's own spans or
  metrics in it included;
* a lone surrogate in a string (``json.loads`` of ``"\\ud800"``, ``os.fsdecode``'s surrogateescape: captured
  content, chunk metadata) becomes U+FFFD: the OTLP encoder cannot write it as UTF-8 and logged an error
  traceback for each such attribute on every export, leaving the attribute out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from opentelemetry.util.types import AttributeValue

from .._redact import may_hold_secret, redact

__all__ = ["INT64_MAX", "INT64_MIN", "exportable"]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _encodable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (unchanged, uncopied, when it has none)."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def _fits(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or INT64_MIN <= value <= INT64_MAX


def exportable(attributes: Mapping[str, AttributeValue]) -> dict[str, AttributeValue]:
    """A copy of ``attributes`` that every OTLP exporter can encode and that holds no secret: strings
    redacted and lone surrogates replaced by U+FFFD, integers out of the 64-bit range (alone or in a
    sequence) left out. Keys are ours, kept."""
    out: dict[str, AttributeValue] = {}
    texts: list[str] = []
    for key, value in attributes.items():
        kind = type(value)
        if kind is str:
            texts.append(value)  # type: ignore[arg-type]  # a str, by its type
        elif kind is int:
            if not INT64_MIN <= value <= INT64_MAX:  # type: ignore[operator]  # an int, by its type
                continue
        elif isinstance(value, (tuple, list)):
            if not all(_fits(v) for v in value):
                continue
            texts.extend(v for v in value if isinstance(v, str))
        elif not _fits(value):  # an int subclass
            continue
        out[key] = value
    if texts:
        _clean_strings(out, "\n".join(texts))
    return out


def _clean_strings(out: dict[str, AttributeValue], joined: str) -> None:
    """Redact and make encodable the strings of ``out`` in place, when ``joined`` (all of them) says it is
    needed: one test over all the strings, as the usual attribute set holds no secret and no surrogate."""
    secret = may_hold_secret(joined)
    if not secret and (joined.isascii() or not _SURROGATE.search(joined)):
        return
    for key, value in out.items():
        if isinstance(value, str):
            out[key] = _clean(value, secret)
        elif isinstance(value, (tuple, list)):
            out[key] = [_clean(v, secret) if isinstance(v, str) else v for v in value]


def _clean(text: str, secret: bool) -> str:
    return _encodable(redact(text) if secret else text)
