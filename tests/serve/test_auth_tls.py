"""Bearer token (HTTP 401 / gRPC UNAUTHENTICATED, never logged) and TLS on both listeners, with the SDK's
real exporters. The certificate is self-signed, generated per session with ``openssl req`` (the
``cryptography`` package is not installed here)."""

from __future__ import annotations

import http.client
import logging
import re
import shutil
import socket
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from ctxutil_otel.serve import TLSFiles

from .conftest import RagTrace, Served, grpc_export, record_rag_trace

TOKEN = "s3cr3t-t0ken-value"


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to generate the test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    return TLSFiles(cert_file=cert, key_file=key)


def _export_grpc(
    served: Served, trace: RagTrace, token: str | None, cert: Path | None = None
) -> SpanExportResult:
    headers = {"authorization": f"Bearer {token}"} if token is not None else None
    if cert is None:
        exporter = GrpcSpanExporter(endpoint=f"http://{served.grpc_target}", insecure=True, headers=headers)
    else:
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        exporter = GrpcSpanExporter(
            endpoint=f"https://{served.grpc_target}", credentials=credentials, headers=headers
        )
    try:
        return exporter.export(trace.spans)
    finally:
        exporter.shutdown()


def _export_http(
    served: Served, trace: RagTrace, token: str | None, cert: Path | None = None
) -> SpanExportResult:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    scheme = "http" if cert is None else "https"
    exporter = HttpSpanExporter(
        endpoint=f"{scheme}://127.0.0.1:{served.http_port}/v1/traces",
        headers=headers,
        certificate_file=str(cert) if cert is not None else None,
    )
    try:
        return exporter.export(trace.spans)
    finally:
        exporter.shutdown()


def test_bearer_token(
    make_served: Callable[..., Served], rag_trace: RagTrace, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    served = make_served(token=TOKEN)
    for export in (_export_grpc, _export_http):
        assert export(served, rag_trace, None) is SpanExportResult.FAILURE
        assert export(served, rag_trace, "wrong-token") is SpanExportResult.FAILURE
        assert export(served, rag_trace, TOKEN) is SpanExportResult.SUCCESS
    served.flush()
    assert served.receiver.stats().requests == {"unauthenticated": 4, "ok": 2}

    # The answers themselves: 401 with a challenge / UNAUTHENTICATED, naming no token.
    connection = http.client.HTTPConnection("127.0.0.1", served.http_port, timeout=10)
    connection.request(
        "POST",
        "/v1/traces",
        body=rag_trace.request_bytes(),
        headers={"Content-Type": "application/x-protobuf", "Authorization": f"Basic {TOKEN}"},
    )
    response = connection.getresponse()
    body = response.read()
    connection.close()
    assert response.status == 401
    assert response.getheader("WWW-Authenticate") == "Bearer"
    assert TOKEN.encode() not in body
    with pytest.raises(grpc.RpcError) as caught:
        grpc_export(served.grpc_target, rag_trace.request_bytes(), [("authorization", f"bearer {TOKEN}x")])
    assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert TOKEN not in (caught.value.details() or "")
    # The scheme is case-insensitive (RFC 7235).
    grpc_export(served.grpc_target, rag_trace.request_bytes(), [("authorization", f"bearer {TOKEN}")])

    assert served.receiver.stats().requests["unauthenticated"] == 6
    assert caplog.records  # the exporters and the receiver did log (debug level included) ...
    assert TOKEN not in caplog.text  # ... and never the token


@pytest.mark.parametrize("bad", ["", "two words", "caf\u00e9"])
def test_unusable_token_is_refused_at_construction(make_served: Callable[..., Served], bad: str) -> None:
    with pytest.raises(ValueError, match="printable ASCII"):
        make_served(token=bad)


def test_tls_on_both_listeners(
    make_served: Callable[..., Served],
    rag_trace: RagTrace,
    tls_files: TLSFiles,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ``requests`` lets these variables override the exporter's ``certificate_file`` (its session.verify).
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    served = make_served(tls=tls_files, token=TOKEN, header_timeout_s=1.0)
    # A client that connects and stays silent must not block the accept loop (handshake in its thread),
    # and is cut off at the header deadline (which bounds the handshake).
    with socket.create_connection(("127.0.0.1", served.http_port), timeout=10) as silent:
        assert _export_http(served, rag_trace, TOKEN, tls_files.cert_file) is SpanExportResult.SUCCESS
        assert silent.recv(1) == b""  # closed by the server (client timeout 10 s: a bound only)
    # Another turn: the same one again would be recognised as a retry and evaluated once.
    assert _export_grpc(served, record_rag_trace(), TOKEN, tls_files.cert_file) is SpanExportResult.SUCCESS

    # Plaintext against the TLS listener fails, and the server stays up.
    connection = http.client.HTTPConnection("127.0.0.1", served.http_port, timeout=10)
    with pytest.raises((http.client.HTTPException, OSError)):
        connection.request("GET", "/healthz")
        connection.getresponse()
    connection.close()
    context = ssl.create_default_context(cafile=str(tls_files.cert_file))
    secure = http.client.HTTPSConnection("127.0.0.1", served.http_port, timeout=10, context=context)
    secure.request("GET", "/healthz")
    assert secure.getresponse().read() == b"ok\n"
    secure.close()

    served.flush()
    evaluations = served.sink.spans("contextual_utilization")
    assert len(evaluations) == 2  # one turn from each listener
    assert served.receiver.stats().requests == {"ok": 2}


def test_unusable_tls_files_fail_at_start(make_served: Callable[..., Served], tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("not a certificate")
    key.write_text("not a key")
    with pytest.raises(ValueError, match="TLS: cannot use certificate") as caught:
        make_served(tls=TLSFiles(cert_file=cert, key_file=key), grpc_port=None)
    assert str(caught.value).endswith(": not a PEM certificate chain and PEM private key")  # not ": None"
    missing = tmp_path / "missing.pem"
    with pytest.raises(OSError, match=re.escape(f"TLS: cannot read {missing}: No such file")):
        make_served(tls=TLSFiles(cert_file=missing, key_file=key), http_port=None)
