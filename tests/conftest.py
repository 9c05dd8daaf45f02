"""Suite-wide fixtures.

The evaluation worker's CPU budget (``max_worker_cpu_fraction``, default 5% of one core) paces
evaluations to a share of one core, which suits an application serving requests, not a test pushing
hundreds of evaluations through a default :class:`~ctxutil_otel.worker.Evaluator`. Every test therefore
runs with ``CTXUTIL_MAX_WORKER_CPU_FRACTION=0`` (unlimited); the tests of the budget pass the setting
explicitly, which wins over the environment. Folder fixtures that clear ``CTXUTIL_*`` variables restore
this one (see :func:`unlimited_worker_cpu`).
"""

from __future__ import annotations

import pytest

from ctxutil_otel._settings import env_var

__all__ = ["WORKER_CPU_ENV", "unlimited_worker_cpu"]

WORKER_CPU_ENV = env_var("max_worker_cpu_fraction")


def unlimited_worker_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Set ``CTXUTIL_MAX_WORKER_CPU_FRACTION=0`` for the current test (undone after it)."""
    monkeypatch.setenv(WORKER_CPU_ENV, "0")


@pytest.fixture(autouse=True)
def _unlimited_worker_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    unlimited_worker_cpu(monkeypatch)
