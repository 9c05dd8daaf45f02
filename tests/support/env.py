"""The process environment the tests run in: no ``CTXUTIL_*`` or ``OTEL_*`` variable from outside.

Settings resolve argument > ``CTXUTIL_*`` > default and the OpenTelemetry SDK reads ``OTEL_*``, so a
developer's shell must not change what a test sees. :func:`clean_environment` is applied to every test by
the suite-wide autouse fixture in tests/conftest.py (the one place that does it); it then lifts the
worker's CPU budget (:data:`WORKER_CPU_ENV` = ``0``), see tests/conftest.py for why.
:func:`environ_without_settings` is the environment for a subprocess that must see the defaults.
"""

from __future__ import annotations

import os

import pytest

__all__ = ["SETTING_PREFIXES", "WORKER_CPU_ENV", "clean_environment", "environ_without_settings"]

SETTING_PREFIXES = ("CTXUTIL_", "OTEL_")
"""Prefixes of the variables that configure ctxutil-otel and the OpenTelemetry SDK."""

WORKER_CPU_ENV = "CTXUTIL_MAX_WORKER_CPU_FRACTION"
"""The variable of ``Settings.max_worker_cpu_fraction`` (checked against the code in tests/test_docs.py)."""


def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """For the current test (undone after it): delete every ``CTXUTIL_*`` and ``OTEL_*`` variable, then
    set ``CTXUTIL_MAX_WORKER_CPU_FRACTION=0`` (the worker's CPU budget lifted)."""
    for name in list(os.environ):
        if name.upper().startswith(SETTING_PREFIXES):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(WORKER_CPU_ENV, "0")


def environ_without_settings(*extra_prefixes: str) -> dict[str, str]:
    """A copy of ``os.environ`` for a subprocess, without ``CTXUTIL_*`` / ``OTEL_*`` (so also without the
    suite's CPU-budget override) nor variables starting with any of ``extra_prefixes``."""
    prefixes = SETTING_PREFIXES + tuple(p.upper() for p in extra_prefixes)
    return {k: v for k, v in os.environ.items() if not k.upper().startswith(prefixes)}
