"""Soak of ``ctxutil-otel serve`` behind well-behaved and hostile senders (issue 10): minutes, not in CI.

    .venv/bin/python benchmarks/soak_serve.py [--duration 150] [--good 4] [--hostile 8] [--sample-rate 0.1]
        [--json FILE]

Set-up: the real CLI in a subprocess (offline lexical judge, ``CTXUTIL_SAMPLE_RATE`` = ``--sample-rate``
(default 0.1), no rate cap,
results exported nowhere: ``OTEL_*_EXPORTER=none``), ``--max-connections 32``, ``--header-timeout 5``,
``--request-timeout 10``. From this process, for ``--duration`` seconds:

* ``--good`` well-behaved senders: HTTP keep-alive connections posting batches of 16 recorded RAG
  traces (bench_receiver's, fresh trace ids each time) as fast as answered, honouring ``Retry-After``;
  plus one gRPC sender. Each export's latency is recorded.
* ``--hostile`` hostile senders (default 8), each cycling through, from a different starting point: a
  stalled HTTP body (headers and 10 bytes, then held until the server cuts it), a stalled gRPC call
  (headers, then nothing), an oversize body, a gzip bomb (8 MiB of zeros), a body of 3,000 empty gzip
  members, garbage bytes, deep JSON, and 20 idle connections opened and held.
* A health prober: ``GET /healthz`` (``Connection: close``) every 0.5 s, 2 s timeout.
* RSS of the serve process every 5 s (``/proc/<pid>/status``).

Then SIGTERM; reported: accepted spans/s (answered 200), p50/p99 export latency of well-behaved senders,
health-probe success, RSS over time, exit status and time to exit, and serve's final accounting line.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import grpc  # type: ignore[import-untyped,unused-ignore]
from _common import percentile
from _serve_process import start_serve, write_figures
from bench_receiver import Batch, _rss_kib

EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies_s: list[float] = field(default_factory=list)
    spans: int = 0
    good_status: dict[str, int] = field(default_factory=dict)
    hostile_status: dict[str, int] = field(default_factory=dict)
    probes: int = 0
    probes_ok: int = 0

    def good(self, status: str, latency_s: float, spans: int) -> None:
        with self.lock:
            self.good_status[status] = self.good_status.get(status, 0) + 1
            if status in ("200", "OK"):
                self.latencies_s.append(latency_s)
                self.spans += spans

    def hostile(self, status: str) -> None:
        with self.lock:
            self.hostile_status[status] = self.hostile_status.get(status, 0) + 1


def _http_good(port: int, tally: Tally, stop: threading.Event, seed: int) -> None:
    batch = Batch(16, seed)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while not stop.is_set():
        body = batch.payload()
        started = time.monotonic()
        try:
            connection.request(
                "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
            )
            response = connection.getresponse()
            response.read()
        except (OSError, http.client.HTTPException) as exc:
            tally.good(type(exc).__name__, 0.0, 0)
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            continue
        tally.good(str(response.status), time.monotonic() - started, len(batch.spans))
        if response.status == 503:
            stop.wait(float(response.getheader("Retry-After") or 1))
    connection.close()


def _grpc_good(port: int, tally: Tally, stop: threading.Event) -> None:
    batch = Batch(16, 99)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(EXPORT_PATH, request_serializer=None, response_deserializer=None)
        while not stop.is_set():
            started = time.monotonic()
            try:
                call(batch.payload(), timeout=30)
            except grpc.RpcError as exc:
                tally.good(exc.code().name, 0.0, 0)
                if exc.code() is grpc.StatusCode.UNAVAILABLE:
                    stop.wait(1.0)
                continue
            tally.good("OK", time.monotonic() - started, len(batch.spans))


def _post(port: int, body: bytes, headers: dict[str, str]) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/v1/traces", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return str(response.status)
    except (OSError, http.client.HTTPException) as exc:
        return type(exc).__name__
    finally:
        connection.close()


def _stalled_http(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 100000\r\n\r\n" + b"\0" * 10
        )
        try:
            return "cut" if sock.recv(1) == b"" else "answered"
        except OSError as exc:
            return type(exc).__name__


def _stalled_grpc(port: int, stop: threading.Event) -> str:
    release = threading.Event()

    def nothing() -> Any:
        release.wait(60)
        return
        yield b""

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_unary(EXPORT_PATH, request_serializer=None, response_deserializer=None)
        try:
            call(nothing(), timeout=60)
            return "OK"
        except grpc.RpcError as exc:
            return f"grpc-{exc.code().name}"
        finally:
            release.set()


def _hostile_kinds(http_port: int, grpc_port: int, stop: threading.Event) -> list[Any]:
    protobuf = {"Content-Type": "application/x-protobuf"}
    zipped = {**protobuf, "Content-Encoding": "gzip"}
    bomb = gzip.compress(b"\0" * (8 * 1024 * 1024))
    members = gzip.compress(b"", mtime=0) * 3000

    def idle() -> str:
        held = [socket.create_connection(("127.0.0.1", http_port), timeout=5) for _ in range(20)]
        stop.wait(2.0)
        for sock in held:
            sock.close()
        return "idle-20"

    return [
        lambda: "stalled-http-" + _stalled_http(http_port),
        lambda: "stalled-" + _stalled_grpc(grpc_port, stop),
        lambda: "oversize-" + _post(http_port, b"x" * (5 * 1024 * 1024), protobuf),
        lambda: "bomb-" + _post(http_port, bomb, zipped),
        lambda: "members-" + _post(http_port, members, zipped),
        lambda: "garbage-" + _post(http_port, b"\x00\xff garbage", protobuf),
        lambda: "json-" + _post(http_port, b"[" * 50_000, {"Content-Type": "application/json"}),
        idle,
    ]


def _hostile(kinds: list[Any], tally: Tally, stop: threading.Event) -> None:
    """Cycle through ``kinds`` (each a callable returning what happened) until stopped."""
    while not stop.is_set():
        for kind in kinds:
            if stop.is_set():
                return
            try:
                tally.hostile(kind())
            except Exception as exc:  # the receiver went away (SIGTERM) or refused
                tally.hostile(type(exc).__name__)


def _probe(port: int, tally: Tally, stop: threading.Event) -> None:
    while not stop.wait(0.5):
        ok = False
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            connection.request("GET", "/healthz", headers={"Connection": "close"})
            ok = connection.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            pass
        finally:
            connection.close()
        with tally.lock:
            tally.probes += 1
            tally.probes_ok += ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=150.0, help="seconds of load (default 150)")
    parser.add_argument("--good", type=int, default=4, help="well-behaved HTTP senders (default 4)")
    parser.add_argument("--hostile", type=int, default=8, help="hostile senders (default 8)")
    parser.add_argument("--sample-rate", type=float, default=0.1, help="CTXUTIL_SAMPLE_RATE (default 0.1)")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)

    serve = start_serve(
        {"CTXUTIL_SAMPLE_RATE": str(args.sample_rate)},
        ["--max-connections", "32", "--header-timeout", "5", "--request-timeout", "10"],
    )
    http_port, grpc_port = serve.http_port, serve.grpc_port
    tally, stop = Tally(), threading.Event()
    threads = [
        threading.Thread(target=_http_good, args=(http_port, tally, stop, i)) for i in range(args.good)
    ]
    threads.append(threading.Thread(target=_grpc_good, args=(grpc_port, tally, stop)))
    kinds = _hostile_kinds(http_port, grpc_port, stop)
    for index in range(args.hostile):  # each starts at a different kind: all run at once
        mine = kinds[index % len(kinds) :] + kinds[: index % len(kinds)]
        threads.append(threading.Thread(target=_hostile, args=(mine, tally, stop)))
    probing = threading.Event()  # probes count until SIGTERM (then 503 "shutting down" is the answer)
    threads.append(threading.Thread(target=_probe, args=(http_port, tally, probing)))
    started = time.monotonic()
    for thread in threads:
        thread.daemon = True
        thread.start()
    rss: list[tuple[int, int]] = []
    while (elapsed := time.monotonic() - started) < args.duration:
        rss.append((round(elapsed), _rss_kib(serve.pid) // 1024))
        stop.wait(min(5.0, args.duration - elapsed))
    measured_s = time.monotonic() - started
    rss.append((round(measured_s), _rss_kib(serve.pid) // 1024))
    probing.set()
    with tally.lock:
        spans, latencies = tally.spans, sorted(tally.latencies_s)
        probes = {"sent": tally.probes, "ok": tally.probes_ok}
        good_answers = dict(sorted(tally.good_status.items()))
        hostile_answers = dict(sorted(tally.hostile_status.items()))
    signalled = time.monotonic()
    status = serve.terminate()
    exit_s = time.monotonic() - signalled
    stop.set()
    for thread in threads:
        thread.join(70)
    accounting = serve.accounting()
    figures = {
        "duration_s": round(measured_s, 1),
        "accepted_spans_per_s": round(spans / measured_s, 1),
        "good_export_latency_ms": {
            "p50": round(percentile(latencies, 50) * 1000, 1) if latencies else None,
            "p99": round(percentile(latencies, 99) * 1000, 1) if latencies else None,
        },
        "good_answers": good_answers,
        "hostile_answers": hostile_answers,
        "health_probes": probes,
        "rss_mib_over_time": rss,
        "exit_status": status,
        "exit_after_sigterm_s": round(exit_s, 2),
        "accounting": accounting,
    }
    write_figures(figures, args.json)
    return 0 if status == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
