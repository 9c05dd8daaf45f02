"""Slow senders against ``ctxutil-otel serve`` (issue 24 row 4): do health probes and a well-behaved sender
still get answered while slow-loris connections hold every slot? Seconds, not in CI.

    .venv/bin/python benchmarks/slowloris_serve.py [--loris 66] [--probes 50] [--json FILE]

Set-up: the real CLI in a subprocess with its default connection limits (``--max-connections 64`` plus 2
slots kept for ``GET /healthz``, ``--header-timeout 10``, ``--request-timeout 30``), offline lexical judge,
results exported nowhere (``OTEL_*_EXPORTER=none``). From this process:

* ``--loris`` slow-loris connections (default 66: every slot), each sending the head of an export one
  byte a second, re-opened as soon as the server closes it; one thread drives them all (``selectors``).
  They start 2 s before the measure, so that each is past its first byte.
* A health prober: ``GET /healthz`` (``Connection: close``, as kubelet) every 0.5 s, 2 s timeout,
  ``--probes`` times.
* One well-behaved sender: an HTTP keep-alive connection posting one export of 16 RAG traces every 0.2 s
  (30 s timeout), re-connecting after a failure, honouring ``Retry-After``.

Reported: probes answered 200 (and their latency, p50 and max), the failed ones by what ended them, the
sender's answers by status (``200``, or the exception that ended the attempt: a connection closed at accept
reads ``RemoteDisconnected`` / ``ConnectionResetError``, one closed between two exports
``BrokenPipeError``), the loris connections opened, and serve's final accounting line after SIGTERM.
"""

from __future__ import annotations

import argparse
import http.client
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from _common import percentile
from _serve_process import start_serve, write_figures
from bench_receiver import Batch

_HEAD = (
    b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
    b"Content-Length: 100000\r\n\r\n" + b"\0" * 100_000
)


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    sender: dict[str, int] = field(default_factory=dict)
    probes: int = 0
    probes_ok: int = 0
    probe_failures: dict[str, int] = field(default_factory=dict)
    probe_latencies_s: list[float] = field(default_factory=list)
    loris_opened: int = 0


def _loris(port: int, count: int, tally: Tally, stop: threading.Event) -> None:
    """``count`` connections, one byte a second each, re-opened when the server closes one."""
    selector = selectors.DefaultSelector()
    sent: dict[socket.socket, int] = {}

    def open_one() -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            return
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
        sent[sock] = 0
        with tally.lock:
            tally.loris_opened += 1

    def close(sock: socket.socket) -> None:
        selector.unregister(sock)
        sent.pop(sock, None)
        sock.close()

    for _ in range(count):
        open_one()
    next_tick = time.monotonic()
    while not stop.is_set():
        timeout = max(0.0, next_tick - time.monotonic())
        for key, _ in selector.select(timeout):  # the server closed (or answered) one: re-open it
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                close(sock)
        if time.monotonic() >= next_tick:
            next_tick += 1.0
            for sock in list(sent):
                offset = sent[sock]
                try:
                    sock.send(_HEAD[offset : offset + 1])
                    sent[sock] = offset + 1
                except OSError:
                    close(sock)
        while len(sent) < count and not stop.is_set():
            open_one()
    for sock in list(sent):
        close(sock)


def _probe(port: int, probes: int, tally: Tally) -> None:
    for _ in range(probes):
        time.sleep(0.5)
        outcome = ""
        started = time.monotonic()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            connection.request("GET", "/healthz", headers={"Connection": "close"})
            outcome = str(connection.getresponse().status)
        except (OSError, http.client.HTTPException) as exc:
            outcome = type(exc).__name__
        finally:
            connection.close()
        with tally.lock:
            tally.probes += 1
            if outcome == "200":
                tally.probes_ok += 1
                tally.probe_latencies_s.append(time.monotonic() - started)
            else:
                tally.probe_failures[outcome] = tally.probe_failures.get(outcome, 0) + 1


def _sender(port: int, tally: Tally, stop: threading.Event) -> None:
    batch = Batch(16, 7)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while not stop.wait(0.2):
        try:
            connection.request(
                "POST", "/v1/traces", body=batch.payload(), headers={"Content-Type": "application/x-protobuf"}
            )
            response = connection.getresponse()
            response.read()
            status = str(response.status)
        except (OSError, http.client.HTTPException) as exc:
            status = type(exc).__name__
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        with tally.lock:
            tally.sender[status] = tally.sender.get(status, 0) + 1
        if status == "503":
            stop.wait(float(response.getheader("Retry-After") or 1))
    connection.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loris", type=int, default=66, help="slow-loris connections (default 66)")
    parser.add_argument("--probes", type=int, default=50, help="health probes, one every 0.5 s (default 50)")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)

    serve = start_serve()
    http_port = serve.http_port
    tally, stop = Tally(), threading.Event()
    loris = threading.Thread(target=_loris, args=(http_port, args.loris, tally, stop), daemon=True)
    loris.start()
    time.sleep(2.0)  # every loris connection past its first byte
    sender = threading.Thread(target=_sender, args=(http_port, tally, stop), daemon=True)
    sender.start()
    _probe(http_port, args.probes, tally)
    stop.set()
    sender.join(40)
    loris.join(10)
    status = serve.terminate()
    accounting = serve.accounting()
    with tally.lock:
        figures: dict[str, Any] = {
            "loris_connections": args.loris,
            "health_probes": {
                "sent": tally.probes,
                "ok": tally.probes_ok,
                "failed": dict(sorted(tally.probe_failures.items())),
                "ok_latency_ms_p50_max": [
                    round(percentile(sorted(tally.probe_latencies_s), 50) * 1000, 1),
                    round(max(tally.probe_latencies_s) * 1000, 1),
                ]
                if tally.probe_latencies_s
                else None,
            },
            "sender_answers": dict(sorted(tally.sender.items())),
            "loris_opened": tally.loris_opened,
            "exit_status": status,
            "accounting": accounting,
        }
    write_figures(figures, args.json)
    return 0 if status == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
