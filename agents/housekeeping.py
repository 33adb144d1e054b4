"""The agent's background loops beside flushing: expiries every minute, and the group and transaction sweep.

Each loop survives the metadata store being down: a failed turn is logged and the next turn tries again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from storage.errors import StrataError, Unavailable

if TYPE_CHECKING:
    from agents.agent import Agent

log = logging.getLogger("strata.agent")

HOUSEKEEPING_INTERVAL_S = 60.0


async def housekeeping(agent: Agent) -> None:
    """Expire idempotency keys, idle producers' state and transactional ids, every minute. A store that
    fails one expiry skips the rest of that turn; the next turn starts again from the first."""
    metadata, clock, config = agent.metadata, agent.clock, agent.config

    def idempotency() -> Awaitable[int]:
        before = clock.now_ms() - config.idempotency_window_ms
        return asyncio.to_thread(metadata.expire_idempotency, before)

    def producers() -> Awaitable[int]:
        before = clock.now_ms() - config.producer_id_expiration_ms
        return asyncio.to_thread(metadata.expire_producers, before)

    # (what is expired, for the logs; the expiry, answering how many it removed)
    expiries: tuple[tuple[str, Callable[[], Awaitable[int]]], ...] = (
        ("idempotency keys", idempotency),
        ("producer state rows", producers),
        ("transactional ids", agent.transactions.expire),
    )
    while True:
        await clock.asleep(HOUSEKEEPING_INTERVAL_S)
        for what, expire in expiries:
            try:
                removed = await expire()
            except Unavailable as exc:
                log.warning("expiry of %s skipped: %s", what, exc.message)
                break
            if removed:
                log.info("expired %d %s", removed, what)


async def group_sweep(agent: Agent) -> None:
    """Apply due consumer-group expiries and rebalance deadlines, and transaction timeouts."""
    while True:
        await agent.clock.asleep(agent.config.group_sweep_interval_s)
        try:
            await agent.groups.sweep()
        except StrataError as exc:  # the store down, or a group changing underneath: next turn
            log.warning("consumer group sweep skipped: %s", exc.message)
        try:
            await agent.transactions.sweep()
        except StrataError as exc:  # the store down: next turn
            log.warning("transaction timeout sweep skipped: %s", exc.message)
