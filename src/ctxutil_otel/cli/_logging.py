"""The command line's log handler: what every command prints of Python's log records.

One handler on the root logger, installed by ``main`` when logging is not configured yet (as in every
``ctxutil-otel`` process): WARNING and above from every logger, the OpenTelemetry SDK's exporters included,
written to stderr as the message alone (as Python prints records when nothing is configured), each record
first redacted: the values of the OTLP header variables (``OTEL_EXPORTER_OTLP_HEADERS`` and its per-signal
forms; :class:`~ctxutil_otel._redact.OtlpHeaderSecrets`), since the SDK logs a malformed header item whole
(``Header format invalid! ...: x-honeycomb-team: s3cr3t``), then
:func:`~ctxutil_otel._redact.redact_with_urls`: keys and key lookalikes, and the user information and query
string of any URL. The SDK's exporters log their endpoint as configured
(``Failed to export metrics to alice:s3cret@127.0.0.1:4317``, ``url: /?token=.../v1/metrics``), and the
demo's and serve's exporters send to ``OTEL_EXPORTER_OTLP_ENDPOINT``. The handler is also Python's
``logging.lastResort``, so a logger that does not propagate to the root (the SDK has one) is redacted too.
"""

from __future__ import annotations

import logging
import sys

from .._redact import OtlpHeaderSecrets, RedactingFilter, redact_with_urls

__all__ = ["install_cli_logging"]


class _CliRedaction:
    """What the handler prints of a record: the OTLP header values, then keys and URLs, redacted."""

    def __init__(self) -> None:
        self._headers = OtlpHeaderSecrets()

    def __call__(self, text: str) -> str:
        return redact_with_urls(self._headers(text))


class _StderrHandler(logging.Handler):
    """Writes to ``sys.stderr`` as it is at each record (as ``logging.lastResort`` does)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:  # a closed or broken stderr: logging's own report, never the caller's error
            self.handleError(record)


def install_cli_logging() -> bool:
    """Install the handler (see the module docstring) unless the root logger has a handler already (logging
    configured by whoever runs ``main``: a test, an embedding program); once per process. Returns whether
    it is installed now."""
    root = logging.getLogger()
    if any(isinstance(handler, _StderrHandler) for handler in root.handlers):
        return True
    if root.handlers:
        return False
    handler = _StderrHandler(logging.WARNING)
    handler.addFilter(RedactingFilter(_CliRedaction()))
    root.addHandler(handler)
    logging.lastResort = handler
    return True
