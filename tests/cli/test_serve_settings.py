"""The evaluator settings ``serve`` builds: no worker CPU budget unless the user sets one.

tests/conftest.py sets ``CTXUTIL_MAX_WORKER_CPU_FRACTION=0`` for the whole suite, so the default case
deletes it first.
"""

from __future__ import annotations

import pytest

from ctxutil_otel import Settings
from ctxutil_otel.cli._serve import _settings

from ..support.env import WORKER_CPU_ENV


def test_worker_cpu_budget_is_off_by_default_in_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKER_CPU_ENV)
    assert Settings().max_worker_cpu_fraction == 0.03  # the library default serve overrides
    assert _settings().max_worker_cpu_fraction == 0


@pytest.mark.parametrize("value", ["0.2", "0.05"])
def test_users_worker_cpu_budget_is_respected_by_serve(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(WORKER_CPU_ENV, value)
    assert _settings().max_worker_cpu_fraction == float(value)


def test_a_blank_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKER_CPU_ENV, "  ")
    assert _settings().max_worker_cpu_fraction == 0
