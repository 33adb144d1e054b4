"""The agent's background loops beside flushing: expiries every minute, and the group and transaction sweep.

Each loop survives the metadata store being down: a failed turn is logged and the next turn tries again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from storage.errors import StrataError, Unavailable

if TYPE_CHECKING:
    from agents.agent import Agent

log = logging.getLogger("strata.agent")

HOUSEKEEPING_INTERVAL_S = 60.0


async def housekeeping(agent: Agent) -> None:
    """Expire idempotency keys, idle producers' state and transactional ids, every minute."""
    while True:
        await agent.clock.asleep(HOUSEKEEPING_INTERVAL_S)
        before = agent.clock.now_ms() - agent.config.idempotency_window_ms
        try:
            removed = await asyncio.to_thread(agent.metadata.expire_idempotency, before)
        except Unavailable as exc:
            log.warning("idempotency expiry skipped: %s", exc.message)
            continue
        if removed:
            log.info("expired %d idempotency keys", removed)
        before = agent.clock.now_ms() - agent.config.producer_id_expiration_ms
        try:
            removed = await asyncio.to_thread(agent.metadata.expire_producers, before)
        except Unavailable as exc:
            log.warning("producer state expiry skipped: %s", exc.message)
            continue
        if removed:
            log.info("expired %d producer state rows", removed)
        try:
            removed = await agent.transactions.expire()
        except Unavailable as exc:
            log.warning("transactional id expiry skipped: %s", exc.message)
            continue
        if removed:
            log.info("expired %d transactional ids", removed)


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
