"""Fixtures for the sampling tests: the shared hand-driven clock."""

from __future__ import annotations

import pytest

from tests.support.doubles import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    """A :class:`~tests.support.doubles.FakeClock` at 1000.0 s."""
    return FakeClock()
