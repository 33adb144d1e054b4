"""broker/budget.py: grants capped at the total, first come first served, nothing lost on cancellation."""

from __future__ import annotations

import asyncio

from broker.budget import ByteBudget


async def test_grants_are_capped_and_wait_in_arrival_order() -> None:
    budget = ByteBudget(100)
    assert await budget.acquire(1_000) == 100  # capped at the total: a huge request still gets served
    order: list[str] = []

    async def take(name: str, n: int) -> int:
        grant = await budget.acquire(n)
        order.append(name)
        return grant

    big = asyncio.create_task(take("big", 80))
    await asyncio.sleep(0)
    small = asyncio.create_task(take("small", 10))
    await asyncio.sleep(0)
    assert order == []  # both wait while the first grant is held
    budget.release(100)
    assert await big == 80
    assert await small == 10
    assert order == ["big", "small"]  # the small one did not overtake the big one
    assert budget.held == 90
    budget.release(80)
    budget.release(10)
    assert budget.held == 0
    assert await budget.acquire(0) == 1  # never zero: a partition's first batch always goes out


async def test_a_cancelled_waiter_takes_nothing_and_lets_the_next_in() -> None:
    budget = ByteBudget(10)
    await budget.acquire(10)
    gone = asyncio.create_task(budget.acquire(10))
    after = asyncio.create_task(budget.acquire(5))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    budget.release(10)
    assert await after == 5
    assert budget.held == 5
