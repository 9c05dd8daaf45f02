"""``ctxutil-otel serve`` as a child process for the serve benchmarks (``soak_serve.py``,
``slowloris_serve.py``): started on two free ports in a clean environment, stopped with SIGTERM, its
accounting line read back, and the figures written out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from bench_receiver import _free_port

__all__ = ["ServeProcess", "start_serve", "write_figures"]

#: What every serve benchmark runs with: the lexical judge, no evaluation rate cap, a 10 s shutdown, and no
#: OpenTelemetry export (the figures are serve's answers, not an exporter's).
_BASE_ENV = {
    "CTXUTIL_MAX_EVALUATIONS_PER_SECOND": "0",
    "CTXUTIL_JUDGE": "lexical",
    "CTXUTIL_SHUTDOWN_TIMEOUT_S": "10",
    "OTEL_TRACES_EXPORTER": "none",
    "OTEL_METRICS_EXPORTER": "none",
    "OTEL_LOGS_EXPORTER": "none",
}


class ServeProcess:
    """A running ``python -m ctxutil_otel serve`` and its two ports."""

    def __init__(self, process: subprocess.Popen[str], http_port: int, grpc_port: int) -> None:
        self.process, self.http_port, self.grpc_port = process, http_port, grpc_port

    @property
    def pid(self) -> int:
        return self.process.pid

    def terminate(self) -> int | None:
        """SIGTERM, then wait up to 60 s; its exit status, or ``None`` when it had to be killed."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return None

    def accounting(self) -> str | None:
        """The last ``stopped;`` line serve wrote to stderr (read after :meth:`terminate`)."""
        assert self.process.stderr is not None
        lines = [line for line in self.process.stderr.read().splitlines() if "stopped;" in line]
        return lines[-1] if lines else None


def start_serve(env: Mapping[str, str] | None = None, options: Sequence[str] = ()) -> ServeProcess:
    """Start serve with the shell's ``CTXUTIL_*`` / ``OTEL_*`` variables removed, then the base settings
    above, then ``env``; ``options`` follow the port options. Returns once serve says it is listening (else
    exits with what it wrote)."""
    http_port, grpc_port = _free_port(), _free_port()
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXUTIL_", "OTEL_"))}
    child_env.update({**_BASE_ENV, **(env or {})})
    command = [
        sys.executable, "-m", "ctxutil_otel", "serve", "--grpc-port", str(grpc_port), "--http-port",
        str(http_port), *options,
    ]  # fmt: skip
    process = subprocess.Popen(
        command, env=child_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    line = process.stderr.readline()
    if "listening" not in line:
        process.kill()
        raise SystemExit(f"serve did not start: {line}{process.stderr.read()}")
    return ServeProcess(process, http_port, grpc_port)


def write_figures(figures: dict[str, Any], path: str | None) -> None:
    """Print ``figures`` as JSON, and also write them to ``path`` when given."""
    print(json.dumps(figures, indent=2))
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(figures, out, indent=2)
