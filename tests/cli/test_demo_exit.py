"""``ctxutil-otel demo`` at exit: each signal exported once, and an unreachable OTLP endpoint said plainly.

The demo runs in a subprocess (the real command, its real SDK providers and exporters); the OTLP side is
the real receiver of ``tests/support`` or a 127.0.0.1 port where nothing listens.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator

import pytest

from ctxutil_otel.emit._endpoints import unreachable_otlp_endpoints

from ..support.net import free_port
from ..support.otlp_receiver import OTLPReceiver
from ..support.refusing_otlp import refusing_otlp_http
from .conftest import run_demo


@pytest.fixture
def listening_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_console_shows_each_metric_point_once() -> None:
    proc = run_demo("--limit", "3", "--show-telemetry")
    assert proc.returncode == 0, proc.stderr
    metric_lines = [line for line in proc.stdout.splitlines() if line.startswith("[metric] ")]
    # The demo replays the same answers every run, so each point's line is fully deterministic.
    score_lines = [
        line
        for line in metric_lines
        if line.startswith("[metric] gen_ai.evaluation.score ")
        and "gen_ai.evaluation.name=contextual_utilization" in line  # not its retrieval half
    ]
    assert score_lines and sum(int(line.split("count=")[1].split()[0]) for line in score_lines) == 3
    assert len(metric_lines) == len(set(metric_lines))  # the old exit printed the whole block twice
    assert "telemetry (traces: console, metrics: console, logs: console): 6 spans, 6 log events and the " in (
        proc.stdout
    )
    assert re.search(r"; \d+ exports delivered within 5 s$", proc.stdout.rstrip("\n")), proc.stdout


def test_otlp_backend_receives_one_metrics_export() -> None:
    with OTLPReceiver() as receiver:
        proc = run_demo(
            "--limit", "2", "--quiet", env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.grpc_endpoint}
        )
        assert proc.returncode == 0, proc.stderr
        assert len(receiver.metric_requests) == 1
        assert len(receiver.metrics("gen_ai.evaluation.score")) == 1
    assert "warning" not in proc.stderr
    assert re.search(r"; \d+ exports delivered within 5 s$", proc.stdout.rstrip("\n")), proc.stdout


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_unreachable_endpoint_is_named_in_a_warning_and_the_summary(protocol: str) -> None:
    port = free_port()
    proc = run_demo(
        "--limit",
        "2",
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://alice:s3cret@127.0.0.1:{port}/otlp?token=abc123",
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "CTXUTIL_SHUTDOWN_TIMEOUT_S": "1",  # the exporters give up within a second
        },
    )
    assert proc.returncode == 0, proc.stderr
    ours = [line for line in proc.stderr.splitlines() if line.startswith("warning: ")]
    assert ours == [
        f"warning: cannot connect to the OTLP endpoint http://127.0.0.1:{port}/otlp (traces, metrics, logs): "
        "Connection refused; telemetry may not be delivered (the exit waits at most 1 s for it)"
    ]
    assert "evaluator: captured 2, sampled out 0, not selected 0, evaluated 2" in proc.stdout
    last = proc.stdout.rstrip("\n").splitlines()[-1]
    assert last.endswith("; an OTLP endpoint did not accept a connection at the start"), last
    assert "failed (the exporters' warnings above say why; repeats are logged once)" in last or (
        "export unfinished after 1 s" in last
    ), last
    # The SDK's exporters log their failed exports naming the endpoint as configured ("Failed to export
    # metrics to alice:s3cret@127.0.0.1:...", "url: /otlp?token=abc123/v1/metrics"): printed through the
    # CLI's redacting handler, with neither secret. (The gRPC exporter names its endpoint in every such
    # line; the HTTP one only when it had time to retry: tests/cli/test_log_redaction.py.)
    assert "Failed to export" in proc.stderr or "Transient error" in proc.stderr, proc.stderr
    if protocol == "grpc":
        assert f"[REDACTED]@127.0.0.1:{port}" in proc.stderr, proc.stderr
    for secret in ("alice", "s3cret", "abc123"):
        assert secret not in proc.stdout and secret not in proc.stderr, proc.stderr


def test_user_export_timeout_sets_the_exit_budget() -> None:
    port = free_port()
    proc = run_demo(
        "--limit",
        "1",
        "--quiet",
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "2",  # seconds, as the Python exporters read it
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "CTXUTIL_SHUTDOWN_TIMEOUT_S": "1",
        },
    )
    assert proc.returncode == 0, proc.stderr
    assert "(the exit waits at most 2 s for it)" in proc.stderr


def test_probe_reports_only_endpoints_that_refuse(
    monkeypatch: pytest.MonkeyPatch, listening_port: int
) -> None:
    dead = free_port()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"127.0.0.1:{listening_port}")  # gRPC form, no scheme
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", f"https://bob:pw@127.0.0.1:{dead}/v1/logs?k=v")
    destinations = {"traces": ("otlp/grpc",), "metrics": ("otlp/grpc", "console"), "logs": ("otlp/http",)}
    assert unreachable_otlp_endpoints(destinations) == [
        f"https://127.0.0.1:{dead}/v1/logs (logs): Connection refused"
    ]
    assert unreachable_otlp_endpoints({"traces": ("console",), "metrics": (), "logs": ()}) == []


@pytest.fixture
def refusing_endpoint() -> Iterator[str]:
    with refusing_otlp_http() as endpoint:
        yield endpoint


def test_an_endpoint_that_refuses_every_export_is_reported_failed_not_delivered(
    refusing_endpoint: str,
) -> None:
    # The endpoint accepts connections and answers each export 400: the last line said "export finished
    # within 5 s" (force_flush returned) though nothing was delivered. It now counts the exporters' results.
    proc = run_demo(
        "--limit",
        "2",
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": refusing_endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        },
    )
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.rstrip("\n").splitlines()[-1]
    why = "the exporters' warnings above say why; repeats are logged once"
    assert re.search(rf"; [1-9]\d* exports? failed \({re.escape(why)}\)$", last), last
    assert "delivered" not in last and "finished" not in last
    assert "400" in proc.stderr  # the SDK's warnings the line points to
