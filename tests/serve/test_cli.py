"""``ctxutil-otel serve`` as a real process: receives an export, and on SIGTERM stops accepting, evaluates
what it received, exports the results to the second OTLP receiver, and exits 0. Option errors exit 2."""

from __future__ import annotations

import http.client
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from ctxutil_otel import Settings
from ctxutil_otel.cli import main
from tests.support.env import environ_without_settings
from tests.support.net import free_port
from tests.support.otlp_receiver import OTLPReceiver, attributes_of
from tests.support.refusing_otlp import refusing_otlp_http

from .conftest import record_rag_trace

TOKEN = "cli-t0ken-0123456789"


class Process:
    """The CLI in a subprocess; stderr lines collected by a reader thread."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "ctxutil_otel", "serve", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            self.stderr.append(line)
            self.lines.put(line)

    def wait_for_line(self, needle: str, timeout_s: float = 60.0) -> str:
        while True:
            line = self.lines.get(timeout=timeout_s)
            if needle in line:
                return line


def _results_to(endpoint: str, protocol: str, *, shutdown_timeout_s: int, **extra: str) -> dict[str, str]:
    """``serve``'s environment without ctxutil settings, its results exported to ``endpoint`` over
    ``protocol``, no rate cap."""
    env = environ_without_settings()
    env.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "CTXUTIL_MAX_EVALUATIONS_PER_SECOND": "0",
            "CTXUTIL_SHUTDOWN_TIMEOUT_S": str(shutdown_timeout_s),
            **extra,
        }
    )
    return env


def _one_trace_then_sigterm(env: dict[str, str]) -> tuple[str, str]:
    """``serve`` with ``env``: one RAG trace over OTLP/HTTP, then SIGTERM; its ``stopped;`` line (the
    last) and all of its stderr up to it."""
    http_port = free_port()
    process = Process(["--grpc-port", "0", "--http-port", str(http_port)], env)
    try:
        process.wait_for_line("listening")
        exporter = HttpSpanExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces")
        try:
            assert exporter.export(record_rag_trace().spans) is SpanExportResult.SUCCESS
        finally:
            exporter.shutdown()
        process.popen.send_signal(signal.SIGTERM)
        stopped = process.wait_for_line("stopped;")
        process.popen.wait(60)
    finally:
        if process.popen.poll() is None:
            process.popen.kill()
            process.popen.wait(10)
    return stopped, "".join(process.stderr)


@pytest.fixture
def process_env(sink: OTLPReceiver) -> dict[str, str]:
    env = environ_without_settings()
    env.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.http_endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "CTXUTIL_MAX_EVALUATIONS_PER_SECOND": "0",
            "CTXUTIL_SHUTDOWN_TIMEOUT_S": "30",
        }
    )
    return env


@pytest.fixture
def run_serve(process_env: dict[str, str]) -> Iterator[Any]:
    started: list[Process] = []

    def start(*args: str) -> Process:
        process = Process(list(args), process_env)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.popen.poll() is None:
            process.popen.kill()
            process.popen.wait(10)


def test_sigterm_flushes_evaluations_and_exits_zero(
    run_serve: Any, sink: OTLPReceiver, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    grpc_port, http_port = free_port(), free_port()
    process = run_serve(
        "--grpc-port", str(grpc_port), "--http-port", str(http_port), "--token-file", str(token_file)
    )
    line = process.wait_for_line("listening")
    assert f"grpc=127.0.0.1:{grpc_port}" in line and f"http=127.0.0.1:{http_port}" in line
    assert "token=on" in line

    trace = record_rag_trace()
    exporter = HttpSpanExporter(
        endpoint=f"http://127.0.0.1:{http_port}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    try:
        assert exporter.export(trace.spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    # At once: the evaluation is asynchronous, it may well not have run yet.
    process.popen.send_signal(signal.SIGTERM)
    assert process.popen.wait(60) == 0

    def delivered(receiver: OTLPReceiver) -> bool:
        return any(
            int.from_bytes(s.trace_id, "big") == trace.trace_id
            for s in receiver.spans("contextual_utilization")
        )

    assert sink.wait_for(delivered, timeout_s=10)  # exported before the process exited; a bound only
    (evaluation,) = sink.spans("contextual_utilization")
    assert int.from_bytes(evaluation.parent_span_id, "big") == trace.llm_span_id
    events = {
        attributes_of(r)["gen_ai.evaluation.name"]: r.event_name for r in sink.log_records()
    }  # the utilization result and its retrieval half
    assert events == dict.fromkeys(
        ["contextual_utilization", "contextual_relevancy"], "gen_ai.evaluation.result"
    )
    assert sink.metrics("gen_ai.evaluation.score")
    assert {r.get("service.name") for r in sink.resources()} == {"ctxutil-otel"}
    assert set(sink.transports) == {"http"}
    stopped = process.wait_for_line("stopped;")  # the last line: the reader thread has the others
    output = "".join(process.stderr)
    assert "SIGTERM: stopping" in output
    assert "spans accepted 3" in output
    assert re.search(r"; telemetry: [1-9]\d* exports? delivered$", stopped.rstrip()), stopped
    assert TOKEN not in output


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_an_unreachable_endpoint_with_credentials_is_never_printed(protocol: str) -> None:
    # The SDK's exporters log a failed export naming the endpoint as configured: "Failed to export metrics
    # to alice:s3cretPW@127.0.0.1:1" (gRPC), "url: /?token=abc123/v1/metrics" (HTTP), printed as is on
    # stderr. serve prints every log record through the CLI's redacting handler.
    port = free_port()
    endpoint = f"http://alice:s3cretPW@127.0.0.1:{port}/?token=abc123"
    env = _results_to(endpoint, protocol, shutdown_timeout_s=2, OTEL_EXPORTER_OTLP_TIMEOUT="2")
    stopped, output = _one_trace_then_sigterm(env)
    assert "stopped; spans accepted 3" in stopped, output
    assert "Failed to export" in output or "Transient error" in output, output  # the SDK's own lines
    if protocol == "grpc":  # named in every line of the gRPC exporter; the HTTP one: test_log_redaction.py
        assert f"[REDACTED]@127.0.0.1:{port}" in output, output
    for secret in ("alice", "s3cretPW", "abc123"):
        assert secret not in output, output


def test_the_stopped_line_counts_the_exports_the_backend_refused() -> None:
    # The results' endpoint accepts connections and answers every export 400: the stopped line said
    # nothing of it. It now counts the exporters' results, as the demo's last line does.
    with refusing_otlp_http() as endpoint:
        stopped, output = _one_trace_then_sigterm(
            _results_to(endpoint, "http/protobuf", shutdown_timeout_s=30)
        )
    assert "spans accepted 3" in stopped, stopped
    why = "the exporters' warnings above say why; repeats are logged once"
    # Traces, logs and metrics were each exported at least once, each refused.
    match = re.search(rf"; telemetry: ([1-9]\d*) exports? failed \({re.escape(why)}\)$", stopped.rstrip())
    assert match and int(match.group(1)) >= 3, stopped
    assert "400" in output  # the SDK's warnings the line points to


def test_listener_can_be_disabled_and_connection_limits_apply(run_serve: Any) -> None:
    http_port = free_port()
    process = run_serve(
        "--grpc-port", "0", "--http-port", str(http_port), "--max-connections", "1", "--header-timeout", "0.3"
    )  # fmt: skip
    line = process.wait_for_line("listening")
    assert "grpc=" not in line and f"http=127.0.0.1:{http_port}" in line
    assert "max_connections=1 header_timeout=0.3s request_timeout=30s min_request_rate=500B/s" in line
    assert "sample_rate=1.0 max_evaluations_per_second=unlimited judge=" in line  # the cap: 0 in process_env
    with socket.create_connection(("127.0.0.1", http_port), timeout=10) as idle:  # the one ordinary slot
        probe = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
        probe.request("GET", "/healthz")  # answered in a slot reserved for probes
        response = probe.getresponse()
        assert (response.status, response.read()) == (200, b"ok\n")
        probe.close()
        assert idle.recv(1) == b""  # closed by the server at the header deadline (10 s: a bound only)
    process.popen.send_signal(signal.SIGINT)
    assert process.popen.wait(60) == 0


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    for signal_name in ("TRACES", "METRICS", "LOGS"):
        monkeypatch.setenv(f"OTEL_{signal_name}_EXPORTER", "none")


@pytest.mark.usefixtures("quiet")
def test_option_errors_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    cases = [
        (["--grpc-port", "0", "--http-port", "0"], "both listeners are disabled"),
        (["--tls-cert", str(cert)], "needs both --tls-cert and --tls-key"),
        (["--token-file", str(empty)], "the file is empty"),
        (["--token-file", str(tmp_path / "missing")], "cannot read it"),
    ]
    for args, message in cases:
        assert main(["serve", *args]) == 2
        assert message in capsys.readouterr().err
    bad_values = [
        ("--grpc-port", "70000"),
        ("--max-connections", "0"),
        ("--max-connections", "many"),
        ("--header-timeout", "0"),
        ("--header-timeout", "-1"),
        ("--request-timeout", "nan"),
        ("--request-timeout", "inf"),
        ("--request-timeout", "30s"),
    ]
    for option, value in bad_values:
        with pytest.raises(SystemExit) as exited:
            main(["serve", option, value])
        assert exited.value.code == 2
        assert f"argument {option}:" in capsys.readouterr().err

    monkeypatch.setenv("CTXUTIL_SAMPLE_RATE", "2")
    assert main(["serve", "--grpc-port", "0", "--http-port", str(free_port())]) == 2
    assert "CTXUTIL_SAMPLE_RATE" in capsys.readouterr().err


@pytest.mark.usefixtures("quiet")
def test_busy_port_exits_2_naming_the_listener_and_port(capsys: pytest.CaptureFixture[str]) -> None:
    with OTLPReceiver() as other:  # holds a gRPC and an HTTP port
        assert main(["serve", "--grpc-port", "0", "--http-port", str(other.http_port)]) == 2
        err = capsys.readouterr().err
        expected = (
            f"cannot start the receiver: cannot bind the OTLP/HTTP listener to 127.0.0.1:{other.http_port}"
        )
        assert expected in err
        assert "already in use" in err and "[Errno" not in err
        assert main(["serve", "--grpc-port", str(other.grpc_port), "--http-port", "0"]) == 2
        err = capsys.readouterr().err
        assert f"cannot bind the OTLP/gRPC listener to 127.0.0.1:{other.grpc_port}" in err


def test_help_documents_limits_and_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--max-connections N", "--header-timeout SECONDS", "--request-timeout SECONDS"):
        assert option in text
    assert "kept for GET /healthz" in text
    assert "exits 1 when that deadline passed first" in text
    # The evaluation rate cap drops a burst over it (a 300-turn burst: 290 rate_limited): said where the
    # defaults are, with the setting that raises it.
    cap = Settings.model_fields["max_evaluations_per_second"].default
    assert f"at most CTXUTIL_MAX_EVALUATIONS_PER_SECOND (default {cap:g}) evaluations per second" in text
    assert "'rate_limited' (0 = no cap)" in text
