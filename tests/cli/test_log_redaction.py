"""What the command line prints of log records is redacted: keys, and the user information and query
string of any URL, from every logger, the OpenTelemetry SDK's exporters included (``cli/_logging.py``).

The SDK's exporters log a failed export naming the endpoint as configured; the demo and serve print those
lines on stderr. The real command runs in tests/cli/test_demo_exit.py and tests/serve/test_cli.py; here
the real OTLP/HTTP exporter, given time to retry (its retry line is the one that names the URL), runs in a
fresh interpreter with the CLI's logging installed as ``main`` installs it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxutil_otel._redact import redact_urls, redact_with_urls
from tests.support.env import environ_without_settings
from tests.support.net import free_port

_EXPORT = """
import logging, sys
from ctxutil_otel.cli._logging import install_cli_logging
assert install_cli_logging()
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
exporter = OTLPSpanExporter(endpoint=sys.argv[1], timeout=5)
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
provider.get_tracer("t").start_span("s").end()
quiet = logging.getLogger("not.propagating")
quiet.propagate = False  # no handler reached: printed by logging.lastResort, ours too
quiet.warning("lost export to %s", sys.argv[1])
"""


def test_the_http_exporters_retry_line_is_printed_without_the_credentials() -> None:
    url = f"http://alice:s3cretPW@127.0.0.1:{free_port()}/v1/traces?token=abc123"
    proc = subprocess.run(
        [sys.executable, "-c", _EXPORT, url],
        capture_output=True,
        text=True,
        env=environ_without_settings(),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Transient error" in proc.stderr and "/v1/traces?[REDACTED]" in proc.stderr, proc.stderr
    assert "lost export to http://[REDACTED]@127.0.0.1:" in proc.stderr, proc.stderr
    for secret in ("alice", "s3cretPW", "abc123"):
        assert secret not in proc.stderr + proc.stdout


@pytest.mark.parametrize(
    ("line", "printed"),
    [
        (
            "Failed to export metrics to alice:s3cretPW@127.0.0.1:4317, error code: StatusCode.UNAVAILABLE",
            "Failed to export metrics to [REDACTED]@127.0.0.1:4317, error code: StatusCode.UNAVAILABLE",
        ),
        (
            "Max retries exceeded with url: /?token=abc123/v1/metrics (Caused by NewConnectionError(",
            "Max retries exceeded with url: /?[REDACTED] (Caused by NewConnectionError(",
        ),
        ("to https://tok3n@[::1]:4318/v1/logs#f", "to https://[REDACTED]@[::1]:4318/v1/logs#f"),
        ("api_key=sk-abcdefghijklmnop at http://h/x?a=1", "[REDACTED] at http://h/x?[REDACTED]"),
        # Prose is left alone: a question mark ending a sentence, a decorator in a traceback.
        ("Is the collector up? Retry later (why?).", "Is the collector up? Retry later (why?)."),
        ("    @property", "    @property"),
    ],
)
def test_what_is_redacted_and_what_is_not(line: str, printed: str) -> None:
    assert redact_with_urls(line) == printed
    assert redact_urls(printed) == printed  # idempotent: a redacted line stays as it is
