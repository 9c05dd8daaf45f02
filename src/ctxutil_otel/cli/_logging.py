"""The command line's log handler: what every command prints of Python's log records.

One handler on the root logger, installed by ``main`` when logging is not configured yet (as in every
``ctxutil-otel`` process): WARNING and above from every logger, the OpenTelemetry SDK's exporters included,
written to stderr as the message alone (as Python prints records when nothing is configured), each record
first redacted by :func:`~ctxutil_otel._redact.redact_with_urls`: keys and key lookalikes, and the user
information and query string of any URL. The SDK's exporters log their endpoint as configured
(``Failed to export metrics to alice:s3cret@127.0.0.1:4317``, ``url: /?token=.../v1/metrics``), and the
demo's and serve's exporters send to ``OTEL_EXPORTER_OTLP_ENDPOINT``. The handler is also Python's
``logging.lastResort``, so a logger that does not propagate to the root (the SDK has one) is redacted too.
"""

from __future__ import annotations

import logging
import sys

from .._redact import RedactingFilter, redact_with_urls

__all__ = ["install_cli_logging"]


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
    handler.addFilter(RedactingFilter(redact_with_urls))
    root.addHandler(handler)
    logging.lastResort = handler
    return True
