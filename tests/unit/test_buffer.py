"""The produce buffer's memory budget and the Reservation that is its only way in."""

from __future__ import annotations

import asyncio

import pytest

from agents.buffer import PartitionBatch, PendingRequest, ProduceBuffer, ProduceRequest
from agents.offsets import FIRST_RECORD
from storage.errors import BufferFull


def request(nbytes: int, topic: str = "t") -> PendingRequest:
    batch = PartitionBatch(topic, 0, b"x" * nbytes, 1, 0, 0)
    loop = asyncio.new_event_loop()
    try:
        future: asyncio.Future[list[tuple[int, int]]] = loop.create_future()
    finally:
        loop.close()
    return PendingRequest(ProduceRequest(topic, [batch], FIRST_RECORD), None, future)


def test_reservation_counts_until_released_once() -> None:
    buf = ProduceBuffer(100)
    r = buf.reserve(40)
    assert (buf.bytes_held, r.size) == (40, 40)
    r.release()
    r.release()  # released once: a second release gives nothing back twice
    assert (buf.bytes_held, r.size) == (0, 0)


def test_reservation_shrinks() -> None:
    buf = ProduceBuffer(100)
    r = buf.reserve(40)
    r.shrink_to(10)
    assert buf.bytes_held == 10
    r.shrink_to(30)  # shrink_to never grows: growing needs admission (grow)
    assert buf.bytes_held == 10
    r.shrink_to(-5)
    assert (buf.bytes_held, r.size) == (0, 0)


def test_reservation_grows_only_through_admission() -> None:
    buf = ProduceBuffer(100)
    alone = buf.reserve(40)
    alone.grow(200)  # only its own bytes are held: admitted, as an empty buffer admits anything
    assert (buf.bytes_held, alone.size) == (240, 240)
    alone.release()
    other = buf.reserve(50)
    r = buf.reserve(30)
    with pytest.raises(BufferFull):
        r.grow(21)  # 50 + 30 + 21 > 100
    assert (buf.bytes_held, r.size) == (80, 30)  # a refused growth changes nothing
    r.grow(20)
    assert (buf.bytes_held, r.size) == (100, 50)
    r.release()
    other.release()
    assert buf.bytes_held == 0


def test_reserve_refuses_past_the_bound_but_an_empty_buffer_admits_anything() -> None:
    buf = ProduceBuffer(100)
    big = buf.reserve(500)  # empty: admitted, so the request reaches its own validation error
    with pytest.raises(BufferFull):
        buf.reserve(1)
    big.release()
    a = buf.reserve(60)
    with pytest.raises(BufferFull):
        buf.reserve(41)
    b = buf.reserve(40)
    assert buf.bytes_held == 100
    a.release()
    b.release()
    assert buf.bytes_held == 0


def test_add_consumes_the_requests_size_of_the_reservation() -> None:
    buf = ProduceBuffer(100)
    r = buf.reserve(50)
    buf.add(request(20), r, now=1.0)
    # The rest stays reserved: a Kafka request's other partitions are added from the same reservation.
    assert (buf.bytes_held, buf.open_bytes, buf.reserved_bytes, r.size) == (50, 20, 30, 30)
    buf.add(request(30), r, now=2.0)
    assert (buf.bytes_held, buf.open_bytes, buf.reserved_bytes, r.size) == (50, 50, 0, 0)
    r.release()  # after add: a no-op, the bytes now belong to the queued requests
    assert buf.bytes_held == 50
    assert buf.first_append_at == 1.0


def test_release_gives_back_what_add_left_of_the_reservation() -> None:
    buf = ProduceBuffer(100)
    r = buf.reserve(50)
    buf.add(request(20), r, now=1.0)
    r.release()
    assert (buf.bytes_held, buf.reserved_bytes, r.size) == (20, 0, 0)


def test_add_admits_only_growth_beyond_the_reservation() -> None:
    buf = ProduceBuffer(100)
    other = buf.reserve(70)
    r = buf.reserve(20)
    with pytest.raises(BufferFull):
        buf.add(request(40), r, now=0.0)  # needs 20 more than reserved; only 10 are free
    assert (buf.bytes_held, r.size, len(buf)) == (90, 20, 0)  # refused: nothing changed
    buf.add(request(30), r, now=0.0)  # 10 more fits exactly
    assert (buf.bytes_held, len(buf)) == (100, 1)
    other.release()


def test_drain_hands_over_in_cut_order_and_release_frees() -> None:
    buf = ProduceBuffer(100)
    buf.add(request(10), buf.reserve(10), now=0.0)
    first = buf.drain()
    buf.add(request(8), buf.reserve(0), now=0.0)
    second = buf.drain()
    assert (first.seq, second.seq) == (0, 1)
    assert (first.size, second.size, buf.bytes_held, buf.open_bytes) == (10, 8, 18, 0)
    assert buf.first_append_at is None
    assert len(buf) == 0
    buf.release(first)
    buf.release(second)
    assert buf.bytes_held == 0


async def test_reserve_when_free_waits_for_room_instead_of_refusing() -> None:
    buf = ProduceBuffer(100)
    held = buf.reserve(90)
    waiter = asyncio.create_task(buf.reserve_when_free(50))
    await asyncio.sleep(0.01)
    assert not waiter.done()  # a Kafka connection stops reading here
    held.shrink_to(60)
    await asyncio.sleep(0.01)
    assert not waiter.done()  # 60 + 50 still exceeds 100
    held.release()
    got = await asyncio.wait_for(waiter, 1)
    assert (got.size, buf.bytes_held) == (50, 50)
