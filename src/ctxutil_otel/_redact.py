"""The one redaction of secrets, applied to every string the package exports or logs.

Two kinds of secret are replaced by ``[REDACTED]``:

* **the judge's key** (and any other registered with :func:`register_secret`: the OpenAI judge registers its
  key when it is built, the evaluator the key it hands to the process worker's child): the key, and any
  run of 8 or more of its leading or trailing characters, in any letter case (servers and models echo keys
  whole, cut ``sk-abc...``, masked in the middle ``sk-abc****wxyz`` or upper-cased). A key shorter than 8
  characters is a placeholder (``none``, ``EMPTY``; no real key is): it is not registered, and the judge's
  error messages replace only it, as a whole word in its own case, so that "got none. None of" stays
  readable;
* **key lookalikes**: ``sk-...`` tokens, ``Bearer ...`` tokens, and ``api_key=`` / ``authorization:``
  values.

Where it applies: every string attribute of the evaluation span and of the log events (reasons, the
explanation, captured content and dimensions included: ``emit/_boundary.py``),
error messages of the OpenAI judge (:func:`redact_key`), and the records of this package's loggers and of
the HTTP libraries the judge uses (:func:`install_log_redaction`: a ``logging.Filter`` on those loggers).

The command line redacts more in what it prints (:func:`redact_with_urls`, on its one log handler,
``cli/_logging.py``): also the **user information and query string of any URL**, since the OpenTelemetry
SDK's exporters log their endpoint as configured (``Failed to export metrics to alice:s3cret@host:4317``,
``url: /?token=.../v1/metrics``), and the **values of the OTLP header variables**
(:class:`OtlpHeaderSecrets`: ``OTEL_EXPORTER_OTLP_HEADERS`` and its per-signal forms), since the SDK logs a
malformed header item whole (``Header format invalid! ...: x-honeycomb-team: s3cr3t``).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import unquote

from ._fork import ForkSafeLock

__all__ = [
    "KEY_WHITESPACE",
    "LOGGERS",
    "OTLP_HEADER_VARIABLES",
    "REDACTED",
    "OtlpHeaderSecrets",
    "RedactingFilter",
    "install_log_redaction",
    "may_hold_secret",
    "otlp_header_secrets",
    "redact",
    "redact_key",
    "redact_urls",
    "redact_with_urls",
    "register_secret",
    "unusable_key",
]

REDACTED = "[REDACTED]"
KEY_WHITESPACE = (
    "holds whitespace or a control character (a trailing newline from a file or `echo`?): the HTTP client "
    "refuses such a header value, so every request would fail; remove it"
)
"""The refusal of a key holding whitespace (the settings and the OpenAI judge both say it)."""


def unusable_key(key: str) -> bool:
    """``key`` holds whitespace or a control character anywhere (no API key does; a header cannot)."""
    return not key.isprintable() or any(c.isspace() for c in key)


_MIN_FRAGMENT = 8  # characters of a key that are redacted wherever they appear

# Secret-looking substrings (API keys, bearer tokens, key=value pairs).
_LOOKALIKE = re.compile(
    r"(sk-[A-Za-z0-9_\-*]{6,}|Bearer\s+[A-Za-z0-9._\-~+/=]+|(api[_-]?key|authorization)\s*[=:]\s*\S+)",
    re.IGNORECASE,
)

#: Loggers whose records are redacted: this package's and those of the HTTP stack of the openai SDK (a
#: ``logging.Filter`` acts only on records made by the logger it is attached to, not by its children, so
#: each logger that can write a request, a header or an exception text is named).
LOGGERS = (
    "ctxutil_otel",
    "ctxutil_otel.capture",
    "ctxutil_otel.emit",
    "ctxutil_otel.judges.openai",
    "ctxutil_otel.metric",
    "ctxutil_otel.serve",
    "ctxutil_otel.worker",
    "openai",
    "openai._base_client",
    "openai._response",
    "openai._legacy_response",
    "httpx",
    "httpx2",
    *(
        f"{lib}.{part}"
        for lib in ("httpcore", "httpcore2")
        for part in ("connection", "http11", "http2", "proxy", "socks")
    ),
)

_lock = ForkSafeLock()  # a forked child gets a new one


class _Secret:
    """A registered key: its pattern, and the runs any match must contain (a cheap test before the scan)."""

    __slots__ = ("anchors", "pattern", "placeholder")

    def __init__(self, secret: str) -> None:
        self.placeholder = len(secret) < _MIN_FRAGMENT
        self.anchors = (
            (secret,)
            if self.placeholder
            else (secret[:_MIN_FRAGMENT].lower(), secret[-_MIN_FRAGMENT:].lower())
        )
        self.pattern = _key_pattern(secret)

    def sub(self, text: str, lowered: str) -> str:
        haystack = text if self.placeholder else lowered
        if any(anchor in haystack for anchor in self.anchors):
            return self.pattern.sub(REDACTED, text)
        return text


_secrets: dict[str, _Secret] = {}
_registered: tuple[_Secret, ...] = ()
# Words one of which every lookalike contains (lower case): the scan runs only when one is there.
_LOOKALIKE_WORDS = ("sk-", "bearer", "api_key", "api-key", "apikey", "authorization")


def _key_pattern(secret: str) -> re.Pattern[str]:
    """One pattern for ``secret`` and every run of >= 8 of its leading or trailing characters (any case);
    a placeholder under 8 characters as a whole word in its own case."""
    if len(secret) < _MIN_FRAGMENT:
        return re.compile(rf"(?<!\w){re.escape(secret)}(?!\w)")
    # A leading run: the first 8 characters, then each further one optional in turn (greedy: the longest).
    head = re.escape(secret[:_MIN_FRAGMENT])
    rest = "".join(f"(?:{re.escape(c)}" for c in secret[_MIN_FRAGMENT:]) + ")?" * (
        len(secret) - _MIN_FRAGMENT
    )
    # A trailing run: the last 8 characters, preceded by the ones before them, each optional from the left.
    before = secret[: len(secret) - _MIN_FRAGMENT]
    lead = "(?:" * len(before) + "".join(f"{re.escape(c)})?" for c in before)
    tail = re.escape(secret[-_MIN_FRAGMENT:])
    return re.compile(f"{head}{rest}|{lead}{tail}", re.IGNORECASE)


def register_secret(secret: str | None) -> None:
    """Redact ``secret`` (and its leading or trailing runs of >= 8 characters) from everything this package
    exports or logs from now on, in this process (the log filter is installed with the first secret).
    Idempotent; ``None``, empty, or a placeholder under 8 characters does nothing (error messages of the
    OpenAI judge still cut a placeholder as a whole word: :func:`redact_key`)."""
    global _registered
    if not secret or len(secret) < _MIN_FRAGMENT or secret in _secrets:
        return  # a placeholder (``none``, ``EMPTY``) is no secret: redacting it would cut common words
    entry = _Secret(secret)
    with _lock:
        _secrets[secret] = entry
        # Longer keys first: a short placeholder must not cut a long key into unredacted halves.
        _registered = tuple(e for _, e in sorted(_secrets.items(), key=lambda kv: -len(kv[0])))
    install_log_redaction()


def redact_key(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` (as :func:`register_secret` describes) replaced by ``[REDACTED]``."""
    if not secret:
        return text
    entry = _secrets.get(secret) or _Secret(secret)
    return entry.sub(text, text.lower())


def may_hold_secret(text: str) -> bool:
    """Whether :func:`redact` could change ``text`` (a cheap test: one lower-casing and substring searches);
    ``False`` means it would return ``text`` unchanged."""
    lowered = text.lower()
    for entry in _registered:
        haystack = text if entry.placeholder else lowered
        if any(anchor in haystack for anchor in entry.anchors):
            return True
    return any(word in lowered for word in _LOOKALIKE_WORDS)


def redact(text: str) -> str:
    """``text`` with every registered secret and every key lookalike replaced by ``[REDACTED]``."""
    lowered = text.lower()
    for entry in _registered:
        text = entry.sub(text, lowered)
    if any(word in lowered for word in _LOOKALIKE_WORDS):
        text = _LOOKALIKE.sub(REDACTED, text)
    return text


# A URL's user information, with or without the scheme before it (``scheme://`` kept): the gRPC exporter
# names its endpoint as ``user:password@host:port``. Anything before an ``@`` that starts a host name, so
# the local part of an e-mail address too.
_USERINFO = re.compile(r"((?:[A-Za-z][A-Za-z0-9+.\-]*://)?)[^\s/?#@'\"<>()\[\]]+@(?=[A-Za-z0-9\[])")
# A URL's query string: a ``?`` right after a path, host or port character and followed by one (never a
# question mark ending a sentence), up to whitespace, a quote, a bracket or a fragment.
_QUERY = re.compile(r"(?<=[\w/\]:.%\-])\?(?=[^\s'\"<>()\[\]?])[^\s'\"<>()\[\]#]*")


def redact_urls(text: str) -> str:
    """``text`` with the user information of every URL (``user:password@`` -> ``[REDACTED]@``, its scheme
    kept) and every query string (``?token=...`` -> ``?[REDACTED]``) replaced."""
    if "@" in text:
        text = _USERINFO.sub(rf"\1{REDACTED}@", text)
    if "?" in text:
        text = _QUERY.sub(f"?{REDACTED}", text)
    return text


def redact_with_urls(text: str) -> str:
    """:func:`redact`, then :func:`redact_urls`: what the command line prints."""
    return redact_urls(redact(text))


#: The variables whose values are the OTLP exporters' headers (credentials, as a rule).
OTLP_HEADER_VARIABLES = (
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
    "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
)
_HEADER_SEPARATOR = re.compile(r"[=:\s]")


def otlp_header_secrets(raw: str) -> set[str]:
    """The strings of one header variable's value ``raw`` to redact, parsed leniently (a malformed value is
    where a secret gets logged): each comma-separated item whole, and its value (after the first ``=``,
    ``:`` or whitespace; percent-decoded too). A value under 8 characters alone is no secret (as a key:
    ``true``, ``1``; redacting it would cut common words); its item whole still is."""
    found: set[str] = set()
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        found.add(item)
        parts = _HEADER_SEPARATOR.split(item, maxsplit=1)
        value = parts[-1].strip()
        for candidate in (value, unquote(value).strip()):
            if len(candidate) >= _MIN_FRAGMENT:
                found.add(candidate)
    return found


class OtlpHeaderSecrets:
    """Replaces, in any letter case, every string :func:`otlp_header_secrets` finds in the OTLP header
    variables of ``environ`` (default ``os.environ``, read at each call: one pattern per set of values)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        # The values read last and their pattern, replaced as one (records may come from several threads).
        self._state: tuple[tuple[str, ...], re.Pattern[str] | None] = ((), None)

    def _current(self) -> re.Pattern[str] | None:
        values = tuple(self._environ.get(name, "") for name in OTLP_HEADER_VARIABLES)
        seen, pattern = self._state
        if values != seen:
            secrets: set[str] = set()
            for raw in values:
                secrets |= otlp_header_secrets(raw)
            longest_first = sorted(secrets, key=lambda secret: (-len(secret), secret))
            pattern = re.compile("|".join(map(re.escape, longest_first)), re.IGNORECASE) if secrets else None
            self._state = (values, pattern)
        return pattern

    def __call__(self, text: str) -> str:
        pattern = self._current()
        return text if pattern is None else pattern.sub(REDACTED, text)


class RedactingFilter(logging.Filter):
    """Rewrites a record's message (arguments merged in) and exception text through ``clean`` (default
    :func:`redact`) when they hold a secret; never drops a record, and leaves a record holding none as it
    is. An exception that holds one is kept only as redacted text (``exc_text``), which handlers print as
    the traceback."""

    def __init__(self, clean: Callable[[str], str] = redact) -> None:
        super().__init__()
        self._clean = clean

    def filter(self, record: logging.LogRecord) -> bool:
        clean = self._clean
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its message: leave it to the handler
            return True
        cleaned = clean(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        if record.exc_info and record.exc_info[0] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            cleaned = clean(text)
            if cleaned != text:
                record.exc_text, record.exc_info = cleaned, None
        elif record.exc_text:
            record.exc_text = clean(record.exc_text)
        return True


_FILTER = RedactingFilter()
_installed: set[str] = set()


def install_log_redaction(names: Iterable[str] = LOGGERS) -> None:
    """Attach the one :class:`RedactingFilter` to each logger of ``names`` (once per logger)."""
    with _lock:
        for name in names:
            if name not in _installed:
                logging.getLogger(name).addFilter(_FILTER)
                _installed.add(name)
