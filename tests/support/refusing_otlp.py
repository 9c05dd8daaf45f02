"""An OTLP/HTTP endpoint on 127.0.0.1 that answers every export 400 Bad Request: a backend that accepts
connections and refuses what it is sent (the exporters do not retry a 400)."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator

__all__ = ["refusing_otlp_http"]


class _Refusing(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(400)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # the base class names it `format`
        return None


@contextlib.contextmanager
def refusing_otlp_http() -> Iterator[str]:
    """Serve the endpoint in a thread; yields its base URL (``http://127.0.0.1:PORT``)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
