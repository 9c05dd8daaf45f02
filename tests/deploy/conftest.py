"""Fixtures for the deploy tests: the Prometheus binaries and a real Prometheus server on 127.0.0.1.

Prometheus and promtool come from the distribution's ``prometheus`` package (``deploy/install-prometheus.sh``,
run by ``scripts/test.sh`` / ``.ci/run``). When they are absent the tests that need them are skipped with the
reason, except under CI (``CI=true``), where they fail: CI must never skip them silently.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.net import free_port

#: How long a child process may take to answer one command (a bound on a poll, not a sleep).
CHILD_ANSWER_S = 30.0

INSTALL_HINT = "install it with `bash deploy/install-prometheus.sh` (Debian/Ubuntu package `prometheus`)"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        message = f"`{name}` not found on PATH; {INSTALL_HINT}"
        if _in_ci():
            pytest.fail(f"{message} (CI=true: not skipping)")
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def promtool() -> str:
    """Path of ``promtool``."""
    return _binary("promtool")


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    """Path of ``prometheus``."""
    return _binary("prometheus")


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.1) -> Any:
    """Poll ``condition`` until it returns a truthy value (returned) or ``timeout_s`` passes (AssertionError
    naming ``what`` and the last value). A bounded poll on an observable fact, not a sleep standing in for
    synchronisation."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; last value: {last!r}")
        time.sleep(interval_s)


@dataclass
class PrometheusServer:
    """A running Prometheus: ``url`` of its HTTP API, ``log`` file with its output."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def api(self, path: str, **params: str) -> Any:
        """GET ``/api/v1/<path>`` and return ``data``; AssertionError with Prometheus's error otherwise."""
        query = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:
            body = json.load(exc)
        assert body.get("status") == "success", (
            f"{path} {params}: {body.get('errorType')}: {body.get('error')}"
        )
        return body["data"]

    def query(self, expr: str, time_s: float | None = None) -> list[dict[str, Any]]:
        """Instant query; the result vector (a list of ``{"metric": {...}, "value": [t, "v"]}``)."""
        params = {"query": expr}
        if time_s is not None:
            params["time"] = f"{time_s:.3f}"
        data = self.api("query", **params)
        assert data["resultType"] in {"vector", "scalar"}, data
        result: list[dict[str, Any]] = data["result"] if data["resultType"] == "vector" else []
        return result


@pytest.fixture(scope="module")
def start_prometheus(
    prometheus_binary: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str, list[Path]], PrometheusServer]]:
    """Factory (one per test module): ``start(scrape_config_yaml, rule_files)`` writes a config (1 s scrape
    and rule evaluation intervals), starts Prometheus on a free 127.0.0.1 port with a temporary storage
    directory, and waits until ``/-/ready`` answers. Stopped (SIGTERM, then SIGKILL) at teardown."""
    tmp_path = tmp_path_factory.mktemp("prometheus")
    started: list[subprocess.Popen[bytes]] = []
    handles = []

    def start(scrape_configs: str, rule_files: list[Path]) -> PrometheusServer:
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            f"rule_files: {json.dumps([str(p) for p in rule_files])}\n"
            f"scrape_configs:\n{scrape_configs}",
            encoding="utf-8",
        )
        for attempt in range(3):
            port = free_port()
            log = tmp_path / f"prometheus-{attempt}.log"
            handle = log.open("wb")
            handles.append(handle)
            process = subprocess.Popen(
                [
                    prometheus_binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / f'data-{attempt}'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdout=handle,
                stderr=subprocess.STDOUT,
            )
            started.append(process)
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 20
            while process.poll() is None and time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
                        if response.status == 200:
                            return PrometheusServer(url, process, log)
                except OSError:
                    pass  # not listening yet
                time.sleep(0.05)
            output = log.read_text(errors="replace")
            if process.poll() is None or "address already in use" not in output:
                raise AssertionError(f"Prometheus did not become ready within 20 s:\n{output[-4000:]}")
        raise AssertionError("Prometheus could not bind a free port in 3 attempts")

    yield start
    for process in started:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    for handle in handles:
        handle.close()


@dataclass
class LineChild:
    """A child Python process speaking one JSON object per line: commands on stdin, answers on stdout."""

    process: subprocess.Popen[str]
    lines: queue.Queue[str]

    def send(self, command: str, timeout_s: float = CHILD_ANSWER_S) -> dict[str, Any]:
        """Write ``command`` and return the answer (see :meth:`receive`)."""
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.receive(timeout_s)

    def receive(self, timeout_s: float = CHILD_ANSWER_S) -> dict[str, Any]:
        """The next JSON line; AssertionError when none comes within ``timeout_s`` or it is an
        ``{"error": ...}``."""
        try:
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"the child process answered nothing within {timeout_s} s") from None
        message: dict[str, Any] = json.loads(line)
        assert "error" not in message, message
        return message


@contextmanager
def line_child(script: Path, stderr_log: Path) -> Iterator[LineChild]:
    """Run ``python script`` as a :class:`LineChild` (stderr to ``stderr_log``); on exit send ``exit``,
    close its stdin and wait for it (killed after 15 s)."""
    with stderr_log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.put(line)

        threading.Thread(target=pump, daemon=True).start()
        try:
            yield LineChild(process, lines)
        finally:
            if process.poll() is None:
                assert process.stdin is not None
                try:
                    process.stdin.write("exit\n")
                    process.stdin.close()
                except BrokenPipeError:
                    pass  # it exited on its own meanwhile
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
