"""broker/frame_pool.py: a large frame's buffer is used again only once nothing references it."""

from __future__ import annotations

from broker.frame_pool import FramePool

MiB = 1 << 20


def test_a_buffer_nothing_holds_is_used_again_at_the_new_size() -> None:
    pool = FramePool(8 * MiB)
    first = pool.take(MiB)
    ident = id(first)
    del first
    again = pool.take(MiB - 100)
    assert id(again) == ident
    assert len(again) == MiB - 100
    assert pool.reused == 1
    del again
    grown = pool.take(MiB)  # grows back within its allocation
    assert id(grown) == ident
    assert len(grown) == MiB
    assert pool.reused == 2


def test_a_buffer_still_viewed_is_not_handed_out() -> None:
    pool = FramePool(8 * MiB)
    frame = pool.take(MiB)
    batch = memoryview(frame)[100:200]  # what the produce buffer keeps until the flush is answered
    del frame
    other = pool.take(MiB)
    assert other is not batch.obj
    assert pool.reused == 0
    batch.obj[100:105] = b"still"
    assert bytes(batch[:5]) == b"still"  # untouched by the new frame


def test_a_frame_far_smaller_than_a_buffer_gets_its_own() -> None:
    pool = FramePool(8 * MiB)
    ident = id(pool.take(MiB))
    small = pool.take(MiB // 4)  # would leave three quarters of the buffer idle: not taken
    assert id(small) != ident
    assert pool.reused == 0


def test_the_pool_keeps_at_most_its_bound() -> None:
    pool = FramePool(3 * MiB)
    held = [pool.take(MiB) for _ in range(5)]  # all in use: two are not kept
    del held
    again = [pool.take(MiB) for _ in range(5)]
    assert pool.reused == 2
    del again
