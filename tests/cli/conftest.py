"""Helpers for the CLI tests."""

from __future__ import annotations

import os
import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m ctxutil_otel.cli *args`` in a subprocess (text output captured; the status not checked)."""
    return subprocess.run(
        [sys.executable, "-m", "ctxutil_otel.cli", *args], capture_output=True, text=True, check=False
    )


def run_demo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m ctxutil_otel demo *args`` in a subprocess, without the caller's ``OTEL_*``/``CTXUTIL_*``
    variables (``env`` added on top); output captured, the status not checked."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CTXUTIL_"))}
    return subprocess.run(
        [sys.executable, "-m", "ctxutil_otel", "demo", *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=120,
        check=False,
    )
