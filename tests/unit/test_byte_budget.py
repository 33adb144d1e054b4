"""broker/budget.py: grants capped at the total, first come first served, nothing lost on cancellation."""

from __future__ import annotations

import asyncio

from agents.budget import ByteBudget


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


async def test_a_waiter_cancelled_before_a_release_in_the_same_turn_leaks_nothing() -> None:
    """Cancelled while queued, then a release runs before the waiter's own handler: the release skips it
    (no grant to a cancelled future, no exception), and the budget is whole afterwards."""
    budget = ByteBudget(64)
    first = await budget.acquire(50)
    waiter = asyncio.create_task(budget.acquire(50))
    await asyncio.sleep(0)
    waiter.cancel()
    budget.release(first)  # the same loop turn: the waiter's CancelledError has not been handled yet
    try:
        await waiter
    except asyncio.CancelledError:
        pass
    assert budget.held == 0
    async with asyncio.timeout(1):
        assert await budget.acquire(50) == 50


async def test_a_wait_bounded_by_a_timeout_takes_nothing() -> None:
    budget = ByteBudget(64)
    await budget.acquire(50)
    try:
        async with asyncio.timeout(0.01):
            await budget.acquire(50)
    except TimeoutError:
        pass
    else:
        raise AssertionError("the wait should have timed out")
    assert budget.held == 50
    budget.release(50)
    assert budget.held == 0
