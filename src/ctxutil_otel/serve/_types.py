"""What the listeners (:mod:`._grpc`, :mod:`._http`) and the TLS set-up (:mod:`._status`) need from the
receiver, below all of them: :class:`TLSFiles` and the :class:`Receiver` protocol that
:class:`~ctxutil_otel.serve.TraceReceiver` satisfies. With these here, no module of ``serve`` imports
``_server`` but the package itself (no import circle, typing-only included)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ._export import Encoding, ExportResult

__all__ = ["Receiver", "TLSFiles"]


@dataclass(frozen=True, kw_only=True)
class TLSFiles:
    """PEM files of the server certificate (chain) and its private key, for both listeners."""

    cert_file: Path
    key_file: Path

    def read(self) -> tuple[bytes, bytes]:
        """``(key, cert)`` bytes. Raises ``OSError`` naming the file that cannot be read."""
        return self.key_file.read_bytes(), self.cert_file.read_bytes()


class Receiver(Protocol):
    """The receiver as its listeners see it (settings: see ``TraceReceiver``'s arguments)."""

    host: str
    max_request_bytes: int
    tls: TLSFiles | None
    retry_after_s: int
    header_timeout_s: float
    request_timeout_s: float
    min_request_rate: float
    max_connections: int

    def authorized(self, authorization: str | None) -> bool: ...

    def count(self, outcome: str) -> None: ...

    def export(self, payload: bytes, *, encoding: Encoding = ...) -> ExportResult: ...

    def health(self) -> tuple[bool, str]: ...

    def address(self, port: int) -> str: ...
