"""The environment the serve tests run in is the suite's: the worker's CPU budget lifted.

tests/serve/conftest.py used to delete every ``CTXUTIL_*`` variable after the suite-wide fixture had set
``CTXUTIL_MAX_WORKER_CPU_FRACTION=0``, so the evaluators built here ran with the 3% default budget the
suite promises to lift (tests/conftest.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ctxutil_otel import Settings

from .conftest import Served


def test_serve_tests_run_with_the_worker_cpu_budget_lifted(make_served: Callable[..., Served]) -> None:
    assert os.environ.get("CTXUTIL_MAX_WORKER_CPU_FRACTION") == "0"
    assert Settings().max_worker_cpu_fraction == 0
    assert make_served().evaluator.settings.max_worker_cpu_fraction == 0


def test_only_the_suites_override_is_set() -> None:
    """Nothing from the developer's shell: the one ``CTXUTIL_*`` variable is the suite's, no ``OTEL_*``."""
    names = [name for name in os.environ if name.upper().startswith(("CTXUTIL_", "OTEL_"))]
    assert names == ["CTXUTIL_MAX_WORKER_CPU_FRACTION"]
