"""Helpers for the CLI tests."""

from __future__ import annotations

import subprocess
import sys

from tests.support.env import environ_without_settings


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m ctxutil_otel.cli *args`` in a subprocess (text output captured; the status not checked)."""
    return subprocess.run(
        [sys.executable, "-m", "ctxutil_otel.cli", *args], capture_output=True, text=True, check=False
    )


def run_demo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m ctxutil_otel demo *args`` in a subprocess, without the caller's ``OTEL_*``/``CTXUTIL_*``
    variables (``env`` added on top); output captured, the status not checked."""
    base = environ_without_settings()
    return subprocess.run(
        [sys.executable, "-m", "ctxutil_otel", "demo", *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=120,
        check=False,
    )
