"""An error as this package logs one that may come from the application's data: its class and where it was
raised, never its message nor a formatted traceback (the message of an error raised by a user's object, or
quoting a value, may hold the user's text: docs/telemetry.md, "never the text")."""

from __future__ import annotations

import traceback

__all__ = ["error_origin"]

#: The innermost frames named (the raise site and its callers).
_FRAMES = 6


def error_origin(exc: BaseException) -> str:
    """``"RuntimeError at ctxutil_otel/capture/_extract.py:221 in documents_from_output < ..."``: the
    class and the innermost frames (file, line, function; no source line, no message), innermost first."""
    frames = traceback.extract_tb(exc.__traceback__)[-_FRAMES:] if exc.__traceback__ else []
    where = " < ".join(f"{_short(f.filename)}:{f.lineno} in {f.name}" for f in reversed(frames))
    return f"{type(exc).__name__} at {where}" if where else type(exc).__name__


def _short(filename: str) -> str:
    """The path from the package (or site-packages) down, else the file's name."""
    for marker in ("/ctxutil_otel/", "/site-packages/"):
        if marker in filename:
            return filename[filename.rindex(marker) + 1 :]
    return filename.rsplit("/", 1)[-1]
