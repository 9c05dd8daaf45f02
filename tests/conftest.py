"""Suite-wide fixtures.

Every test runs in a clean environment (:func:`tests.support.env.clean_environment`): no ``CTXUTIL_*`` or
``OTEL_*`` variable from the developer's shell, so settings and the OpenTelemetry SDK see their defaults
unless the test sets a variable itself. This is the only fixture that cleans the environment; folder
fixtures must not delete these variables again (they would undo the override below).

The evaluation worker's CPU budget (``max_worker_cpu_fraction``, default 3% of one core) paces
evaluations to a share of one core, which suits an application serving requests, not a test pushing
hundreds of evaluations through a default :class:`~ctxutil_otel.worker.Evaluator`. Every test therefore
runs with ``CTXUTIL_MAX_WORKER_CPU_FRACTION=0`` (unlimited); the tests of the budget pass the setting
explicitly, which wins over the environment, or delete the variable.
"""

from __future__ import annotations

import pytest

from tests.support.env import clean_environment


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_environment(monkeypatch)
