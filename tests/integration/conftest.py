"""Fixtures the integration tests share: a server on every metadata backend, on a clock the test moves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from storage.clock import SkewedClock
from strata.settings import Settings
from tests.fixtures.server import RunningServer, run_server


@pytest.fixture
def clock() -> SkewedClock:
    """Wall time the test can move forward (retention, grace periods, compaction lag)."""
    return SkewedClock()


@pytest.fixture
def srv(backend_settings: Settings, clock: SkewedClock) -> Iterator[RunningServer]:
    """An agent (HTTP) on ``backend_settings``, once per metadata backend, with ``clock`` injected."""
    with run_server(backend_settings, clock=clock) as server:
        yield server
