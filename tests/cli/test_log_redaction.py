"""What the command line prints of log records is redacted: keys, and the user information and query
string of any URL, from every logger, the OpenTelemetry SDK's exporters included (``cli/_logging.py``).

The SDK's exporters log a failed export naming the endpoint as configured; the demo and serve print those
lines on stderr. The real command runs in tests/cli/test_demo_exit.py and tests/serve/test_cli.py; here
the real OTLP/HTTP exporter, given time to retry (its retry line is the one that names the URL), runs in a
fresh interpreter with the CLI's logging installed as ``main`` installs it.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from ctxutil_otel._redact import OtlpHeaderSecrets, otlp_header_secrets, redact_urls, redact_with_urls
from tests.support.env import environ_without_settings
from tests.support.net import free_port
from tests.support.otlp_receiver import OTLPReceiver

from .conftest import run_demo

SECRET = "s3cr3tT0kenValue"
# Header variables the SDK finds malformed (it logs the item whole, secret and all): the forms users copy
# from vendors' docs (``name: value``, ``name value``), per signal too.
MALFORMED_HEADERS = [
    ("OTEL_EXPORTER_OTLP_HEADERS", f"x-honeycomb-team: {SECRET}"),
    ("OTEL_EXPORTER_OTLP_HEADERS", f"signoz-access-token:{SECRET}"),
    ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"x-ok=fine, dd-api-key {SECRET}"),
]

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


@pytest.mark.parametrize(("variable", "value"), MALFORMED_HEADERS)
def test_demo_prints_a_malformed_header_variable_without_its_secret(variable: str, value: str) -> None:
    with OTLPReceiver() as receiver:
        proc = run_demo(
            "--limit",
            "1",
            "--quiet",
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.grpc_endpoint, variable: value},
        )
    assert proc.returncode == 0, proc.stderr
    assert "Header format invalid!" in proc.stderr and f"occurrences: {'[REDACTED]'}" in proc.stderr, (
        proc.stderr
    )
    assert SECRET.lower() not in (proc.stderr + proc.stdout).lower()


def test_serve_prints_a_malformed_header_variable_without_its_secret() -> None:
    env = environ_without_settings()
    env.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
            "OTEL_EXPORTER_OTLP_HEADERS": f"x-honeycomb-team: {SECRET}",
            "OTEL_EXPORTER_OTLP_LOGS_HEADERS": f"authorization=Bearer%20{SECRET}x, x-tenant {SECRET}y",
            "CTXUTIL_SHUTDOWN_TIMEOUT_S": "2",
        }
    )
    popen = subprocess.Popen(
        [sys.executable, "-m", "ctxutil_otel", "serve", "--grpc-port", "0", "--http-port", str(free_port())],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert popen.stderr is not None
        lines = []
        for line in popen.stderr:  # the header lines come first: the exporters are built before listening
            lines.append(line)
            if "listening" in line:
                break
        popen.send_signal(signal.SIGTERM)
        _, rest = popen.communicate(timeout=60)
    finally:
        if popen.poll() is None:
            popen.kill()
            popen.wait(10)
    output = "".join(lines) + rest
    assert popen.returncode == 0, output
    assert output.count("Header format invalid!") >= 3, output
    assert "stopped;" in output
    assert SECRET.lower() not in output.lower()


@pytest.mark.parametrize(
    ("raw", "found"),
    [
        ("x-honeycomb-team: abcdefgh12", {"x-honeycomb-team: abcdefgh12", "abcdefgh12"}),
        (" a=b , dd-api-key  abcdefgh12 ,", {"a=b", "dd-api-key  abcdefgh12", "abcdefgh12"}),
        (
            "authorization=Bearer%20tok3n-value",
            {"authorization=Bearer%20tok3n-value", "Bearer%20tok3n-value", "Bearer tok3n-value"},
        ),
        ("lonesecretvalue", {"lonesecretvalue"}),  # no separator: the item is the value
        ("", set()),
    ],
)
def test_header_variables_are_parsed_leniently(raw: str, found: set[str]) -> None:
    assert otlp_header_secrets(raw) == found


def test_header_values_are_redacted_in_any_case_and_read_at_each_record() -> None:
    environ = {"OTEL_EXPORTER_OTLP_METRICS_HEADERS": "x-key: abcdefgh12, x-flag=true"}
    redact_headers = OtlpHeaderSecrets(environ)
    assert redact_headers("got ABCDEFGH12 and true; x-flag=true") == "got [REDACTED] and true; [REDACTED]"
    environ["OTEL_EXPORTER_OTLP_METRICS_HEADERS"] = "x-key: zyxwvuts98"
    assert redact_headers("abcdefgh12 zyxwvuts98") == "abcdefgh12 [REDACTED]"
