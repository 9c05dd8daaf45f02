"""Is anything listening at the OTLP endpoints? One TCP connection per endpoint, before telemetry is sent.

The OTLP exporters find out only when they export, and then retry with backoff for their whole timeout
(about 20 s at exit with the defaults) without saying why. A command that sends telemetry (``demo``) asks
here first, and warns naming the endpoint (never its credentials) when nothing accepts a connection.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = ["unreachable_otlp_endpoints"]


# Where the OTLP exporters send when no endpoint variable is set (OTEL_*_EXPORTER=otlp alone).
_OTLP_DEFAULT_ENDPOINTS = {"otlp/grpc": "http://localhost:4317", "otlp/http": "http://localhost:4318"}


def _otlp_targets(
    destinations: Mapping[str, tuple[str, ...]],
) -> dict[tuple[str, int], tuple[str, list[str]]]:
    """``{(host, port): (endpoint shown, [signals])}`` of the OTLP exporters, resolved like the exporters
    (``OTEL_EXPORTER_OTLP_{SIGNAL}_ENDPOINT`` > ``OTEL_EXPORTER_OTLP_ENDPOINT`` > localhost default; no
    port: 443 for ``https`` and gRPC, 80 for ``http``). The endpoint shown keeps scheme, host, port and
    path only: user information and query, where credentials travel, are dropped."""
    targets: dict[tuple[str, int], tuple[str, list[str]]] = {}
    for signal_name, kinds in destinations.items():
        for kind in kinds:
            if kind not in _OTLP_DEFAULT_ENDPOINTS:
                continue
            url = (
                os.environ.get(f"OTEL_EXPORTER_OTLP_{signal_name.upper()}_ENDPOINT", "").strip()
                or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
                or _OTLP_DEFAULT_ENDPOINTS[kind]
            )
            parts = urlsplit(url if "://" in url else f"//{url}")
            host = parts.hostname or ""
            try:
                port = parts.port or (443 if parts.scheme == "https" or kind == "otlp/grpc" else 80)
            except ValueError:  # a port that is no number: the exporter reports it
                continue
            shown_host = f"[{host}]" if ":" in host else host
            shown = f"{parts.scheme + '://' if parts.scheme else ''}{shown_host}:{port}{parts.path}"
            targets.setdefault((host, port), (shown, []))[1].append(signal_name)
    return targets


def unreachable_otlp_endpoints(
    destinations: Mapping[str, tuple[str, ...]], timeout_s: float = 1.0
) -> list[str]:
    """Try one TCP connection to each OTLP endpoint (in parallel, ``timeout_s`` seconds in all) and return
    ``"<endpoint> (<signals>): <reason>"`` for each that did not accept one. A reachable endpoint costs
    one connection set-up; nothing is sent."""
    targets = _otlp_targets(destinations)
    results: dict[tuple[str, int], str | None] = {}

    def probe(address: tuple[str, int]) -> None:
        try:
            with socket.create_connection(address, timeout=timeout_s):
                results[address] = None
        except OSError as exc:
            results[address] = exc.strerror or str(exc) or type(exc).__name__

    threads = [threading.Thread(target=probe, args=(a,), daemon=True) for a in targets]
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    problems = []
    for address, (shown, signals) in targets.items():
        if address in results and results[address] is None:
            continue
        reason = results.get(address) or f"no answer within {timeout_s:g} s"
        problems.append(f"{shown} ({', '.join(signals)}): {reason}")
    return problems
