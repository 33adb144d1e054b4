"""Commit turns in cut order, whatever order the uploads finish in."""

from __future__ import annotations

import asyncio

from agents.sequencer import CommitSequencer


async def test_turns_follow_cut_order_not_arrival() -> None:
    seq = CommitSequencer()
    committed: list[int] = []

    async def flush(n: int, upload_s: float) -> None:
        await asyncio.sleep(upload_s)  # later flushes upload faster
        await seq.wait_turn(n)
        committed.append(n)
        await seq.done(n)

    await asyncio.gather(*(flush(n, 0.02 * (4 - n)) for n in range(4)))
    assert committed == [0, 1, 2, 3]
    assert seq.next_turn == 4


async def test_a_failed_turn_does_not_block_the_next_and_done_is_idempotent() -> None:
    seq = CommitSequencer()
    await seq.done(1)  # flush 1 ended first (e.g. failed before its upload)
    assert seq.next_turn == 0
    waiter = asyncio.create_task(seq.wait_turn(2))
    await asyncio.sleep(0)
    assert not waiter.done()
    await seq.done(0)
    await asyncio.wait_for(waiter, 1)
    await seq.done(0)
    await seq.done(1)
    assert seq.next_turn == 2
