"""The agent's minute loop of expiries (agents/housekeeping.py): each expiry in order, with its cutoff; a
store that fails one skips the rest of that turn, and the next turn starts again from the first."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from agents.housekeeping import HOUSEKEEPING_INTERVAL_S, housekeeping
from storage.errors import Unavailable

NOW_MS = 10_000_000


class Clock:
    """Each sleep returns at once, until ``turns`` have passed: then the loop is cancelled."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.slept: list[float] = []

    async def asleep(self, seconds: float) -> None:
        if len(self.slept) == self.turns:
            raise asyncio.CancelledError
        self.slept.append(seconds)

    def now_ms(self) -> int:
        return NOW_MS


@dataclass
class Store:
    calls: list[tuple[str, int]] = field(default_factory=list)
    fail_producers_once: bool = True

    def expire_idempotency(self, before: int) -> int:
        self.calls.append(("idempotency", before))
        return 2

    def expire_producers(self, before: int) -> int:
        self.calls.append(("producers", before))
        if self.fail_producers_once:
            self.fail_producers_once = False
            raise Unavailable("the metadata store is down")
        return 0


@dataclass
class Transactions:
    store: Store

    async def expire(self) -> int:
        self.store.calls.append(("transactional ids", 0))
        return 1


@dataclass
class Config:
    idempotency_window_ms: int = 1_000
    producer_id_expiration_ms: int = 2_000


@dataclass
class FakeAgent:
    clock: Clock
    metadata: Store
    transactions: Transactions
    config: Config = field(default_factory=Config)


async def test_a_failed_expiry_skips_the_rest_of_its_turn(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="strata.agent")
    store = Store()
    agent = FakeAgent(Clock(turns=2), store, Transactions(store))
    with pytest.raises(asyncio.CancelledError):
        await housekeeping(cast(Any, agent))
    assert agent.clock.slept == [HOUSEKEEPING_INTERVAL_S] * 2
    assert store.calls == [
        ("idempotency", NOW_MS - 1_000),
        ("producers", NOW_MS - 2_000),  # fails: the transactional ids wait for the next turn
        ("idempotency", NOW_MS - 1_000),
        ("producers", NOW_MS - 2_000),
        ("transactional ids", 0),
    ]
    messages = [record.getMessage() for record in caplog.records]
    assert "expiry of producer state rows skipped: the metadata store is down" in messages
    assert messages.count("expired 2 idempotency keys") == 2
    assert "expired 1 transactional ids" in messages
    assert not [m for m in messages if m.startswith("expired 0")]
