"""Helpers for the CLI tests."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m ctxutil_otel.cli *args`` in a subprocess (text output captured; the status not checked)."""
    return subprocess.run(
        [sys.executable, "-m", "ctxutil_otel.cli", *args], capture_output=True, text=True, check=False
    )
